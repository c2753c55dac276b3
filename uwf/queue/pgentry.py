"""A queue entry's row on PostgreSQL: its JSON as the ordinary way wrote it, and the
fields a server-side lease or complete changes as columns beside it (schema 7, issue 31;
the shape: uwf/engine/pgoverlay.py).

A lease and a complete (uwf/queue/pgcalls.py) write the entry's status, its lease's
expiry, pool and live key (the view's declared columns, as before) and its overlay:

- `e_at`: the entry's `updatedAt` (the instant of the last command written here;
  NULL: the overlay is empty and `value` is the whole entry);
- `e_lease`: its `lease`, as JSON (NULL: none);
- `e_run`: its `run`, as JSON, when a complete named one (NULL: as in `value`);
- `e_events`: how many events these commands added to its `events`.

Its `nextEligibleAtMs` is null once either has run. A read builds the entry's JSON
from `value` and the overlay (`OVERLAY.value_sql`): msgspec's bytes, as a fold in
Python writes them (tests/contract/test_pgentry.py; `registry verify` compares every
row with a replay's). `entry` does the same in Python, for a complete's answer.
"""

from __future__ import annotations

import functools
import json

import msgspec

from uwf.engine.pgoverlay import Overlay
from uwf.queue.entry import Lease, QueueEntry
from uwf.queue.pgjson import Splice

# The fields the overlay holds (by attribute name), as `Splice` edits them at read.
CHANGED = ("updated_at", "status", "run", "lease", "next_eligible_at_ms", "events")
COLUMNS = (("e_at", "text"), ("e_lease", "text"), ("e_run", "text"), ("e_events", "int"))


def _value_sql() -> str:
    edit = Splice(QueueEntry, "value", "x.at", changed=CHANGED, read=("run", "events"))
    built = edit.value({
        "updated_at": "to_json(e_at)::text", "status": "to_json(c_status)::text",
        "run": f"coalesce(e_run, {edit.read('run')})", "lease": "e_lease",
        "next_eligible_at_ms": "NULL",
        "events": f"({edit.read('events')}::bigint + e_events)::text"})
    return (f"CASE WHEN e_at IS NULL THEN value ELSE (SELECT {built} FROM "
            f"(SELECT {edit.positions()} AS at) x) END")


@functools.cache
def overlay() -> Overlay:
    """The queue view's overlay (made once a process: its SQL is generated)."""
    return Overlay(COLUMNS, _value_sql())


# The sched view's one row: its policy kept parsed, for the lease to read (NULL: not
# parsed since the row was written; the first lease after parses it and keeps it).
POLICY = Overlay((("e_policy", "jsonb"),))


def entry(value: bytes, *, ts: str, status: str, lease: Lease | None, run_json: str | None,
          events: int) -> QueueEntry:
    """The entry a read builds from `value` and an overlay holding these."""
    base = msgspec.json.decode(value, type=QueueEntry)
    run = base.run if run_json is None else json.loads(run_json)
    return msgspec.structs.replace(base, updated_at=ts, status=status, run=run, lease=lease,
                                   next_eligible_at_ms=None, events=base.events + events)
