"""The thread's transition table (uwf/threads/rules.py), walked pair by pair.

Every (state, event) pair the table forbids is (a) refused by the command that
would write that event, and (b) named by `log verify` when forged into a log.
Every pair it allows folds, in the `threads` view, to the state the table names,
and verifies clean.
"""

from __future__ import annotations

import pytest

from uwf.audit.verify import verify
from uwf.config.limits import MAX_TIMEOUT_S
from uwf.engine.clock import fixed_clock, format_ts
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Outcome
from uwf.errors import NotFound, Rejected
from uwf.store import Store
from uwf.threads import decide
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
from uwf.threads.projection import ThreadState
from uwf.threads.rules import (
    KINDS,
    NOT_STARTED,
    TRANSITIONS,
    kind_of,
    next_phase,
    outside_life,
)
from uwf.threads.service import get_thread, kill_thread
from uwf.threads.state import Phase
from uwf.threads.terms import STATES

THREAD = "01JD0000000000000000000000"
T = f"thread/{THREAD}"
H = "70D2DHWNFR6T8"
WRITTEN = 1_800_000_000_000  # when the forged events are written
NOW = WRITTEN + 1000  # when the deciders judge them
LIVE = NOW + 60_000  # the deadline of S1, the step in flight while `running`


def event(kind: str, step: str | None = None) -> EventData:
    """One event of each kind; a result is for S1 (the step in flight) unless `step`."""
    events: dict[str, EventData] = {
        "started": ThreadStarted(H, "wf", H, "/repo"),
        "step_started": ThreadStepStarted(step or "S2", "planner", "", "mock", LIVE),
        "stepped": ThreadStepped(step or "S1", H, "planner", "_", H),
        "reused": ThreadStepped(step or "S2", H, "planner", "_", H, reused=H),
        "step_failed": ThreadStepFailed(step or "S1", "planner", "exit", "failed"),
        "blocked": ThreadBlocked("no-transition", "no edge", "planner", "_"),
        "ended": ThreadEnded("end"),
        "killed": ThreadEnded("killed"),
        "asked": ThreadAsked(step or "S1", "planner", "Deploy?", H),
        "answered": ThreadAnswered(step or "S1", H),
        "timed_out": ThreadTimedOut(step or "S1", WRITTEN),
    }
    return events[kind]


# The events that bring a new thread to each state (None: not started).
REACH: dict[str | None, list[EventData]] = {
    None: [],
    "idle": [event("started")],
    "running": [event("started"), event("step_started", "S1")],
    "waiting": [event("started"), event("step_started", "S1"), event("stepped", "S1"),
                event("asked")],
    "blocked": [event("started"), event("blocked")],
    "ended": [event("started"), event("ended")],
    "killed": [event("started"), event("killed")],
}

ALLOWED = [(state, kind) for state, row in TRANSITIONS.items() for kind in row]
# Every pair not in the table; and a result for a step other than the one in flight.
FORBIDDEN = [(state, kind, event(kind)) for state, row in TRANSITIONS.items()
             for kind in KINDS if kind not in row]
FORBIDDEN += [("running", kind, event(kind, "S9")) for kind in ("stepped", "step_failed")]


def pair_id(value: object) -> str:
    return str(value) if not isinstance(value, EventData) else getattr(value, "step_id", "-")


def expected_problem(state: str | None, kind: str, data: EventData) -> str:
    """What `log verify` must say of a forbidden pair: the wording it printed before
    the table existed, and the same shape for the pairs it did not check then."""
    step = getattr(data, "step_id", None)
    if state is None:
        return f"{data.type} before {T} started"
    if kind == "started":
        return f"{T} started twice"
    if state in ("ended", "killed"):
        return f"{data.type} after {T} ended"
    if kind in ("stepped", "step_failed"):
        return f"step {step} finished but was not in flight"
    if kind in ("answered", "timed_out"):
        what = "answered" if kind == "answered" else "timed out"
        return f"question of step {step} {what} while {T} was {state}, not waiting"
    if state == "waiting":
        return f"{data.type} while {T} was waiting for an answer"
    if state == "blocked" and kind == "asked":
        return f"thread.asked while {T} was blocked"
    if state == "blocked":
        return f"step {step} was taken over while {T} was blocked"
    return {"step_started": f"step {step} started while step S1 was in flight",
            "reused": f"step {step} was taken over while step S1 was in flight",
            "blocked": "thread.blocked while step S1 was in flight",
            "asked": "thread.asked while step S1 was in flight",
            "ended": "thread.ended while step S1 was in flight"}[kind]


def forged(*events: EventData) -> Store:
    """A store whose log holds `events` on thread T, written past every decider."""
    store = Store.memory(clock=fixed_clock(WRITTEN))
    if events:
        batch = [NewEvent(T, data) for data in events]
        store.journal.write(lambda _views: Outcome(batch, None))
    return store


def problems(store: Store) -> list[str]:
    """`log verify`'s problems but the missing CAS nodes these logs refer to."""
    return [p.problem for p in verify(store).problems if "which is missing" not in p.problem]


def thread_in(state: str | None) -> ThreadState:
    """The thread's record in `state`, as the commands read it (NotFound before a start)."""
    store = forged(*REACH[state])
    try:
        return get_thread(store.read(), THREAD)
    finally:
        store.close()


def phase_in(state: str | None) -> Phase:
    """The thread in `state` as the table folds it."""
    phase = NOT_STARTED
    for data in REACH[state]:
        phase = next_phase(phase, data)
    return phase


def refuse(state: str | None, kind: str, data: EventData) -> str:
    """What the decider of the command that writes `kind` says when the thread is in
    `state`: `thread step`'s first phase (step_started, blocked, ended), the end of a
    step (stepped, step_failed), `thread kill` (killed), `thread answer` (answered), a
    question's deadline at the next step (timed_out: nothing to time out)."""
    try:
        thread = thread_in(state)
        if kind in ("step_started", "blocked", "ended"):
            decide.take_over(thread, NOW, max_timeout_s=MAX_TIMEOUT_S)
        elif kind in ("stepped", "step_failed"):
            decide.finish(thread, getattr(data, "step_id", ""))
        elif kind == "answered":
            decide.answer(thread, H, NOW)
        elif kind == "timed_out":
            if decide.time_out(thread, NOW) is None:
                return "nothing to time out"
        else:
            decide.kill(thread, "")
    except (Rejected, NotFound) as refused:
        return refused.what
    raise AssertionError(f"{kind} on a {state} thread was not refused")


# -- the table itself ---------------------------------------------------------------------

def test_the_table_has_a_row_per_state_and_names_only_known_kinds() -> None:
    assert set(TRANSITIONS) == {None, *STATES}
    assert {target for row in TRANSITIONS.values() for target in row.values()} <= set(STATES)
    assert {kind for row in TRANSITIONS.values() for kind in row} <= set(KINDS)
    assert {kind_of(event(kind)) for kind in KINDS} == set(KINDS)


# -- (a) the commands refuse every forbidden pair -----------------------------------------

@pytest.mark.parametrize(("state", "kind", "data"),
                         [pair for pair in FORBIDDEN
                          if pair[1] not in ("started", "reused", "asked")],
                         ids=pair_id)
def test_the_command_refuses_a_forbidden_pair(state: str | None, kind: str,
                                             data: EventData) -> None:
    said = refuse(state, kind, data)
    if state is None:
        assert said == f"no thread {THREAD}"
    elif kind == "killed":
        assert said == f"thread {THREAD} has already ended"
    elif kind in ("stepped", "step_failed"):
        assert said == f"step {getattr(data, 'step_id', '')} of thread {THREAD} was taken over"
    elif kind == "answered":
        assert said == f"thread {THREAD} is not waiting for an answer (it is {state})"
    elif kind == "timed_out":
        assert said == "nothing to time out"
    elif state == "waiting":
        assert said == f"thread {THREAD} is waiting for an answer: 'Deploy?'"
    elif state == "running":
        assert said == (f"thread {THREAD} has a step in flight (role planner, since "
                        f"{format_ts(WRITTEN)})")
    else:
        assert said == f"thread {THREAD} has ended"


def test_a_start_and_a_taken_over_step_are_only_ever_written_on_a_new_thread() -> None:
    """No command writes `thread.started` or a `reused` step on a thread that exists:
    start, fork and rerun each mint a new id, and a rerun's batch is its start, its
    link, its taken-over steps and maybe its end. That batch is allowed by the table."""
    phase = NOT_STARTED
    for data in (event("started"), event("reused", "S1"), event("reused", "S2"),
                 event("ended")):
        kind = kind_of(data)
        assert kind in TRANSITIONS[phase[0]]
        phase = next_phase(phase, data)
    assert phase == ("ended", None)


def test_a_question_is_only_ever_written_with_the_step_that_asked_it() -> None:
    """No command writes `thread.asked` on its own: the end of a step writes it after
    the step's `thread.stepped`, in one batch, which the table allows from `running`."""
    phase = phase_in("running")
    for data in (event("stepped", "S1"), event("asked")):
        kind = kind_of(data)
        assert kind is not None
        assert kind in TRANSITIONS[phase[0]]
        phase = next_phase(phase, data)
    assert phase == ("waiting", "S1")  # the step whose question waits


def test_a_question_past_its_deadline_times_out_and_refuses_its_answer() -> None:
    asked = ThreadAsked("S1", "planner", "Deploy?", H, deadline_ms=NOW)
    store = forged(*REACH["waiting"][:-1], asked)
    try:
        thread = get_thread(store.read(), THREAD)
        assert decide.time_out(thread, NOW - 1) is None  # not due yet
        decide.answer(thread, H, NOW - 1)  # still answerable
        expired = decide.time_out(thread, NOW)
        assert expired == ThreadTimedOut("S1", NOW)
        with pytest.raises(Rejected, match="was due by"):
            decide.answer(thread, H, NOW)
        assert next_phase(thread.phase, expired) == ("idle", None)
    finally:
        store.close()


def test_a_step_stranded_past_its_deadline_is_taken_over_as_the_table_allows() -> None:
    thread = thread_in("running")
    abandoned = decide.take_over(thread, LIVE + 1, max_timeout_s=MAX_TIMEOUT_S)
    assert abandoned is not None
    assert abandoned.reason == "abandoned"
    after = next_phase(thread.phase, abandoned)
    assert after == ("idle", None)
    assert "step_started" in TRANSITIONS[after[0]]


def test_thread_kill_refuses_an_ended_thread_through_the_service() -> None:
    store = forged(*REACH["ended"])
    try:
        with pytest.raises(Rejected, match="has already ended"):
            kill_thread(store.journal, THREAD)
    finally:
        store.close()


# -- (b) log verify names every forbidden pair --------------------------------------------

@pytest.mark.parametrize(("state", "kind", "data"), FORBIDDEN, ids=pair_id)
def test_log_verify_names_a_forged_forbidden_pair(state: str | None, kind: str,
                                                 data: EventData) -> None:
    store = forged(*REACH[state], data)
    try:
        assert problems(store) == [expected_problem(state, kind, data)]
    finally:
        store.close()


# -- every allowed pair folds to the table's target ---------------------------------------

@pytest.mark.parametrize(("state", "kind"), ALLOWED, ids=pair_id)
def test_an_allowed_pair_folds_to_the_tables_target(state: str | None, kind: str) -> None:
    data = event(kind, "S1") if kind in ("stepped", "step_failed", "reused") else event(kind)
    target = TRANSITIONS[state][kind]
    assert next_phase(phase_in(state), data)[0] == target
    reach = REACH[state]
    if kind == "timed_out":  # only once its deadline passed (the time rules)
        reach = [*reach[:-1], ThreadAsked("S1", "planner", "Deploy?", H, WRITTEN)]
    store = forged(*reach, data)
    try:
        assert get_thread(store.read(), THREAD).state == target
        assert problems(store) == []
    finally:
        store.close()


def test_the_per_run_archive_maps_nothing_outside_the_threads_life() -> None:
    from uwf.archive.lines import fold_all, lines_for
    from uwf.engine.events import Envelope

    def envelope(seq: int, data: EventData) -> Envelope:
        return Envelope(seq, f"01JD{seq:022d}", "2026-11-25T00:00:00.000Z", data.type, T,
                        (1, 1), data, "0" * 32)

    assert lines_for(None, envelope(1, event("stepped"))) == []  # before the start
    started = fold_all(lines_for(None, envelope(1, event("started"))))
    assert lines_for(started, envelope(2, event("started"))) == []  # a second start
    ended = fold_all(lines_for(started, envelope(2, event("ended"))), started)
    for seq, kind in enumerate(KINDS, 3):  # after the end
        assert outside_life(kind, started=True, done=True) is not None
        assert lines_for(ended, envelope(seq, event(kind))) == []


def test_log_verify_names_an_answer_to_a_question_that_is_not_the_one_waiting() -> None:
    store = forged(*REACH["waiting"], ThreadAnswered("S9", H), ThreadAnswered("S1", H))
    try:
        assert problems(store) == ["thread.answered for step S9 while step S1's question "
                                   "was waiting"]  # the real answer after it is clean
        thread = get_thread(store.read(), THREAD)
        assert (thread.state, thread.asked is not None and thread.asked.answer) == ("idle", H)
    finally:
        store.close()
