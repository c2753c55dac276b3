"""`queue add --batch`'s spelled lines and rows (uwf/queue/batch.py, `viewspec.NewRows`)
on the view stores other than SQLite: the in-memory one and PostgreSQL's read them as a
mapping of rows, and hold what the journal's own fold gives them."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from uwf.cas.backends import MemoryBlobs
from uwf.cas.store import Cas
from uwf.config.settings import process_settings
from uwf.engine import ulids
from uwf.engine.clock import Clock
from uwf.engine.events import NewEvent
from uwf.engine.journal import Journal, Outcome
from uwf.engine.log import MemoryLog
from uwf.queue.batch import speller
from uwf.queue.events import QueueAdded
from uwf.store import Store, all_projections, event_catalog
from uwf.workflows.events import WorkflowRegistered

MS = 1_767_323_045_678
FIXED: Clock = lambda: MS  # noqa: E731


def opened(kind: str, request: pytest.FixtureRequest) -> Store:
    if kind == "memory":
        return Store.memory(clock=FIXED)
    from uwf.engine.pgdb import PgDatabase
    from uwf.engine.pgviews import PgViewStore

    db = PgDatabase(request.getfixturevalue("pg_url"))
    projections = all_projections()
    views = PgViewStore(db, [projection.spec() for projection in projections])
    views.drop()
    return Store(None, Journal(MemoryLog(), views, projections, event_catalog(), clock=FIXED),
                 Cas(MemoryBlobs(wall=FIXED), clock=FIXED), settings=process_settings())


def batch(store: Store, spell: bool, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A store's log lines, queue entries and counts after a workflow and a batch of 30
    entries (ids and the clock the same on every call), spelled or folded."""
    counter = itertools.count(1)
    monkeypatch.setattr(ulids, "_LAST", ulids._Last())
    monkeypatch.setattr(ulids, "randomness", lambda: next(counter).to_bytes(10, "big"))
    store.journal.write(lambda _views: Outcome(
        [NewEvent("workflow/w", WorkflowRegistered("w", "70D2DHWNFR6T8"))], None))
    events = [NewEvent(f"queue/{entry_id}", QueueAdded(
        "/repo", 100 + n % 3, "w", "70D2DHWNFR6T8", f"prompt {n} \u00e9", session=(
            f"s{n % 2}" if n % 3 else None), key=f"k{n}" if n % 4 else None))
        for n, entry_id in enumerate(ulids.new_ulids(MS, 30))]
    spelling = speller(store.journal, events) if spell else None
    assert spelling is not None or not spell
    store.journal.write(lambda _views: Outcome(events, None, spell=spelling))
    views = store.read()
    return [[line.raw for line in store.log.read()], sorted(views.scan("queue")),
            views.counts("queue", "status"), views.counts("queue", "ready_pool")]


@pytest.mark.parametrize("kind", ["memory", "pgviews"])
def test_spelled_rows_are_the_folded_rows_on_every_view_store(
        kind: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    spelled_store = opened(kind, request)
    try:
        spelled = batch(spelled_store, True, monkeypatch)
    finally:
        spelled_store.close()
    folded_store = opened(kind, request)
    try:
        folded = batch(folded_store, False, monkeypatch)
    finally:
        folded_store.close()
    assert len(spelled[1]) == 30
    assert spelled == folded
