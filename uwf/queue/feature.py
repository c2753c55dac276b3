"""The queue as a value (`uwf.engine.feature.Feature`): its events, the queue and sched
views, its `log verify` check, and on PostgreSQL its views' overlays."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from uwf.engine.feature import Check, Feature
from uwf.queue.events import QUEUE_EVENTS
from uwf.queue.projection import QueueProjection, SchedProjection

if TYPE_CHECKING:
    from uwf.engine.pgoverlay import Overlay


def _check(made: Mapping[str, Check]) -> Check:
    """A new `log verify` check (its module loaded by `log verify` only)."""
    from uwf.queue.order import QueueOrder

    return QueueOrder(made)


# On PostgreSQL (schema 7): the entry's fields a server-side lease and complete change
# (by attribute name), kept as columns beside its JSON, and those columns (what each
# holds: uwf/queue/pgentry.py).
ENTRY_CHANGED = ("updated_at", "status", "run", "lease", "next_eligible_at_ms", "events")
ENTRY_COLUMNS = (("e_at", "text"), ("e_lease", "text"), ("e_run", "text"),
                 ("e_events", "int"))


@functools.cache
def overlays() -> Mapping[str, Overlay]:
    """On PostgreSQL, the queue view's overlay (a read builds the entry's JSON from the
    JSON and its columns) and the sched view's (the policy kept parsed, NULL until a
    lease parses it after a write); made once a process, by a store on a server only."""
    from uwf.engine.pgoverlay import Overlay
    from uwf.engine.pgsplice import Splice
    from uwf.queue.entry import QueueEntry

    edit = Splice(QueueEntry, "value", "x.at", changed=ENTRY_CHANGED, read=("run", "events"))
    built = edit.value({
        "updated_at": "to_json(e_at)::text", "status": "to_json(c_status)::text",
        "run": f"coalesce(e_run, {edit.read('run')})", "lease": "e_lease",
        "next_eligible_at_ms": "NULL",
        "events": f"({edit.read('events')}::bigint + e_events)::text"})
    value = (f"CASE WHEN e_at IS NULL THEN value ELSE (SELECT {built} FROM "
             f"(SELECT {edit.positions()} AS at) x) END")
    return {"queue": Overlay(ENTRY_COLUMNS, value), "sched": Overlay((("e_policy", "jsonb"),))}


FEATURE = Feature(name="queue", events=QUEUE_EVENTS, views=(QueueProjection, SchedProjection),
                  check=_check, overlays=overlays)
