"""The workflows feature's events: a name now points at a Workflow node."""

from __future__ import annotations

from typing import ClassVar

from uwf.engine.events import EventData


class WorkflowRegistered(EventData, frozen=True):
    """A workflow name now points at a Workflow node."""

    type: ClassVar[str] = "workflow.registered"
    refs: ClassVar[tuple[str, ...]] = ("hash", "previous")
    name: str
    hash: str
    previous: str | None = None


EVENT_TYPES: dict[str, type[EventData]] = {}


WORKFLOW_EVENTS: tuple[type[EventData], ...] = (WorkflowRegistered,)
