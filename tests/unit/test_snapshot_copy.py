"""A rebuild that restores a snapshot over a views file no other connection has open
copies the snapshot's bytes over it with the kernel's copy (sendfile), not SQLite's
page-by-page backup: the same views, in WAL mode again, the file the same one (other
processes that open it later find it where it was)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.conftest import Cli
from tests.unit.test_snapshots import (
    full_replay,
    journal_mode,
    reads,
    store,
    write_runs,
)
from uwf.store import Store

__all__ = ["store"]  # the fixture, shared with the snapshots' tests (`env`: tests/conftest.py)


def test_a_restore_with_no_other_connection_copies_the_bytes_over(
        env: Cli, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    write_runs(store, 0, 18)
    kept = store.journal.snapshot()
    write_runs(store, 18, 6)
    expected = full_replay(env)
    store.close()  # no connection open: the journal can be turned off, the bytes copied
    views = env.home / "views" / "views.sqlite3"
    before = os.stat(views).st_ino
    sent: list[int] = []
    real = os.sendfile

    def recorded(out: int, source: int, offset: int | None, count: int) -> int:
        sent.append(real(out, source, offset, count))
        return sent[-1]

    monkeypatch.setattr(os, "sendfile", recorded)
    rebuilding = Store.open(env.home)
    assert rebuilding.journal.rebuild_views().restored == kept.checkpoint
    rebuilding.close()
    assert sum(sent) == kept.path.stat().st_size
    assert os.stat(views).st_ino == before
    assert journal_mode(env.home) == "wal"
    assert reads(env) == expected


def test_a_restore_with_another_connection_open_goes_page_by_page(
        env: Cli, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    write_runs(store, 0, 12)
    kept = store.journal.snapshot()
    write_runs(store, 12, 6)
    expected = full_replay(env)
    sent: list[Any] = []
    monkeypatch.setattr(os, "sendfile", lambda *args: sent.append(args))
    assert store.read().get("runs", "x") is None  # this store's connection stays open
    rebuilding = Store.open(env.home)
    assert rebuilding.journal.rebuild_views().restored == kept.checkpoint
    rebuilding.close()
    assert sent == []
    assert store.journal.freshness().status == "valid"
    assert reads(env) == expected
