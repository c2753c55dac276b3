"""`log verify`'s check of the registry's events: each `workflow.registered` names as
`previous` the hash its workflow pointed at until then (SPEC §9)."""

from __future__ import annotations

from collections.abc import Mapping

from uwf.engine.events import Envelope
from uwf.engine.feature import Check
from uwf.workflows.events import WorkflowRegistered


class WorkflowOrder:
    """The registered hash per workflow, as the log has them so far."""

    def __init__(self, made: Mapping[str, Check]) -> None:
        self.workflows: dict[str, str] = {}

    def __call__(self, envelope: Envelope) -> str | None:
        data = envelope.data
        if not isinstance(data, WorkflowRegistered):
            return None
        current = self.workflows.get(data.name)
        self.workflows[data.name] = data.hash
        if data.previous != current:
            return f"previous is {data.previous}, but {data.name} pointed at {current}"
        return None
