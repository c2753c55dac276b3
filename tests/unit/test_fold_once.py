"""A fold of the views folds each thread event into its thread once: the `runs` view
takes the thread's state from the `threads` view's fold of the same event
(`RunsProjection.extends`), and its rows are those of its own fold, alone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.contract.test_views import event_data
from uwf.engine.clock import system_clock
from uwf.engine.events import Envelope, EventData, NewEvent
from uwf.engine.journal import Journal, Outcome
from uwf.engine.memviews import MemoryViewStore
from uwf.runs.projection import RunsProjection
from uwf.store import Store
from uwf.threads.events import THREAD_EVENTS
from uwf.threads.projection import ThreadsProjection

Batches = list[list[tuple[str, EventData]]]


def written(batches: Batches) -> Store:
    store = Store.memory()
    for batch in batches:
        store.journal.write(lambda _views, b=batch: Outcome(  # type: ignore[misc]
            [NewEvent(subject, data) for subject, data in b]))
    return store


def alone(store: Store) -> dict[str, bytes]:
    """The runs view's rows by its own fold, event by event, without the threads view."""
    runs = RunsProjection()
    states: dict[str, Any] = {}
    for line in store.log.read():
        event = store.journal.catalog.decode(line.raw)
        if event.type in runs.event_types:
            key = runs.key(event)
            states[key] = runs.apply(states.get(key), event)
    return {key: runs.row(state).value for key, state in states.items() if state is not None}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(event_data, min_size=1, max_size=3), min_size=1, max_size=14))
def test_the_runs_view_folded_with_the_threads_view_is_its_own_fold(batches: Batches) -> None:
    store = written(batches)
    expected = alone(store)
    replayed = {key: row.value for (view, key), row in store.journal.replay().items()
                if view == "runs"}
    assert replayed == expected
    assert dict(store.views.scan("runs")) == expected  # folded command by command
    store.journal.rebuild()
    assert dict(store.views.scan("runs")) == expected


def test_a_rebuild_folds_each_thread_event_into_its_thread_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    T = "thread/01JD0000000000000000000001"
    from uwf.threads.events import ThreadEnded, ThreadStarted, ThreadStepStarted

    store = written([[(T, ThreadStarted("70D2DHWNFR6T8", "a", "07M38PX0M6M1C", "/r"))],
                     [(T, ThreadStepStarted("s1", "planner", "go", "mock", 5))],
                     [(T, ThreadEnded("killed"))]])
    calls: list[str] = []
    original = ThreadsProjection.apply

    def counting(self: ThreadsProjection, state: Any, event: Envelope) -> Any:
        calls.append(event.type)
        return original(self, state, event)

    planned = ThreadsProjection.planned

    def counted_plan(self: ThreadsProjection, event_type: str) -> Any:
        made = planned(self, event_type)  # a full replay's fold of one type (planned.py)
        if made is None:
            return None

        def fold(state: Any, event: Envelope) -> Any:
            calls.append(event.type)
            return made(state, event)
        return fold

    monkeypatch.setattr(ThreadsProjection, "apply", counting)
    monkeypatch.setattr(ThreadsProjection, "planned", counted_plan)
    store.journal.rebuild()
    thread_types = {t.type for t in THREAD_EVENTS}
    assert calls == [line for line in (store.journal.catalog.decode(raw.raw).type
                                       for raw in store.log.read()) if line in thread_types]
    # Without the threads view, the runs view folds the thread itself, to the same rows.
    calls.clear()
    runs = RunsProjection()
    journal = Journal(store.log, MemoryViewStore([runs.spec()]), [runs],
                      store.journal.catalog, clock=system_clock)
    journal.rebuild()
    assert len(calls) == 3
    assert dict(journal.views.scan("runs")) == dict(store.views.scan("runs"))
