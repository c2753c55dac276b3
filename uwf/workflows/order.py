"""`log verify`'s check of the registry's events: each name folded by its `evolve`
(uwf/workflows/rules.py, as the `workflows` view is), each `workflow.registered` judged
by its `refusal`: it names as `previous` the hash its workflow pointed at until then,
and moves the name (SPEC §9)."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.events import Envelope
from uwf.engine.feature import Check
from uwf.workflows.events import WorkflowRegistered
from uwf.workflows.rules import WorkflowState, evolve, problem


class WorkflowOrder:
    """Each registered name's state, as the log has them so far."""

    def __init__(self, made: Mapping[str, Check]) -> None:
        self.workflows: dict[str, WorkflowState] = {}

    def __call__(self, envelope: Envelope) -> str | None:
        data = envelope.data
        if not isinstance(data, WorkflowRegistered):
            return None
        state = self.workflows.get(data.name)
        self.workflows[data.name] = evolve(state, envelope)
        return problem(state, data)
