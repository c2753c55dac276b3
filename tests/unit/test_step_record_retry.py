"""A step's result recorded by a write whose answer was lost (issue 20): the store
committed it, then the connection dropped before the command heard so. The retry finds
the step no longer in flight; it answers with what the first try recorded, never an
error, and nothing is recorded twice. The same for a step's start: a retry that finds
the start its earlier try wrote takes it as its own, so no step is left in flight that
nothing would finish (it held its thread until its deadline: a worker's next attempts
at the entry failed at once, and the entry parked)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import EXAMPLE
from uwf.config.configfile import Config, WorkflowConfig
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome
from uwf.errors import Rejected, StoreUnavailable
from uwf.store import Store
from uwf.threads.decide import kill
from uwf.threads.results import StepContext
from uwf.threads.service import get_thread, start_thread
from uwf.threads.stepping import StepFailed, step_thread
from uwf.workflows.service import put_workflow

CONFIG = Config(WorkflowConfig(), None, None)


def lose_the_answer_once(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The journal's first `write` (a step's result) commits, then raises
    StoreUnavailable as a dropped connection would; calls are counted."""
    real = store.journal.write
    calls: list[int] = []

    def write(decide: Any, **kwargs: Any) -> Any:
        calls.append(1)
        result = real(decide, **kwargs)
        if len(calls) == 1:  # the step's result (its start is a `write_at`)
            raise StoreUnavailable("server closed the connection unexpectedly",
                                   "check the server")
        return result

    monkeypatch.setattr(store.journal, "write", write)
    return calls


def recorded(store: Store, thread: str) -> list[str]:
    return [envelope.type for envelope in store.journal.read_subject(f"thread/{thread}")]


def test_a_step_whose_answer_was_lost_is_not_refused(store: Store,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    calls = lose_the_answer_once(store, monkeypatch)

    def agent(ctx: StepContext) -> tuple[Any, str]:
        return {"status": "ready", "plan": "check the password"}, "planned"

    done = step_thread(store, thread, in_process=agent, config=CONFIG, settings=store.settings)
    assert len(calls) == 2  # the lost answer, and the retry that found it
    assert recorded(store, thread) == ["thread.started", "thread.step_started",
                                       "thread.stepped"]
    stepped = next(store.journal.read_subject(f"thread/{thread}", reverse=True))
    assert done.head == stepped.data.head
    assert done.done is False


def test_a_failed_step_whose_answer_was_lost_fails_once(store: Store,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    lose_the_answer_once(store, monkeypatch)

    def agent(ctx: StepContext) -> tuple[Any, str]:
        return {"status": "maybe"}, "not a status the schema allows"

    with pytest.raises(StepFailed, match=r"step failed \(exit\): output does not match"):
        step_thread(store, thread, in_process=agent, config=CONFIG, settings=store.settings)
    assert recorded(store, thread) == ["thread.started", "thread.step_started",
                                       "thread.step_failed"]


def test_a_step_taken_over_is_still_refused(store: Store,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The retry answers only with its own step's result: a step another process took
    over in between (its result is not this step's) is still refused."""
    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    real = store.journal.write
    calls: list[int] = []

    def write(decide: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:  # the result's write never reached the store
            real(lambda views: Outcome([NewEvent(f"thread/{thread}", kill(
                get_thread(views, thread), "an operator"))]))
            raise StoreUnavailable("server closed the connection unexpectedly",
                                   "check the server")
        return real(decide, **kwargs)

    monkeypatch.setattr(store.journal, "write", write)

    def agent(ctx: StepContext) -> tuple[Any, str]:
        return {"status": "ready", "plan": "check the password"}, "planned"

    with pytest.raises(Rejected, match="was taken over"):
        step_thread(store, thread, in_process=agent, config=CONFIG, settings=store.settings)
    assert "thread.stepped" not in recorded(store, thread)



def lose_the_start(store: Store, monkeypatch: pytest.MonkeyPatch, *, committed: bool
                   ) -> None:
    """The journal's first `write_at` (a step's start) raises StoreUnavailable as a
    dropped connection would: after it committed, or (`committed` false) inside the
    writers' section, once the start was decided, so nothing is written."""
    real = store.journal.write_at
    calls: list[int] = []

    def write_at(decide: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            return real(decide, **kwargs)
        if committed:
            real(decide, **kwargs)
        else:
            def cut(*args: Any) -> Any:
                decide(*args)
                raise StoreUnavailable("terminating connection", "check the server")

            real(cut, **kwargs)
        raise StoreUnavailable("server closed the connection unexpectedly",
                               "check the server")

    monkeypatch.setattr(store.journal, "write_at", write_at)


@pytest.mark.parametrize("committed", [True, False])
def test_a_step_whose_start_lost_its_answer_runs_once(store: Store,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      committed: bool) -> None:
    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    lose_the_start(store, monkeypatch, committed=committed)
    ran: list[str] = []

    def agent(ctx: StepContext) -> tuple[Any, str]:
        ran.append(ctx.role["name"])
        return {"status": "ready", "plan": "check the password"}, "planned"

    done = step_thread(store, thread, in_process=agent, config=CONFIG, settings=store.settings)
    assert ran == ["planner"]
    assert recorded(store, thread) == ["thread.started", "thread.step_started",
                                       "thread.stepped"]
    assert get_thread(store.read(), thread).in_flight is None
    assert done.head is not None


def test_a_step_checked_while_the_store_does_not_answer_is_recorded(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checking the agent's StepNode reads the CAS (on PostgreSQL, the server): a read
    cut by a server restarting is tried again with the record, rather than leave the
    step in flight, unrecorded, holding its thread until its deadline."""
    from uwf.threads.checks import check_step as real

    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    calls: list[int] = []

    def check_step(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise StoreUnavailable("terminating connection due to administrator command",
                                   "check the server")
        return real(*args)

    monkeypatch.setattr("uwf.threads.stepping.check_step", check_step)

    def agent(ctx: StepContext) -> tuple[Any, str]:
        return {"status": "ready", "plan": "check the password"}, "planned"

    done = step_thread(store, thread, in_process=agent, config=CONFIG, settings=store.settings)
    assert len(calls) == 2
    assert recorded(store, thread) == ["thread.started", "thread.step_started",
                                       "thread.stepped"]
    assert done.head is not None
