"""Each projection on its own: a pure fold from events to entity states and rows."""

from __future__ import annotations

from uwf.engine.events import Envelope, EventData, LogRepaired, StoreCreated
from uwf.engine.storeview import StoreProjection, StoreState
from uwf.threads.events import (
    ThreadBlocked,
    ThreadEnded,
    ThreadStarted,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
)
from uwf.threads.projection import InFlight, LastFailure, ThreadsProjection, ThreadState
from uwf.workflows.events import WorkflowRegistered
from uwf.workflows.projection import WorkflowsProjection, WorkflowState

H1, H2, H3 = "70D2DHWNFR6T8", "07M38PX0M6M1C", "0HMFKR60QCWK5"
T = "01JD0000000000000000000001"


def event(seq: int, subject: str, data: EventData, ts: str = "") -> Envelope:
    return Envelope(seq, f"01JD{seq:022d}", ts or f"2026-11-25T00:00:{seq:02d}.000Z",
                    data.type, subject, (1, 1), data, "0" * 32)


def fold(projection: object, events: list[Envelope]) -> object:
    state = None
    for item in events:
        state = projection.apply(state, item)  # type: ignore[attr-defined]
    return state


def advance(projection: ThreadsProjection, state: ThreadState | None,
            item: Envelope) -> ThreadState:
    after = projection.apply(state, item)
    assert after is not None
    return after


def test_store_records_its_format_and_repairs() -> None:
    state = fold(StoreProjection(), [
        event(1, "store", StoreCreated(format=1)),
        event(5, "store", LogRepaired("s", 0, 3, 1, "d" * 32, "torn last line")),
        event(9, "store", LogRepaired("s", 0, 3, 1, "e" * 32, "torn last line")),
    ])
    assert state == StoreState(format=1, created_at="2026-11-25T00:00:01.000Z", repairs=2,
                               last_repair_seq=9)


def test_workflows_count_versions_only_when_the_hash_changes() -> None:
    projection = WorkflowsProjection()
    state = fold(projection, [
        event(2, "workflow/a", WorkflowRegistered("a", H1)),
        event(3, "workflow/a", WorkflowRegistered("a", H1, H1)),
        event(4, "workflow/a", WorkflowRegistered("a", H2, H1)),
    ])
    assert state == WorkflowState("a", H2, "2026-11-25T00:00:04.000Z", 4, 2)
    assert projection.key(event(2, "workflow/a", WorkflowRegistered("a", H1))) == "a"


def test_a_thread_through_a_step_a_failure_a_block_and_its_end() -> None:
    projection = ThreadsProjection()
    subject = f"thread/{T}"
    started = event(1, subject, ThreadStarted(H1, "solve", H2, "/repo"))
    assert projection.key(started) == T
    state = advance(projection, None, started)
    assert isinstance(state, ThreadState)
    assert (state.state, state.steps, state.head, state.done) == ("idle", 0, None, False)
    assert projection.column_values(state) == ("idle", 1, "solve", H1)
    state = advance(projection, state, event(2, subject, ThreadStepStarted("s1", "planner", "go",
                                                                        "mock", 99)))
    assert state.in_flight == InFlight("s1", "planner", "go", "mock", 99,
                                       "2026-11-25T00:00:02.000Z")
    assert projection.column_values(state)[:2] == ("running", 1)
    state = advance(projection, state, event(3, subject, ThreadStepFailed("s1", "planner", "exit",
                                                                       "boom", 3, "boom")))
    failure = LastFailure("s1", "planner", "exit", "boom", "2026-11-25T00:00:03.000Z", 3)
    assert (state.in_flight, state.last_failure, state.failures) == (None, failure, 1)
    assert state.state == "idle"
    state = advance(projection, state, event(4, subject, ThreadStepStarted("s2", "planner", "go",
                                                                        "mock", 99)))
    assert state.state == "running"
    state = advance(projection, state, event(5, subject, ThreadStepped("s2", H3, "planner", "ready",
                                                                    H1)))
    assert (state.head, state.steps, state.last_role, state.last_status, state.state) == (
        H3, 1, "planner", "ready", "idle")
    assert (state.in_flight, state.last_failure, state.visits) == (None, None, {"planner": 1})
    state = advance(projection, state, event(6, subject, ThreadBlocked("no-agent", "none", "dev")))
    assert (state.state, state.blocked, state.blocked_role) == ("blocked", "none", "dev")
    assert projection.column_values(state)[:2] == ("blocked", 1)
    state = advance(projection, state, event(7, subject, ThreadEnded("killed", "stop")))
    assert (state.state, state.done, state.updated_at) == (
        "killed", True, "2026-11-25T00:00:07.000Z")
    assert projection.column_values(state)[:2] == ("killed", 0)


def test_a_failure_of_another_step_leaves_the_one_in_flight() -> None:
    projection = ThreadsProjection()
    subject = f"thread/{T}"
    state = fold(projection, [
        event(1, subject, ThreadStarted(H1, "solve", H2, "/repo")),
        event(2, subject, ThreadStepStarted("s2", "planner", "go", "mock", 99)),
        event(3, subject, ThreadStepFailed("s1", "planner", "abandoned", "old")),
    ])
    assert isinstance(state, ThreadState)
    assert state.in_flight is not None
    assert state.in_flight.step_id == "s2"
    assert state.state == "running"  # the step in flight is still s2


def test_an_event_before_its_thread_started_folds_to_nothing() -> None:
    projection = ThreadsProjection()
    assert projection.apply(None, event(1, f"thread/{T}", ThreadEnded("end"))) is None


def test_a_fork_starts_with_its_origin_steps() -> None:
    state = advance(ThreadsProjection(), None, event(1, f"thread/{T}", ThreadStarted(
        H1, "solve", H2, "/repo", head=H3, fork_of="01JD0000000000000000000009", steps=2,
        visits={"planner": 2})))
    assert (state.head, state.steps, state.fork_of, state.visits) == (
        H3, 2, "01JD0000000000000000000009", {"planner": 2})


def test_rows_carry_the_encoded_state_and_columns() -> None:
    projection = ThreadsProjection()
    state = advance(projection, None, event(1, f"thread/{T}", ThreadStarted(H1, "solve", H2,
                                                                          "/r")))
    row = projection.row(state)
    assert projection.decode(row.value) == state
    assert row.columns == projection.column_values(state)
    assert len(row.columns) == len(projection.spec().columns)
