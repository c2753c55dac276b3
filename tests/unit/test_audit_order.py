"""`uwf log verify` checks the order of events per subject, not only the chain."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.logkit import append
from uwf.audit import verify as audit
from uwf.engine.events import EventData, StoreCreated
from uwf.store import Store
from uwf.threads.events import (
    ThreadEnded,
    ThreadStarted,
    ThreadStepped,
    ThreadStepStarted,
)
from uwf.workflows.events import WorkflowRegistered

H = "70D2DHWNFR6T8"
T = "thread/01JD0000000000000000000000"


def write(store: Store, *events: tuple[str, EventData]) -> None:
    """Append chained lines directly, as a tampering or buggy writer would."""
    for subject, data in events:
        append(store.log, (subject, data))


def problems(store: Store) -> list[str]:
    return [p.problem for p in audit.verify(store).problems
            if "missing" not in p.problem]  # these logs refer to no real CAS nodes


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store.open(tmp_path / "s")
    write(opened, ("store", StoreCreated(format=1)))
    return opened


def started() -> tuple[str, EventData]:
    return T, ThreadStarted(H, "wf", H, "/repo")


def test_a_step_before_its_thread_started(store: Store) -> None:
    write(store, (T, ThreadStepStarted("S1", "planner", "", "mock", 0)))
    assert problems(store) == [f"thread.step_started before {T} started"]


def test_events_after_the_thread_ended(store: Store) -> None:
    write(store, started(), (T, ThreadEnded("killed")),
          (T, ThreadStepStarted("S1", "planner", "", "mock", 0)))
    assert problems(store) == [f"thread.step_started after {T} ended"]


def test_two_steps_in_flight_and_a_result_for_no_step(store: Store) -> None:
    write(store, started(),
          (T, ThreadStepStarted("S1", "planner", "", "mock", 0)),
          (T, ThreadStepStarted("S2", "planner", "", "mock", 0)),
          (T, ThreadStepped("S9", H, "planner", "_", H)))
    assert problems(store) == ["step S2 started while step S1 was in flight",
                               "step S9 finished but was not in flight"]


def test_a_thread_started_twice(store: Store) -> None:
    write(store, started(), started())
    assert problems(store) == [f"{T} started twice"]


def test_workflow_previous_must_be_the_registered_hash(store: Store) -> None:
    write(store, ("workflow/a", WorkflowRegistered("a", H)),
          ("workflow/a", WorkflowRegistered("a", H, previous="0000000000000")))
    assert problems(store) == [f"previous is 0000000000000, but a pointed at {H}"]


def test_a_well_ordered_thread_has_no_problem(store: Store) -> None:
    write(store, started(),
          (T, ThreadStepStarted("S1", "planner", "", "mock", 0)),
          (T, ThreadStepped("S1", H, "planner", "_", H)),
          (T, ThreadEnded("end")))
    assert problems(store) == []
