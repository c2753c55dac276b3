"""The thread's transition table: which event may follow which state, and the state after.

A thread is `idle` (no step in flight), `running` (one step in flight), `waiting`
(for an answer to its head's question: docs/threads.md#a-human-in-the-loop), `blocked`,
`ended` (it reached `$END`) or `killed`; before its `thread.started` it does not
exist (state None). Everything that decides or folds a thread reads this one
table: the commands (`uwf/threads/decide.py`), the `threads` view, `log verify`
and the per-run archive's lines.

Pure: no store, no clock, no I/O.
"""

from __future__ import annotations

from uwf.engine.events import EventData
from uwf.threads.events import (
    ThreadAnswered,
    ThreadAsked,
    ThreadBlocked,
    ThreadEnded,
    ThreadStarted,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
    ThreadTimedOut,
)
from uwf.threads.terms import DONE_STATES, OPEN_STATES

# What an event does to a thread: its type, told apart further for two types by what
# the event says (`thread.stepped` with `reused`: an incremental rerun took the step
# over and no agent ran; `thread.ended` with a reason other than `end`: killed).
KINDS = ("started", "step_started", "stepped", "reused", "step_failed", "blocked", "ended",
         "killed", "asked", "answered", "timed_out")

# The table. A state (None: not started yet) -> the kinds that may follow it -> the
# state after. A pair not here is refused by the commands and named by `log verify`.
# A step's result (stepped, step_failed) follows `running` only for the step in flight.
# A question (asked) follows the step that asked it, in the same write; an answer or the
# deadline passing follows it once, and only them (or a kill) while it waits.
TRANSITIONS: dict[str | None, dict[str, str]] = {
    None: {"started": "idle"},
    "idle": {"step_started": "running", "reused": "idle", "blocked": "blocked",
             "ended": "ended", "killed": "killed", "asked": "waiting"},
    "running": {"stepped": "idle", "step_failed": "idle", "killed": "killed"},
    "waiting": {"answered": "idle", "timed_out": "idle", "killed": "killed"},
    "blocked": {"step_started": "running", "blocked": "blocked", "ended": "ended",
                "killed": "killed"},
    "ended": {},
    "killed": {},
}
RESULTS = ("stepped", "step_failed")

# Why a pair is not in the table: the codes `refusal` returns. The commands word their
# refusals from these (decide.py), `log verify` its problems (`problem`).
BEFORE_START = "before-start"
STARTED_TWICE = "started-twice"
AFTER_END = "after-end"
IN_FLIGHT = "in-flight"  # a step is in flight: nothing but its result or a kill
NOT_IN_FLIGHT = "not-in-flight"  # a result for a step that is not the one in flight
BLOCKED = "blocked"  # a step taken over by a rerun (or a question), on a blocked thread
WAITING = "waiting"  # the thread waits for an answer: nothing but it, its deadline or a kill
NOT_WAITING = "not-waiting"  # an answer (or a deadline) while no question waits
OTHER_QUESTION = "other-question"  # an answer to a step whose question is not the one waiting
ANSWERS = ("answered", "timed_out")


# A thread as the table sees it: (its state, the id of the step in flight; while it
# waits, the step whose question waits). A plain tuple: the folds build one per event.
Phase = tuple[str | None, str | None]
NOT_STARTED: Phase = (None, None)


def kind_of(data: EventData) -> str | None:
    """The table's name for what `data` does to a thread (None: not a thread event)."""
    kind = _KIND.get(type(data))
    if kind == "stepped" and isinstance(data, ThreadStepped) and data.reused is not None:
        return "reused"
    if kind == "ended" and isinstance(data, ThreadEnded) and data.reason != "end":
        return "killed"
    return kind


_KIND: dict[type[EventData], str] = {
    ThreadStarted: "started", ThreadStepStarted: "step_started", ThreadStepped: "stepped",
    ThreadStepFailed: "step_failed", ThreadBlocked: "blocked", ThreadEnded: "ended",
    ThreadAsked: "asked", ThreadAnswered: "answered", ThreadTimedOut: "timed_out",
}
# The table as (state, kind) -> state after: one lookup per event in the folds.
_TARGET = {(state, kind): target for state, row in TRANSITIONS.items()
           for kind, target in row.items()}


def step_id_of(data: EventData) -> str | None:
    """The step an event is about (None: it is about no step)."""
    step: str | None = getattr(data, "step_id", None)
    return step


def outside_life(kind: str, *, started: bool, done: bool) -> str | None:
    """Whether the event falls outside the thread's life: before its start, a second
    start, after its end (a code), or inside it (None)."""
    if kind == "started":
        return STARTED_TWICE if started else None
    if not started:
        return BEFORE_START
    return AFTER_END if done else None


def refusal(phase: Phase, kind: str, step_id: str | None = None) -> str | None:
    """Why `kind` (about step `step_id`) may not follow `phase`, or None when it may."""
    state, flight = phase
    if (state, kind) in _TARGET:
        if kind in ANSWERS and step_id != flight:
            return OTHER_QUESTION
        return None if kind not in RESULTS or step_id == flight else NOT_IN_FLIGHT
    outside = outside_life(kind, started=state is not None, done=state in DONE_STATES)
    if outside is not None:
        return outside
    if kind in RESULTS:
        return NOT_IN_FLIGHT
    if kind in ANSWERS:
        return NOT_WAITING
    if state == "waiting":
        return WAITING
    return IN_FLIGHT if state == "running" else BLOCKED


def check(phase: Phase, data: EventData, subject: str) -> tuple[str | None, Phase]:
    """What `log verify` says of `data` on the thread `subject` in `phase` (None: the
    table allows it), and the thread after it (`next_phase`)."""
    kind = kind_of(data)
    if kind is None:
        return None, phase
    step = step_id_of(data)
    why = refusal(phase, kind, step)
    after = _next(phase, kind, step, why)
    if why is None:
        return None, after
    return _problem(phase, data, subject, kind=kind, step=step, why=why), after


def problem(phase: Phase, data: EventData, subject: str) -> str | None:
    """What `log verify` says of `data` on the thread `subject` in `phase` (None: the
    table allows it)."""
    return check(phase, data, subject)[0]


def next_phase(phase: Phase, data: EventData) -> Phase:
    """The thread after `data`: the table's target when the event may follow `phase`,
    else what the event says. Nothing folds into a thread not started yet."""
    kind = kind_of(data)
    if kind is None:
        return phase
    step = step_id_of(data)
    return _next(phase, kind, step, refusal(phase, kind, step))


def _problem(phase: Phase, data: EventData, subject: str, *, kind: str, step: str | None,
             why: str) -> str:
    type_ = data.type
    if why == BEFORE_START:
        return f"{type_} before {subject} started"
    if why == STARTED_TWICE:
        return f"{subject} started twice"
    if why == AFTER_END:
        return f"{type_} after {subject} ended"
    if why == NOT_IN_FLIGHT:
        return f"step {step} finished but was not in flight"
    if why == BLOCKED and kind == "asked":
        return f"{type_} while {subject} was blocked"
    if why == BLOCKED:
        return f"step {step} was taken over while {subject} was blocked"
    if why == NOT_WAITING:
        what = "answered" if kind == "answered" else "timed out"
        return f"question of step {step} {what} while {subject} was {phase[0]}, not waiting"
    if why == WAITING:
        return f"{type_} while {subject} was waiting for an answer"
    if why == OTHER_QUESTION:
        return f"{type_} for step {step} while step {phase[1]}'s question was waiting"
    flight = phase[1]
    if kind == "step_started":
        return f"step {step} started while step {flight} was in flight"
    if kind == "reused":
        return f"step {step} was taken over while step {flight} was in flight"
    return f"{type_} while step {flight} was in flight"


# What an event the table refuses does to the fold all the same: what it says (a
# forged step start is a step in flight), so the view shows what the log holds and
# `log verify` names each problem once. A step's result settles an open thread by
# what is still in flight and leaves any other state as it was.
_AS_IT_SAYS = {"started": "idle", "step_started": "running", "blocked": "blocked",
               "ended": "ended", "killed": "killed", "asked": "waiting"}


def _next(phase: Phase, kind: str, step: str | None, why: str | None) -> Phase:
    state, flight = phase
    if why == BEFORE_START or (why is not None and kind in ANSWERS):
        return phase  # nothing folds into a thread not started yet; a forged answer moves nothing
    if kind in {"started", "step_started", "asked"}:
        flight = step
    elif kind == "step_failed":  # a failure of another step leaves this one in flight
        flight = None if step == flight else flight
    elif kind != "blocked":
        flight = None
    if why is None:
        return _TARGET[state, kind], flight
    if kind in _AS_IT_SAYS:
        return _AS_IT_SAYS[kind], flight
    if state in OPEN_STATES:
        state = "running" if flight is not None else "idle"
    return state, flight
