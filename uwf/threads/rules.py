"""A thread as an aggregate: its transition table (which event may follow which state,
and the state after), its time rules, `refusal` and `evolve` (the thread after an
event, over its whole state, `uwf.threads.state.ThreadState`).

A thread is `idle` (no step in flight), `running` (one step in flight), `waiting`
(for an answer to its head's question: docs/threads.md#a-human-in-the-loop), `blocked`,
`ended` (it reached `$END`) or `killed`; before its `thread.started` it does not
exist (state None). Everything that decides or folds a thread reads this one
table: the commands (`uwf/threads/decide.py`), the `threads` view (this `evolve`
folded, and the `runs` view takes the thread from it), `log verify` (`order.py`,
folding the same `evolve`) and the per-run archive's lines.

The time rules, judged at the event's instant: a step in flight is taken over
(`abandoned`) only once its deadline passed; a question is answered before its
deadline, and times out only once it passed.

Pure: no store, no clock, no I/O.
"""

from __future__ import annotations

import msgspec

from uwf.config.limits import MAX_TIMEOUT_S
from uwf.engine.clock import format_ts
from uwf.engine.events import Envelope, EventData
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
from uwf.threads.state import (
    FAILURE_MESSAGE_CHARS,
    Asked,
    InFlight,
    LastFailure,
    Phase,
    ThreadState,
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
# The time rules' codes (`untimely`): the pair is in the table, its instant is not.
TAKEN_OVER_EARLY = "taken-over-early"  # a step in flight abandoned before its deadline
ANSWERED_LATE = "answered-late"  # an answer at or after the question's deadline
TIMED_OUT_EARLY = "timed-out-early"  # a question timed out before its deadline (or none)
# Every code `refusal` and `untimely` return: each is a refusal of a decider or a problem
# `log verify` names on a log no command writes (tests/unit/test_refusals_named.py).
REFUSALS = (BEFORE_START, STARTED_TWICE, AFTER_END, IN_FLIGHT, NOT_IN_FLIGHT, BLOCKED,
            WAITING, NOT_WAITING, OTHER_QUESTION, TAKEN_OVER_EARLY, ANSWERED_LATE,
            TIMED_OUT_EARLY)
ABANDONED = "abandoned"  # the reason of a step failed because another took it over
# A step in flight is stranded once its agent's timeout and this grace have passed.
DEADLINE_GRACE_MS = 30_000

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
THREAD_KINDS = tuple(_KIND)  # the event types a thread folds
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


def stranded_at(now: int, timeout_s: float) -> int:
    """When a step started at `now` whose agent may run `timeout_s` is stranded: its
    deadline."""
    return now + int(timeout_s * 1000) + DEADLINE_GRACE_MS


def untimely(state: ThreadState, data: EventData, at: int, *,
             max_timeout_s: float = MAX_TIMEOUT_S) -> str | None:
    """The time rule `data`, which the table lets follow `state`, breaks at `at` (epoch
    ms: its instant), or None. A step in flight is abandoned only past its deadline,
    unless the deadline is further off than the longest timeout uwf accepts
    (`max_timeout_s`: written before timeouts were bounded, it can never be met); a
    question is answered before its deadline and times out only once it passed."""
    if isinstance(data, ThreadStepFailed) and data.reason == ABANDONED:
        flight = state.in_flight
        if (flight is not None and flight.step_id == data.step_id
                and at < flight.deadline_ms <= stranded_at(at, max_timeout_s)):
            return TAKEN_OVER_EARLY
        return None
    if isinstance(data, ThreadAnswered | ThreadTimedOut):
        asked = state.asked
        due = None if asked is None else asked.deadline_ms
        if isinstance(data, ThreadAnswered):
            return ANSWERED_LATE if due is not None and at >= due else None
        return TIMED_OUT_EARLY if due is None or at < due else None
    return None


TIMED = frozenset(t.type for t in (ThreadStepFailed, ThreadAnswered, ThreadTimedOut))


def judge(state: ThreadState | None, data: EventData, at: int | None = None) -> str | None:
    """Why `data`, at `at` (None: not judged by time), may not happen to the thread in
    `state` (None: not started): the table's code, else the time rule's, else None."""
    kind = kind_of(data)
    if kind is None:
        return None
    why = refusal(NOT_STARTED if state is None else state.phase, kind, step_id_of(data))
    if why is not None or state is None or at is None:
        return why
    return untimely(state, data, at)


def verdict(state: ThreadState | None, data: EventData, subject: str, at: int | None
            ) -> str | None:
    """What `log verify` says of `data` at `at` on the thread `subject` in `state` (None:
    the table and the time rules allow it)."""
    why = judge(state, data, at)
    if why is None:
        return None
    phase = NOT_STARTED if state is None else state.phase
    if why not in (TAKEN_OVER_EARLY, ANSWERED_LATE, TIMED_OUT_EARLY):
        kind = kind_of(data)
        assert kind is not None
        return _problem(phase, data, subject, kind=kind, step=step_id_of(data), why=why)
    assert state is not None
    assert at is not None
    step = step_id_of(data)
    if why == TAKEN_OVER_EARLY:
        assert state.in_flight is not None
        return (f"step {step} abandoned at {format_ts(at)}, before its deadline "
                f"{format_ts(state.in_flight.deadline_ms)}")
    asked = state.asked
    due = None if asked is None else asked.deadline_ms
    if why == ANSWERED_LATE:
        assert due is not None
        return (f"question of step {step} answered at {format_ts(at)}, after its deadline "
                f"{format_ts(due)}")
    if due is None:
        return f"question of step {step} timed out, but it has no deadline"
    return (f"question of step {step} timed out at {format_ts(at)}, before its deadline "
            f"{format_ts(due)}")


_replace = msgspec.structs.replace


def _last_failure(data: ThreadStepFailed, at: str) -> LastFailure:
    message = data.message
    if len(message) > FAILURE_MESSAGE_CHARS:
        message = message[:FAILURE_MESSAGE_CHARS - 3] + "..."
    return LastFailure(data.step_id, data.role, data.reason, message, at, data.exit_status)


def evolve(state: ThreadState | None, event: Envelope) -> ThreadState | None:
    """The thread after `event` (None: not started yet), over its whole state: its state
    and step in flight as the table says (`next_phase`; an event the table refuses as it
    says, so each problem is named once), the rest from the event. The `threads` view is
    this folded, `log verify` folds it too."""
    data = event.data
    if isinstance(data, ThreadStarted):
        return ThreadState(
            thread=event.subject.removeprefix("thread/"), workflow=data.workflow,
            name=data.name, start=data.start, repo=data.repo, created_at=event.ts,
            updated_at=event.ts, head=data.head, steps=data.steps, fork_of=data.fork_of,
            visits=data.visits,
        )
    if state is None:  # an event before its thread began: `log verify` reports it
        return None
    if kind_of(data) is None:  # not a thread's event (the view is given none)
        return state
    # The state and the step in flight come from the table; the rest from the event.
    moved, still = next_phase(state.phase, data)
    moved = moved or state.state
    flight = None if still is None else state.in_flight
    if isinstance(data, ThreadStepStarted):
        flight = InFlight(data.step_id, data.role, data.edge_prompt, data.agent,
                          data.deadline_ms, event.ts)
        return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                        blocked=None, blocked_role=None)
    if isinstance(data, ThreadStepped):
        visits = {**state.visits, data.role: state.visits.get(data.role, 0) + 1}
        return _replace(
            state, updated_at=event.ts, state=moved, head=data.head, steps=state.steps + 1,
            last_role=data.role, last_status=data.status, in_flight=flight,
            last_failure=None, visits=visits, asked=None,
        )
    if isinstance(data, ThreadAsked):
        question = Asked(data.step_id, data.role, data.question, data.answer_schema,
                         event.ts, data.deadline_ms)
        return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                        asked=question)
    if isinstance(data, ThreadAnswered | ThreadTimedOut):
        asked = state.asked
        if asked is None or asked.step_id != data.step_id:
            return _replace(state, updated_at=event.ts, state=moved)  # not its question
        if isinstance(data, ThreadAnswered):
            asked = _replace(asked, answer=data.answer, answered_at=event.ts,
                             answered_by=data.by or None)
        else:
            asked = _replace(asked, timed_out=True)
        return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                        asked=asked)
    if isinstance(data, ThreadStepFailed):
        return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                        last_failure=_last_failure(data, event.ts),
                        failures=state.failures + 1)
    if isinstance(data, ThreadBlocked):
        return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                        blocked=data.message, blocked_role=data.role)
    return _replace(state, updated_at=event.ts, state=moved, in_flight=flight)
