"""The queue as a value (`uwf.engine.feature.Feature`): its events, the queue and sched
views, its `log verify` check."""

from __future__ import annotations

from uwf.engine.feature import Feature
from uwf.queue.events import QUEUE_EVENTS
from uwf.queue.order import QueueOrder
from uwf.queue.projection import QueueProjection, SchedProjection

FEATURE = Feature(name="queue", events=QUEUE_EVENTS, views=(QueueProjection, SchedProjection),
                  check=QueueOrder)
