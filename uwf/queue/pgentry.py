"""A queue entry's row on PostgreSQL: its JSON as the ordinary way wrote it, and the
fields a server-side lease or complete changes as columns beside it (schema 7, issue 31;
the shape: uwf/engine/pgoverlay.py; its columns and SQL are declared with the queue's
`Feature`, uwf/queue/feature.py, which the store reads them from).

A lease and a complete (uwf/queue/pgcalls.py) write the entry's status, its lease's
expiry, pool and live key (the view's declared columns, as before) and its overlay:

- `e_at`: the entry's `updatedAt` (the instant of the last command written here;
  NULL: the overlay is empty and `value` is the whole entry);
- `e_lease`: its `lease`, as JSON (NULL: none);
- `e_run`: its `run`, as JSON, when a complete named one (NULL: as in `value`);
- `e_events`: how many events these commands added to its `events`.

Its `nextEligibleAtMs` is null once either has run. A read builds the entry's JSON
from `value` and the overlay (`overlay().value_sql`): msgspec's bytes, as a fold in
Python writes them (tests/contract/test_pgentry.py; `registry verify` compares every
row with a replay's). `entry` does the same in Python, for a complete's answer.
"""

from __future__ import annotations

import json

import msgspec

from uwf.engine.pgoverlay import Overlay
from uwf.queue.entry import Lease, QueueEntry
from uwf.queue.feature import ENTRY_CHANGED as CHANGED
from uwf.queue.feature import ENTRY_COLUMNS as COLUMNS
from uwf.queue.feature import overlays

__all__ = ["CHANGED", "COLUMNS", "entry", "overlay", "policy"]


def overlay() -> Overlay:
    """The queue view's overlay (its SQL made once a process: `feature.overlays`)."""
    return overlays()["queue"]


def policy() -> Overlay:
    """The sched view's: the policy kept parsed (NULL: not parsed since the row was
    written; the first lease after parses it and keeps it)."""
    return overlays()["sched"]


def entry(value: bytes, *, ts: str, status: str, lease: Lease | None, run_json: str | None,
          events: int) -> QueueEntry:
    """The entry a read builds from `value` and an overlay holding these."""
    base = msgspec.json.decode(value, type=QueueEntry)
    run = base.run if run_json is None else json.loads(run_json)
    return msgspec.structs.replace(base, updated_at=ts, status=status, run=run, lease=lease,
                                   next_eligible_at_ms=None, events=base.events + events)
