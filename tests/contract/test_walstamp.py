"""The views' checkpoints read again without SQLite while no connection has committed
(uwf/engine/walstamp.py: the WAL-index header, one pread), and read from SQLite once
any connection (of this process or another) has."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.contract.test_contract import view_store
from uwf.engine.log import Checkpoint
from uwf.engine.viewspec import STREAMS, Row
from uwf.engine.walstamp import HEADER, WalStamp


def cp(seq: int) -> Checkpoint:
    return Checkpoint(seq, f"d{seq}")


def test_a_write_s_look_at_the_checkpoints_runs_no_statement_until_another_commit(
        tmp_path: Path) -> None:
    views = view_store("sqlite", tmp_path)
    other = view_store("sqlite", tmp_path)  # another connection to the same file
    views.commit({"w": {"a": Row(b"{}", ("ready", 1, "x"))}},
                 {"w": None, "s": None, STREAMS: None}, cp(1), streams=[("x", 1)])
    moved = {"w": cp(1), "s": cp(1), STREAMS: cp(1)}
    statements: list[str] = []
    db = views._connect(create=False)  # type: ignore[attr-defined]
    db.set_trace_callback(statements.append)
    assert views.checkpoints() == moved  # after its own commit: SQLite asked once
    assert statements == ["PRAGMA data_version"]
    statements.clear()
    for _ in range(3):
        assert views.checkpoints() == moved
    assert statements == []  # nothing committed since: the header alone
    assert other.commit({"s": {"b": Row(b"{}", ())}}, moved, cp(2), streams=[("y", 2)])
    assert views.checkpoints() == {"w": cp(2), "s": cp(2), STREAMS: cp(2)}
    assert statements[0] == "PRAGMA data_version"
    statements.clear()
    plain = sqlite3.connect(tmp_path / "views" / "views.sqlite3", isolation_level=None)
    plain.execute("UPDATE checkpoints SET seq = 3, digest = 'd3' WHERE name = ''")
    plain.close()  # any commit, even one that is not uwf's, is seen
    assert views.checkpoints() == {"w": cp(3), "s": cp(3), STREAMS: cp(3)}
    assert statements[0] == "PRAGMA data_version"
    db.set_trace_callback(None)
    views.let_go()  # a connection made again asks SQLite again
    assert views.checkpoints() == {"w": cp(3), "s": cp(3), STREAMS: cp(3)}
    views.close()
    other.close()


def test_a_stamp_without_a_header_to_read_is_none(tmp_path: Path) -> None:
    stamp = WalStamp(str(tmp_path / "views.sqlite3"))
    assert stamp.read() is None  # no -shm file
    (tmp_path / "views.sqlite3-shm").write_bytes(b"\0" * (HEADER - 1))
    assert stamp.read() is None  # one being made: shorter than the header
    stamp.close()
