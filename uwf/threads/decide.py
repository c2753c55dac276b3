"""The thread commands' decisions, pure: a thread's state, the command and the clock's
reading in; the events to record, or a refusal (`Rejected`, raised), out.

Each asks the transition table (`uwf/threads/rules.py`) whether its event may
follow the thread's state and words the refusal its command prints. The services
around them (`service.py`, `stepping.py`) read the views, the CAS and the config,
and write.
"""

from __future__ import annotations

from uwf.engine.clock import format_ts
from uwf.errors import Rejected
from uwf.threads.events import ThreadEnded, ThreadStepFailed
from uwf.threads.projection import ThreadState
from uwf.threads.rules import AFTER_END, IN_FLIGHT, refusal

# A step in flight is stranded once its agent's timeout and this grace have passed.
DEADLINE_GRACE_MS = 30_000


def deadline(now: int, timeout_s: float) -> int:
    """When a step started at `now` whose agent may run `timeout_s` is stranded."""
    return now + int(timeout_s * 1000) + DEADLINE_GRACE_MS


def take_over(state: ThreadState, now: int, *, max_timeout_s: float) -> ThreadStepFailed | None:
    """May a step of the thread begin at `now` (`thread step`)? Refused when the thread
    has ended, or while a step is in flight before its deadline. A step stranded past
    its deadline is failed (`abandoned`, the event returned) so that the new step takes
    over. A deadline further off than the longest timeout uwf accepts (`max_timeout_s`;
    written before timeouts were bounded) can never be met: taken over at once."""
    thread = state.thread
    why = refusal(state.phase, "step_started")
    if why == AFTER_END:
        raise Rejected(f"thread {thread} has ended", "start a new thread, or fork this one")
    flight = state.in_flight
    if why != IN_FLIGHT or flight is None:
        return None
    if now < flight.deadline_ms <= deadline(now, max_timeout_s):
        raise Rejected(
            f"thread {thread} has a step in flight (role {flight.role}, since "
            f"{flight.started_at})",
            "wait for it; if its process died, retry after " + format_ts(flight.deadline_ms),
        )
    return ThreadStepFailed(
        flight.step_id, flight.role, "abandoned",
        f"no result before its deadline {format_ts(flight.deadline_ms)}; taken over")


def finish(state: ThreadState, step_id: str) -> None:
    """May step `step_id`'s result be recorded? Only while it is the step in flight:
    one taken over (abandoned, the thread killed) is refused."""
    if refusal(state.phase, "stepped", step_id) is not None:
        raise Rejected(f"step {step_id} of thread {state.thread} was taken over",
                       f"see `uwf log tail --subject thread/{state.thread}`")


def kill(state: ThreadState, reason: str) -> ThreadEnded:
    """`thread kill`: the thread ends now, whatever it was doing; refused once it ended."""
    if refusal(state.phase, "killed") is not None:
        raise Rejected(f"thread {state.thread} has already ended", "nothing to kill")
    return ThreadEnded("killed", reason)
