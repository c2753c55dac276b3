"""The queue as a value (`uwf.engine.feature.Feature`): its events, the queue and sched
views, its `log verify` check."""

from __future__ import annotations

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


def _overlays() -> Mapping[str, Overlay]:
    """On PostgreSQL, the entry's fields a server-side lease and complete write as columns,
    the policy kept parsed (its module loaded by a store on a server only)."""
    from uwf.queue.pgentry import POLICY, overlay

    return {"queue": overlay(), "sched": POLICY}


FEATURE = Feature(name="queue", events=QUEUE_EVENTS, views=(QueueProjection, SchedProjection),
                  check=_check, overlays=_overlays)
