"""The registering command's decision, pure: the name's state and the hash in; the
`workflow.registered` to record, or None when the name points there already (the
rules' `ALREADY`: nothing to do, nothing written)."""

from __future__ import annotations

from uwf.workflows.events import WorkflowRegistered
from uwf.workflows.rules import ALREADY, WorkflowState, refusal


def register(state: WorkflowState | None, name: str, workflow_hash: str
             ) -> WorkflowRegistered | None:
    """Point `name` at `workflow_hash`, naming the hash it pointed at until now."""
    data = WorkflowRegistered(name, workflow_hash, None if state is None else state.hash)
    code = refusal(state, data)
    assert code in (None, ALREADY), code  # `previous` is the state's: only ALREADY is left
    return None if code == ALREADY else data
