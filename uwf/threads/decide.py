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
from uwf.threads.events import ThreadAnswered, ThreadEnded, ThreadStepFailed, ThreadTimedOut
from uwf.threads.rules import (
    ABANDONED,
    AFTER_END,
    ANSWERED_LATE,
    TAKEN_OVER_EARLY,
    WAITING,
    judge,
    refusal,
    stranded_at,
    untimely,
)
from uwf.threads.rules import DEADLINE_GRACE_MS as _GRACE
from uwf.threads.state import ThreadState

# A step in flight is stranded once its agent's timeout and this grace have passed.
DEADLINE_GRACE_MS = _GRACE


def deadline(now: int, timeout_s: float) -> int:
    """When a step started at `now` whose agent may run `timeout_s` is stranded."""
    return stranded_at(now, timeout_s)


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
    if why == WAITING:
        raise waiting(state)
    flight = state.in_flight
    if flight is None:
        return None
    abandoned = ThreadStepFailed(
        flight.step_id, flight.role, ABANDONED,
        f"no result before its deadline {format_ts(flight.deadline_ms)}; taken over")
    if untimely(state, abandoned, now, max_timeout_s=max_timeout_s) == TAKEN_OVER_EARLY:
        raise Rejected(
            f"thread {thread} has a step in flight (role {flight.role}, since "
            f"{flight.started_at})",
            "wait for it; if its process died, retry after " + format_ts(flight.deadline_ms),
        )
    return abandoned


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


def waiting(state: ThreadState) -> Rejected:
    """The refusal of a step (or a result) while the thread waits for an answer."""
    asked = state.asked
    question = "" if asked is None else f": {asked.question!r}"
    return Rejected(f"thread {state.thread} is waiting for an answer{question}",
                    f"answer it with `uwf thread answer {state.thread} --answer '{{...}}'`")


def answer(state: ThreadState, answer_hash: str, now: int, by: str = "") -> ThreadAnswered:
    """`thread answer`: only while the thread waits, once, and before the question's
    deadline (after it, the thread's next step takes the `$TIMEOUT` edge)."""
    asked = state.asked
    data = ThreadAnswered("" if asked is None else asked.step_id, answer_hash, by)
    why = judge(state, data, now)
    if why == ANSWERED_LATE:
        assert asked is not None
        assert asked.deadline_ms is not None
        raise Rejected(f"thread {state.thread}'s question was due by "
                       f"{format_ts(asked.deadline_ms)}", "its next step takes the asking "
                       "role's $TIMEOUT edge (`uwf thread step`), or blocks")
    if why is not None:
        raise Rejected(f"thread {state.thread} is not waiting for an answer (it is "
                       f"{state.state})", "see it with `uwf thread show "
                       f"{state.thread}`; `uwf thread list --waiting` lists those that are")
    return data


def time_out(state: ThreadState, now: int) -> ThreadTimedOut | None:
    """The thread's question past its deadline at `now` (None: it waits on, or does not
    wait)."""
    asked = state.asked
    if asked is None or asked.deadline_ms is None:
        return None
    data = ThreadTimedOut(asked.step_id, asked.deadline_ms)
    return None if judge(state, data, now) is not None else data
