"""The runs view's full-text index is made on the first text search (uwf/engine/
fulltext.py), not by the commit that loads a view anew: a rebuild leaves none, the first
search makes it from every row, commits keep it once it is there, and a search finds
the same runs before it, after it, and where it cannot be made."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.unit.test_snapshots import store, thread_id, write_runs
from uwf.engine import fulltext
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome
from uwf.engine.viewspec import Query
from uwf.runs.events import RunArchived
from uwf.store import Store

__all__ = ["store"]  # the fixture, shared with the snapshots' tests (`env`: tests/conftest.py)

SEARCHES = ("bug 13", "fix bug", "repo2", "archived", "flow1 bug 2", "zz-none", "bu")


def views_file(store: Store) -> Path:
    assert store.root is not None
    return store.root / "views" / "views.sqlite3"


def indexed(store: Store) -> bool:
    db = sqlite3.connect(f"file:{views_file(store)}?mode=ro", uri=True)
    try:
        return fulltext.exists(db, "runs")
    finally:
        db.close()


def found(store: Store) -> dict[str, tuple[int, list[str]]]:
    """Each search's total and its runs (the first page, and all)."""
    views = store.views
    return {text: (views.count(Query("runs", text=text)),
                   [key for key, _ in views.query(Query("runs", text=text, limit=5))]
                   + [key for key, _ in views.query(Query("runs", text=text))])
            for text in SEARCHES}


def test_a_rebuild_leaves_no_index_and_the_first_search_makes_it(store: Store) -> None:
    write_runs(store, 0, 40)
    before = found(store)  # the index made by the first search, kept by commits since
    assert indexed(store)
    assert before["bug 13"][0] == 1
    assert before["archived"][0] > 0
    store.journal.rebuild_views(snapshot=False)
    assert not indexed(store)
    assert found(store) == before
    assert indexed(store)


def test_runs_written_before_the_index_is_made_are_found(store: Store) -> None:
    write_runs(store, 0, 12)
    store.journal.rebuild_views(snapshot=False)
    write_runs(store, 12, 12)  # commits while there is no index: it skips them
    subject = f"thread/{thread_id(13)}"
    store.journal.write(lambda _views: Outcome([NewEvent(subject, RunArchived("old"))]))
    assert not indexed(store)
    after = found(store)
    assert after["bug 13"][0] == 1
    assert thread_id(13) in after["archived"][1]
    store.journal.rebuild_views(snapshot=False)
    assert found(store) == after


def test_commits_keep_the_index_once_it_is_made(store: Store) -> None:
    write_runs(store, 0, 12)
    store.journal.rebuild_views(snapshot=False)
    assert store.views.count(Query("runs", text="bug")) == 12  # the first search makes it
    assert indexed(store)
    write_runs(store, 12, 12)
    subject = f"thread/{thread_id(13)}"
    store.journal.write(lambda _views: Outcome([NewEvent(subject, RunArchived("old"))]))
    after = found(store)
    assert after["bug 13"][0] == 1
    assert thread_id(13) in after["archived"][1]
    store.journal.rebuild_views(snapshot=False)
    assert found(store) == after  # the same runs as an index made from every row


def test_an_index_is_not_made_in_a_file_that_cannot_be_written(store: Store) -> None:
    write_runs(store, 0, 12)
    store.journal.rebuild_views(snapshot=False)
    db = sqlite3.connect(f"file:{views_file(store)}?mode=ro", uri=True, isolation_level=None)
    try:
        assert fulltext.make(db, "runs") is False
        assert not fulltext.exists(db, "runs")
    finally:
        db.close()


def test_a_search_without_the_index_finds_what_the_index_finds(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    write_runs(store, 0, 40)
    with_index = found(store)
    store.journal.rebuild_views(snapshot=False)
    # A views file the index cannot be made in (read-only, say): each row's text tested.
    monkeypatch.setattr(fulltext, "make", lambda db, view: False)
    assert found(store) == with_index
    assert not indexed(store)


def test_a_snapshot_keeps_no_index_and_a_search_after_its_restore_is_right(
        store: Store) -> None:
    write_runs(store, 0, 30)
    before = found(store)
    assert indexed(store)
    kept = store.journal.snapshot()
    db = sqlite3.connect(f"file:{kept.path}?mode=ro", uri=True)
    try:
        assert not fulltext.exists(db, "runs")
        assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0  # compacted
    finally:
        db.close()
    assert store.journal.rebuild_views().restored == kept.checkpoint
    assert not indexed(store)
    assert found(store) == before
    assert indexed(store)
