"""Pure folds of events into view states (no I/O, no clock, no randomness), and the
event catalogue each feature owns."""

from __future__ import annotations

from uwf.engine.events import EventCatalog
from uwf.projections.base import StructProjection
from uwf.projections.queue import QueueProjection, SchedProjection
from uwf.projections.queue_events import QUEUE_EVENTS
from uwf.projections.run_events import RUN_EVENTS
from uwf.projections.runs import RunsProjection
from uwf.projections.steps import StepsProjection
from uwf.projections.store import StoreProjection
from uwf.projections.thread_events import THREAD_EVENTS
from uwf.projections.threads import ThreadsProjection
from uwf.projections.workflow_events import WORKFLOW_EVENTS
from uwf.projections.workflows import WorkflowsProjection


def all_projections() -> list[StructProjection]:
    """Every view uwf maintains, in a fixed order."""
    return [StoreProjection(), WorkflowsProjection(), ThreadsProjection(), RunsProjection(),
            StepsProjection(), QueueProjection(), SchedProjection()]


def event_catalog() -> EventCatalog:
    """The core event types plus every feature's, registered explicitly."""
    return EventCatalog(WORKFLOW_EVENTS, THREAD_EVENTS, RUN_EVENTS, QUEUE_EVENTS)
