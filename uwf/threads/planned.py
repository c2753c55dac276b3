"""The thread's fold for one event type at a time, for a full replay (uwf/engine/
bulkfold.py): each function is `evolve` (uwf/threads/rules.py) for the transitions its
table allows, spelled out for the type, with no lookups of kinds, phases or refusals;
an event the table refuses (a forged or damaged log: the chain does not say a log
obeys the table) is left to `evolve` itself, so the state is the same, event for
event, as `evolve` folds it.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from uwf.engine.events import Envelope
from uwf.threads.events import (
    ThreadBlocked,
    ThreadEnded,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
)
from uwf.threads.rules import TRANSITIONS, _last_failure, evolve
from uwf.threads.state import InFlight, ThreadState

Evolve = Callable[[ThreadState | None, Envelope], ThreadState | None]
_replace = msgspec.structs.replace


def _from(kind: str) -> frozenset[str | None]:
    """The states the table lets `kind` follow."""
    return frozenset(state for state, allowed in TRANSITIONS.items() if kind in allowed)


# The states a step may start from, a thread be blocked in, end in, be killed in.
_STARTS = _from("step_started")
_BLOCKS = _from("blocked")
_ENDS = _from("ended")
_KILLS = _from("killed")


def _step_started(state: ThreadState | None, event: Envelope) -> ThreadState | None:
    if state is None or state.state not in _STARTS:
        return evolve(state, event)
    data: ThreadStepStarted = event.data
    ts = event.ts
    return _replace(state, updated_at=ts, state="running", in_flight=InFlight(
        data.step_id, data.role, data.edge_prompt, data.agent, data.deadline_ms, ts),
        blocked=None, blocked_role=None)


def _stepped(state: ThreadState | None, event: Envelope) -> ThreadState | None:
    data: ThreadStepped = event.data
    if state is None or data.reused is not None or state.state != "running":
        return evolve(state, event)
    flight = state.in_flight
    if flight is None or flight.step_id != data.step_id:
        return evolve(state, event)
    role = data.role
    visits = state.visits
    return _replace(state, updated_at=event.ts, state="idle", head=data.head,
                    steps=state.steps + 1, last_role=role, last_status=data.status,
                    in_flight=None, last_failure=None,
                    visits={**visits, role: visits.get(role, 0) + 1}, asked=None)


def _step_failed(state: ThreadState | None, event: Envelope) -> ThreadState | None:
    data: ThreadStepFailed = event.data
    if state is None or state.state != "running":
        return evolve(state, event)
    flight = state.in_flight
    if flight is None or flight.step_id != data.step_id:
        return evolve(state, event)
    return _replace(state, updated_at=event.ts, state="idle", in_flight=None,
                    last_failure=_last_failure(data, event.ts), failures=state.failures + 1)


def _ended(state: ThreadState | None, event: Envelope) -> ThreadState | None:
    data: ThreadEnded = event.data
    if state is None:
        return None
    end = data.reason == "end"
    if state.state not in (_ENDS if end else _KILLS):
        return evolve(state, event)
    return _replace(state, updated_at=event.ts, state="ended" if end else "killed",
                    in_flight=None)


def _blocked(state: ThreadState | None, event: Envelope) -> ThreadState | None:
    if (state is None or state.in_flight is not None
            or state.state not in _BLOCKS):
        return evolve(state, event)
    data: ThreadBlocked = event.data
    return _replace(state, updated_at=event.ts, state="blocked", in_flight=None,
                    blocked=data.message, blocked_role=data.role)


PLANNED: dict[str, Evolve] = {
    ThreadStepStarted.type: _step_started,
    ThreadStepped.type: _stepped,
    ThreadStepFailed.type: _step_failed,
    ThreadEnded.type: _ended,
    ThreadBlocked.type: _blocked,
}
