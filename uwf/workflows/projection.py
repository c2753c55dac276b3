"""The `workflows` view: each registered name and the Workflow node it points at."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from uwf.engine.events import Envelope
from uwf.engine.projection import StructProjection
from uwf.workflows.events import WorkflowRegistered


class WorkflowState(msgspec.Struct, frozen=True, rename="camel"):
    name: str
    hash: str
    registered_at: str
    registered_seq: int
    versions: int


class WorkflowsProjection(StructProjection):
    name: ClassVar[str] = "workflows"
    version: ClassVar[int] = 1
    event_types: ClassVar[frozenset[str]] = frozenset({WorkflowRegistered.type})
    state_type: ClassVar[type[msgspec.Struct]] = WorkflowState

    def key(self, event: Envelope) -> str:
        data: WorkflowRegistered = event.data
        return data.name

    def apply(self, state: WorkflowState | None, event: Envelope) -> WorkflowState:
        data: WorkflowRegistered = event.data
        versions = 1 if state is None else state.versions + (state.hash != data.hash)
        return WorkflowState(data.name, data.hash, event.ts, event.seq, versions)
