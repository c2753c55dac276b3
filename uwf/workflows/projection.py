"""The `workflows` view: each registered name and the Workflow node it points at, as the
name's `evolve` (`uwf.workflows.rules`) leaves it."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from uwf.engine.events import Envelope
from uwf.engine.projection import StructProjection
from uwf.workflows.events import WorkflowRegistered
from uwf.workflows.rules import WorkflowState, evolve

__all__ = ["WorkflowState", "WorkflowsProjection"]


class WorkflowsProjection(StructProjection):
    name: ClassVar[str] = "workflows"
    version: ClassVar[int] = 1
    event_types: ClassVar[frozenset[str]] = frozenset({WorkflowRegistered.type})
    state_type: ClassVar[type[msgspec.Struct]] = WorkflowState

    def key(self, event: Envelope) -> str:
        data: WorkflowRegistered = event.data
        return data.name

    def apply(self, state: WorkflowState | None, event: Envelope) -> WorkflowState:
        return evolve(state, event)
