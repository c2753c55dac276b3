"""Every refusal a thread's or a run's decider can make is a problem `log verify` names
on a forged log (tests/unit/test_refusals_named.py walks the queue entry's and the registered
workflow's the same way).

For each aggregate, each decider of its `decide.py` (the list is read from the module,
so a new decider fails here until it has a recipe) is called on the aggregate as a
small log leaves it (a grid of histories and instants), with each argument that
changes what it decides. Wherever it refuses (raises, or a batch decider leaves the
aggregate out), the event it would have written is appended to the log anyway, with a
valid chain, and `log verify` must name that line; the refusal's code (the rules'
`refusal`) must be one of the aggregate's `REFUSALS`. Each code of `REFUSALS` is met
by the walk, or forged here by hand when no command writes it (an event before the
aggregate exists, a count a command always gets right), so a code added to the rules
without a finding fails too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import pytest

from tests.refusalkit import T0, V1, Call, Clocked, deciders, named, refused
from uwf.config.limits import MAX_TIMEOUT_S
from uwf.engine.events import EventData
from uwf.runs import decide as run_decide
from uwf.runs import rules as run_rules
from uwf.runs.events import RunArchived, RunRerunLinked, RunUnarchived
from uwf.runs.state import RunState
from uwf.threads import decide as thread_decide
from uwf.threads import rules as thread_rules
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
from uwf.threads.state import ThreadState

# -- a thread ------------------------------------------------------------------------------

THREAD = "01JD0000000000000000000000"
TSUBJECT = f"thread/{THREAD}"
DUE = T0 + 30_000  # the deadline of the step in flight, and of a question
STARTED = ThreadStarted(V1, "wf", V1, "/repo", V1)
IN_FLIGHT = ThreadStepStarted("S1", "planner", "", "mock", DUE)
STEPPED = ThreadStepped("S1", V1, "planner", "_", V1)
THREAD_HISTORIES: dict[str, list[EventData]] = {
    "idle": [STARTED],
    "running": [STARTED, IN_FLIGHT],
    "waiting": [STARTED, IN_FLIGHT, STEPPED, ThreadAsked("S1", "planner", "Go?", V1, DUE)],
    "waiting-forever": [STARTED, IN_FLIGHT, STEPPED, ThreadAsked("S1", "planner", "Go?", V1)],
    "answered": [STARTED, IN_FLIGHT, STEPPED, ThreadAsked("S1", "planner", "Go?", V1, DUE),
                 ThreadAnswered("S1", V1)],
    "blocked": [STARTED, ThreadBlocked("no-transition", "no edge", "planner", "_")],
    "ended": [STARTED, ThreadEnded("end")],
    "killed": [STARTED, IN_FLIGHT, ThreadEnded("killed")],
}
# Before every deadline, and after them all.
THREAD_INSTANTS = (T0 + 10, DUE + 10)
# The decide module's helpers: they decide no event.
THREAD_HELPERS = {"deadline", "waiting"}


def thread_at(history: str) -> tuple[Clocked, ThreadState]:
    clocked = Clocked()
    for index, data in enumerate(THREAD_HISTORIES[history]):
        clocked.write(TSUBJECT, data, T0 + index)
    state = clocked.store.read().get("threads", THREAD)
    assert isinstance(state, ThreadState)
    return clocked, state


def thread_calls(state: ThreadState, now: int) -> Iterator[Call]:
    """Every decider of uwf/threads/decide.py. A refused `thread step` would have
    written the step in flight's abandonment, else a new step; a `time_out` answering
    None writes nothing (its refusal)."""
    d = thread_decide
    flight = state.in_flight
    taken: EventData = (ThreadStepStarted("S7", "planner", "", "mock", now + 60_000)
                        if flight is None else
                        ThreadStepFailed(flight.step_id, flight.role, thread_rules.ABANDONED,
                                           "taken over"))
    yield ("take_over", partial(d.take_over, state, now, max_timeout_s=MAX_TIMEOUT_S), taken)
    for step in ("S1", "S9"):
        yield ("finish", partial(d.finish, state, step), ThreadStepped(step, V1, "p", "_", V1))
    yield ("kill", partial(d.kill, state, "stop"), ThreadEnded("killed", "stop"))
    asked = state.asked
    step = "S1" if asked is None else asked.step_id
    yield ("answer", partial(d.answer, state, V1, now), ThreadAnswered(step, V1))
    due = now if asked is None or asked.deadline_ms is None else asked.deadline_ms
    yield ("time_out", partial(_none_refused, d.time_out, state, now),
           ThreadTimedOut(step, due))


def _none_refused(decider: Callable[[ThreadState, int], object], state: ThreadState,
                  now: int) -> object:
    """A decider whose None is its refusal (nothing written), as a batch decider's []."""
    answer = decider(state, now)
    return [] if answer is None else answer


def test_the_walk_calls_every_thread_decider() -> None:
    _, state = thread_at("idle")
    walked = {name for name, _, _ in thread_calls(state, T0)}
    assert walked | THREAD_HELPERS == deciders(thread_decide)


@pytest.mark.parametrize("now", THREAD_INSTANTS)
@pytest.mark.parametrize("history", THREAD_HISTORIES)
def test_every_thread_refusal_is_named_by_verify(history: str, now: int) -> None:
    _, state = thread_at(history)
    for name, call, data in thread_calls(state, now):
        if not refused(call):
            continue
        code = thread_rules.judge(state, data, now)
        assert code in thread_rules.REFUSALS, (name, data, code)
        assert named(thread_at(history)[0], TSUBJECT, data, now), (name, data)


THREAD_LOG_ONLY: dict[str, tuple[str | None, EventData]] = {
    thread_rules.BEFORE_START: (None, ThreadEnded("killed")),
    thread_rules.STARTED_TWICE: ("idle", STARTED),
    thread_rules.IN_FLIGHT: ("running", ThreadStepStarted("S2", "planner", "", "mock", DUE)),
    thread_rules.BLOCKED: ("blocked", ThreadStepped("S2", V1, "planner", "_", V1, reused=V1)),
    thread_rules.OTHER_QUESTION: ("waiting", ThreadAnswered("S9", V1)),
}


@pytest.mark.parametrize("code", sorted(THREAD_LOG_ONLY))
def test_a_thread_refusal_no_command_writes_is_named(code: str) -> None:
    history, data = THREAD_LOG_ONLY[code]
    clocked = thread_at(history)[0] if history else Clocked()
    state = clocked.store.read().get("threads", THREAD)
    assert thread_rules.judge(state, data, T0 + 10) == code
    assert named(clocked, TSUBJECT, data, T0 + 10)


def test_every_thread_refusal_code_is_walked() -> None:
    seen: set[str | None] = set()
    for history in THREAD_HISTORIES:
        _, state = thread_at(history)
        for now in THREAD_INSTANTS:
            seen.update(thread_rules.judge(state, data, now)
                        for _, call, data in thread_calls(state, now) if refused(call))
    assert seen.isdisjoint(THREAD_LOG_ONLY)
    assert seen | set(THREAD_LOG_ONLY) == set(thread_rules.REFUSALS)


# -- a run (a thread, with what operators file on it) ---------------------------------------

RUN_HISTORIES: dict[str, list[EventData]] = {
    "queued": [STARTED],
    "running": [STARTED, IN_FLIGHT],  # stalled once past DUE
    "between-steps": [STARTED, IN_FLIGHT, STEPPED],  # `running`: steps taken, not ended
    "completed": [STARTED, IN_FLIGHT, STEPPED, ThreadEnded("end")],
    "archived": [STARTED, RunArchived("old")],
}
RERUN = "01JD00000000000000000000RR"  # the rerun a link is forged on


def run_at(history: str) -> tuple[Clocked, RunState]:
    clocked = Clocked()
    for index, data in enumerate(RUN_HISTORIES[history]):
        clocked.write(TSUBJECT, data, T0 + index)
    run = clocked.store.read().get("runs", THREAD)
    assert isinstance(run, RunState)
    return clocked, run


def run_calls(run: RunState, now: int) -> Iterator[tuple[str, Call]]:
    """Every decider of uwf/runs/decide.py, each with the subject its event goes to: a
    refused `run rerun` would have linked a new run (started just before) to this one."""
    d = run_decide
    yield TSUBJECT, ("archive", partial(d.archive, run, "r"), RunArchived("r"))
    yield TSUBJECT, ("archive", partial(d.archive, run, "r", unarchive=True),
                     RunUnarchived("r"))
    linked = d.link(run, "again")
    yield f"thread/{RERUN}", ("rerunnable", partial(d.rerunnable, run, now), linked)
    yield TSUBJECT, ("link", object, linked)  # builds the link, refuses nothing


def test_the_walk_calls_every_run_decider() -> None:
    _, run = run_at("queued")
    assert {call[0] for _, call in run_calls(run, T0)} == deciders(run_decide)


@pytest.mark.parametrize("now", THREAD_INSTANTS)
@pytest.mark.parametrize("history", RUN_HISTORIES)
def test_every_run_refusal_is_named_by_verify(history: str, now: int) -> None:
    _, run = run_at(history)
    for subject, (name, call, data) in run_calls(run, now):
        if not refused(call):
            continue
        assert run_code(run, data, now) in run_rules.REFUSALS, (name, data)
        clocked, _ = run_at(history)
        if subject != TSUBJECT:  # the rerun's thread starts first, as `run rerun` writes it
            clocked.write(subject, STARTED, now)
        assert named(clocked, subject, data, now), (name, data)


def run_code(run: RunState, data: EventData, now: int) -> str | None:
    """The run rules' code for `data` (a link: on a new run, of `run`'s thread)."""
    if isinstance(data, RunRerunLinked):
        return run_rules.rerun_refusal(run.thread, now)
    kind = run_rules.kind_of(data)
    assert kind is not None
    return run_rules.refusal(run.phase, run.thread.state, kind)


def test_a_run_refusal_no_command_writes_is_named() -> None:
    """A link the command writes with its thread's start, once: one later, or twice, is
    forged; so is an archive before the run's thread started."""
    linked = RunRerunLinked(THREAD, "/repo", THREAD, 1)
    clocked = Clocked()
    assert named(clocked, f"thread/{RERUN}", RunArchived("r"), T0)  # BEFORE_START
    clocked, _ = run_at("completed")
    clocked.write(f"thread/{RERUN}", STARTED, T0 + 10)
    clocked.write(f"thread/{RERUN}", linked, T0 + 10)
    assert named(clocked, f"thread/{RERUN}", linked, T0 + 11)  # LINKED_TWICE
    clocked, _ = run_at("completed")
    assert named(clocked, TSUBJECT, linked, T0 + 10)  # LINK_LATE: the thread moved on


RUN_LOG_ONLY = {thread_rules.BEFORE_START, run_rules.LINKED_TWICE, run_rules.LINK_LATE}


def test_every_run_refusal_code_is_walked() -> None:
    seen: set[str | None] = set()
    for history in RUN_HISTORIES:
        _, run = run_at(history)
        for now in THREAD_INSTANTS:
            seen.update(run_code(run, data, now) for _, (_, call, data)
                        in run_calls(run, now) if refused(call))
    assert seen.isdisjoint(RUN_LOG_ONLY)
    assert seen | RUN_LOG_ONLY == set(run_rules.REFUSALS)
