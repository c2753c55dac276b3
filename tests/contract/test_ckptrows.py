"""The views' checkpoints as one shared row (uwf/engine/ckptrows.py, docs/format.md#views):
a write moves one row; a view that does not move keeps its own; views of the earlier
layout (a row per view) are rebuilt from the log."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.contract.test_contract import SPECS, view_store
from uwf.engine.log import Checkpoint
from uwf.engine.viewspec import STREAMS, Row, ViewStore
from uwf.engine.viewstore import SqliteViewStore
from uwf.errors import Corrupt
from uwf.store import Store


def cp(seq: int) -> Checkpoint:
    return Checkpoint(seq, f"d{seq}")


def rows(path: Path) -> dict[str, tuple[object, object]]:
    db = sqlite3.connect(path)
    try:
        return {name: (seq, digest) for name, seq, digest in db.execute(
            "SELECT name, seq, digest FROM checkpoints")}
    finally:
        db.close()


def test_a_write_moves_the_shared_row_only(tmp_path: Path) -> None:
    views = view_store("sqlite", tmp_path)
    path = tmp_path / "views" / "views.sqlite3"
    views.commit({"w": {"a": Row(b"{}", ("ready", 1, "x"))}},
                 {"w": None, "s": None, STREAMS: None}, cp(1), streams=[("x", 1)])
    moved = {"w": cp(1), "s": cp(1), STREAMS: cp(1)}
    statements: list[str] = []
    db = views._connect(create=False)  # type: ignore[attr-defined]
    db.set_trace_callback(statements.append)
    assert views.commit({"s": {"b": Row(b"{}", ())}}, moved, cp(2), streams=[("y", 2)])
    db.set_trace_callback(None)
    assert [s for s in statements if "checkpoints" in s] == [
        "UPDATE checkpoints SET seq = 2, digest = 'd2' WHERE name = ''"]
    assert rows(path) == {"": (2, "d2"), "w": (None, None), "s": (None, None),
                          STREAMS: (None, None)}
    views.close()
    again = view_store("sqlite", tmp_path)
    assert again.checkpoints() == {"w": cp(2), "s": cp(2), STREAMS: cp(2)}
    again.close()


def moved_on_and_joined(both: ViewStore, cp: Callable[[int], Checkpoint]) -> None:
    """Views w and s, after w alone moved to 2 while s stayed at 1 (on every backend:
    tests/contract/test_pgckpt.py too): a commit expecting s at 2 is refused, each moves
    on its own, then both together, at 4."""
    assert both.checkpoints() == {"w": cp(2), "s": cp(1)}
    assert not both.commit({}, {"w": cp(2), "s": cp(2)}, cp(3))  # s is at 1: refused
    assert both.commit({}, {"w": cp(2)}, cp(3))
    assert both.checkpoints() == {"w": cp(3), "s": cp(1)}
    assert both.commit({}, {"s": cp(1)}, cp(3))
    assert both.checkpoints() == {"w": cp(3), "s": cp(3)}
    assert both.commit({}, {"w": cp(3), "s": cp(3)}, cp(4))


def test_a_view_that_does_not_move_keeps_its_checkpoint(tmp_path: Path) -> None:
    """One view moved alone (built alone, or by a uwf that does not know the others):
    the others keep where they were, as their own rows, and join again when moved."""
    both = view_store("sqlite", tmp_path)
    both.commit({}, {"w": None, "s": None}, cp(1))
    both.close()
    alone = SqliteViewStore(tmp_path / "views" / "views.sqlite3", [SPECS[0]])
    assert alone.checkpoints() == {"w": cp(1)}
    assert alone.commit({}, {"w": cp(1)}, cp(2))
    alone.close()
    both = view_store("sqlite", tmp_path)
    moved_on_and_joined(both, cp)
    both.close()
    assert rows(tmp_path / "views" / "views.sqlite3") == {
        "": (4, "d4"), "w": (None, None), "s": (None, None)}


def test_a_joined_row_without_a_shared_one_is_a_damaged_view(tmp_path: Path) -> None:
    views = view_store("sqlite", tmp_path)
    views.commit({}, {"w": None, "s": None}, cp(1))
    views.close()
    db = sqlite3.connect(tmp_path / "views" / "views.sqlite3")
    db.execute("DELETE FROM checkpoints WHERE name = ''")
    db.commit()
    db.close()
    again = view_store("sqlite", tmp_path)
    with pytest.raises(Corrupt, match="shared checkpoint that is missing"):
        again.checkpoints()
    again.close()


def to_earlier_layout(path: Path) -> None:
    """The views file as the earlier layout kept it: a `views` table, a row per view
    with its own checkpoint, and no `checkpoints` table."""
    db = sqlite3.connect(path, isolation_level=None)
    found = db.execute("SELECT name, signature, seq, digest FROM checkpoints").fetchall()
    shared = next((seq, digest) for name, _, seq, digest in found if name == "")
    db.execute("CREATE TABLE views (name TEXT PRIMARY KEY, signature TEXT NOT NULL, "
               "seq INTEGER NOT NULL, digest TEXT NOT NULL)")
    db.executemany("INSERT INTO views VALUES (?, ?, ?, ?)",
                   [(name, signature, *(shared if seq is None else (seq, digest)))
                    for name, signature, seq, digest in found if name != ""])
    db.execute("DROP TABLE checkpoints")
    db.execute("DELETE FROM v_workflows")  # rows an earlier uwf would have: gone here
    db.close()


def test_views_of_the_earlier_layout_are_rebuilt_from_the_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.e2e.test_streams import registered, write

    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    for number in range(5):
        write(store, registered(f"w{number}"))
    names = sorted(key for key, _ in store.views.scan("workflows"))
    store.close()
    path = tmp_path / "s" / "views" / "views.sqlite3"
    to_earlier_layout(path)
    again = Store.open(tmp_path / "s")
    assert sorted(key for key, _ in again.read().scan("workflows")) == names
    assert again.journal.freshness().status == "valid"
    again.close()
    db = sqlite3.connect(path)
    tables = {name for name, in db.execute("SELECT name FROM sqlite_master WHERE type = "
                                           "'table'")}
    db.close()
    assert "views" not in tables
    assert "checkpoints" in tables


def test_a_snapshot_of_the_earlier_layout_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.e2e.test_streams import registered, write

    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    for number in range(3):
        write(store, registered(f"w{number}"))
    taken = store.journal.snapshot()
    to_earlier_layout(taken.path)
    done = store.journal.rebuild_views()
    assert done.restored is None
    assert done.refused is not None
    assert "earlier layout" in done.refused
    assert sorted(key for key, _ in store.read().scan("workflows")) == ["w0", "w1", "w2"]
    store.close()
