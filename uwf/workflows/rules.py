"""A registered workflow name as an aggregate: its whole state (the hash it points at,
since when, how many versions it has had), `evolve` (the name after a
`workflow.registered`), and its one invariant, `refusal`: a registration names as
`previous` the hash the name pointed at until then, and moves the name (registering
the hash it already points at is nothing to do, and writes nothing).

Read by the registering command (`uwf.workflows.decide`), the `workflows` view (this
`evolve` folded) and `log verify` (`uwf.workflows.order`, folding the same `evolve`).
Pure: no store, no clock, no I/O.
"""

from __future__ import annotations

import msgspec

from uwf.engine.events import Envelope
from uwf.workflows.events import WorkflowRegistered


class WorkflowState(msgspec.Struct, frozen=True, rename="camel"):
    name: str
    hash: str
    registered_at: str
    registered_seq: int
    versions: int


# Why a registration may not happen: the codes `refusal` returns.
ALREADY = "already"  # the name points at that hash already: nothing to record
PREVIOUS = "previous"  # `previous` is not the hash the name pointed at
REFUSALS = (ALREADY, PREVIOUS)


def refusal(state: WorkflowState | None, data: WorkflowRegistered) -> str | None:
    """Why `data` may not follow the name in `state` (None: never registered), or None."""
    current = None if state is None else state.hash
    if data.previous != current:
        return PREVIOUS
    if data.hash == current:
        return ALREADY
    return None


def problem(state: WorkflowState | None, data: WorkflowRegistered) -> str | None:
    """What `log verify` says of the registration `data` (None: allowed)."""
    code = refusal(state, data)
    current = None if state is None else state.hash
    if code == ALREADY:
        return f"{data.name} registered again at {current}, which it already pointed at"
    if code == PREVIOUS:
        return f"previous is {data.previous}, but {data.name} pointed at {current}"
    return None


def evolve(state: WorkflowState | None, event: Envelope) -> WorkflowState:
    """The name after `event`, as it says (a forged one too): pointing at its hash, one
    version more when the hash moved."""
    data: WorkflowRegistered = event.data
    versions = 1 if state is None else state.versions + (state.hash != data.hash)
    return WorkflowState(data.name, data.hash, event.ts, event.seq, versions)
