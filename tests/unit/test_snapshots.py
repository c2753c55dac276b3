"""Snapshots of the views (SPEC §11, docs/registry.md#snapshots): a rebuild and a fresh
reader restore the kept snapshot and fold only the log after it, printing what a full
replay prints byte for byte; a snapshot whose checkpoint the log no longer holds (the log
cut, or rewritten) is refused and the whole log is replayed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.viewkit import HASHES
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Outcome
from uwf.engine.log import LogLine
from uwf.errors import UsageError
from uwf.runs.events import RunArchived
from uwf.store import Store
from uwf.threads.events import (
    ThreadBlocked,
    ThreadEnded,
    ThreadStarted,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
)
from uwf.workflows.events import WorkflowRegistered

NOW = "2030-01-01T00:00:00.000Z"
# What a reader prints, through every view: the runs (and their search index and kept
# counts), the threads, the workflows, one run's steps, and the registry's own account.
READS = (
    ("run", "list", "--limit", "500"),
    ("run", "search", "--text", "bug 13", "--limit", "500"),
    ("run", "list", "--status", "failed", "--limit", "500"),
    ("run", "list", "--status", "archived", "--repo", "/repo2", "--limit", "500"),
    ("thread", "list", "--all"),
    ("workflow", "list"),
    ("registry", "show"),
    ("registry", "verify"),
)


def thread_id(number: int) -> str:
    return f"01JD{number:022d}"


def write_runs(store: Store, first: int, count: int) -> None:
    """`count` runs numbered from `first`, each a few commands, ending in a mix of
    lifecycles (ended, failed, blocked, killed, archived, in flight)."""
    for number in range(first, first + count):
        subject = f"thread/{thread_id(number)}"
        name = f"flow{number % 3}"
        commands: list[list[tuple[str, EventData]]] = [
            [(f"workflow/{name}", WorkflowRegistered(name, HASHES[number % 3]))],
            [(subject, ThreadStarted(HASHES[0], name, HASHES[1], f"/repo{number % 4}",
                                     inputs_digest=f"fix bug {number}"))],
            [(subject, ThreadStepStarted("s1", "planner", "go", "mock", 2**40))],
        ]
        kind = number % 6
        if kind == 0:
            commands.append([(subject, ThreadStepped("s1", HASHES[2], "planner", "ok",
                                                     HASHES[0]))])
            commands.append([(subject, ThreadEnded("end"))])
        elif kind == 1:
            commands.append([(subject, ThreadStepFailed("s1", "planner", "exit", "boom"))])
        elif kind == 2:
            commands.append([(subject, ThreadStepFailed("s1", "planner", "exit", "boom")),
                             (subject, ThreadBlocked("no-agent", "none", "dev"))])
        elif kind == 3:
            commands.append([(subject, ThreadEnded("killed"))])
        elif kind == 4:
            commands.append([(subject, ThreadStepped("s1", HASHES[2], "planner", "ok",
                                                     HASHES[0]))])
            commands.append([(subject, ThreadEnded("end"))])
            commands.append([(subject, RunArchived("done"))])
        for command in commands:
            store.journal.write(lambda _views, c=command: Outcome(  # type: ignore[misc]
                [NewEvent(subject, data) for subject, data in c]))


@pytest.fixture
def store(env: Cli) -> Iterator[Store]:
    opened = Store.open(env.home)
    yield opened
    opened.close()


def reads(cli: Cli) -> list[tuple[int, str, str]]:
    """What each read prints, with --json and on a pipe (the panel's words too)."""
    printed = []
    for argv in READS:
        for flags in ((), ("--json",)):
            result = cli.run(*flags, *argv)
            printed.append((result.code, result.out, result.err))
    return printed


def full_replay(cli: Cli) -> list[tuple[int, str, str]]:
    """What the reads print after a rebuild that replays the whole log (no snapshot)."""
    kept = cli.home / "kept"
    kept.mkdir()
    for path in (cli.home / "views").glob("snapshot-*"):
        path.rename(kept / path.name)
    store = Store.open(cli.home)
    assert store.journal.rebuild_views().restored is None
    store.close()
    printed = reads(cli)
    for path in kept.iterdir():
        path.rename(cli.home / "views" / path.name)
    kept.rmdir()
    return printed


def folded_from(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Where each read of the log starts (the `after` of `log.read`), as it happens."""
    starts: list[int] = []
    original = store.log.read

    def read(after: int = 0) -> Iterator[LogLine]:
        starts.append(after)
        return original(after)

    monkeypatch.setattr(store.log, "read", read)
    return starts


def test_a_rebuild_restores_the_snapshot_and_folds_only_the_tail(
        env: Cli, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    write_runs(store, 0, 24)
    kept = store.journal.snapshot()
    assert kept.path.name == f"snapshot-{store.log.head().seq}.sqlite3"
    write_runs(store, 24, 12)  # the tail, after the snapshot
    head = store.log.head()
    expected = full_replay(env)
    starts = folded_from(store, monkeypatch)
    rebuilt = store.journal.rebuild_views()
    assert rebuilt.restored == kept.checkpoint
    assert rebuilt.refused is None
    assert rebuilt.head == head
    assert starts == [kept.checkpoint.seq]  # the tail only, never from seq 1
    assert reads(env) == expected


def test_a_fresh_reader_restores_the_snapshot(env: Cli, store: Store,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write_runs(store, 0, 18)
    kept = store.journal.snapshot()
    write_runs(store, 18, 6)
    expected = full_replay(env)
    store.close()
    for path in (env.home / "views").glob("views.sqlite3*"):
        path.unlink()
    again = Store.open(env.home)
    starts = folded_from(again, monkeypatch)
    again.read()
    assert starts == [kept.checkpoint.seq]
    again.close()
    assert reads(env) == expected


def test_the_cli_keeps_a_snapshot_and_rebuilds_from_it(env: Cli, store: Store) -> None:
    write_runs(store, 0, 6)
    store.close()
    kept = env.run("--json", "registry", "snapshot")
    assert kept.code == 0, kept.err
    assert '"checkpoint": ' in kept.out
    seq = int(kept.out.split('"checkpoint": ')[1].split(",")[0])
    assert (env.home / "views" / f"snapshot-{seq}.sqlite3").exists()
    rebuilt = env.run("--json", "registry", "rebuild")
    assert rebuilt.code == 0, rebuilt.err
    assert f'"fromSnapshot": {seq}' in rebuilt.out
    assert "snapshotRefused" not in rebuilt.out


def test_only_the_newest_snapshot_is_kept(store: Store) -> None:
    write_runs(store, 0, 3)
    first = store.journal.snapshot()
    write_runs(store, 3, 3)
    second = store.journal.snapshot()
    assert second.checkpoint.seq > first.checkpoint.seq
    assert sorted(p.name for p in second.path.parent.glob("snapshot-*")) == [second.path.name]


def cut(home: Path, keep: int) -> None:
    """Keep the log's first `keep` lines (a log cut below a snapshot's checkpoint)."""
    segment = sorted((home / "events").glob("*.jsonl"))[0]
    lines = segment.read_bytes().splitlines(keepends=True)
    segment.write_bytes(b"".join(lines[:keep]))


def test_a_snapshot_of_a_log_since_cut_is_refused(env: Cli, store: Store,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    write_runs(store, 0, 12)
    kept = store.journal.snapshot()
    store.close()
    cut(env.home, kept.checkpoint.seq - 5)
    again = Store.open(env.home)
    starts = folded_from(again, monkeypatch)
    rebuilt = again.journal.rebuild_views()
    assert rebuilt.restored is None
    assert rebuilt.refused is not None
    assert f"does not hold its checkpoint (seq {kept.checkpoint.seq})" in rebuilt.refused
    assert starts == [0]  # the whole log replayed
    assert rebuilt.head == again.log.head()
    again.close()
    assert reads(env) == full_replay(env)


def test_a_snapshot_of_a_log_since_rewritten_is_refused(env: Cli, store: Store) -> None:
    write_runs(store, 0, 12)
    kept = store.journal.snapshot()
    store.close()
    # The log cut below the checkpoint, then written again to beyond it: the same seqs,
    # other lines (other ids and times), so the line at the checkpoint has another digest.
    cut(env.home, kept.checkpoint.seq - 7)
    again = Store.open(env.home)
    again.journal.rebuild()
    write_runs(again, 100, 6)
    assert again.log.head().seq > kept.checkpoint.seq
    rebuilt = again.journal.rebuild_views()
    assert rebuilt.restored is None
    assert rebuilt.refused is not None
    assert "cut or rewritten" in rebuilt.refused
    again.close()
    result = env.run("--json", "registry", "rebuild")
    assert '"snapshotRefused": "snapshot snapshot-' in result.out
    assert reads(env) == full_replay(env)


def test_a_fresh_reader_refuses_a_forged_snapshot_and_replays(
        env: Cli, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    write_runs(store, 0, 12)
    kept = store.journal.snapshot()
    store.close()
    # The line at the checkpoint (the log's last) forged: its subject changed, so its
    # digest differs though the chain up to it still holds.
    segment = sorted((env.home / "events").glob("*.jsonl"))[0]
    lines = segment.read_bytes().splitlines(keepends=True)
    assert len(lines) == kept.checkpoint.seq
    lines[-1] = lines[-1].replace(b'"subject":"thread/', b'"subject":"thread/x', 1)
    segment.write_bytes(b"".join(lines))
    for path in (env.home / "views").glob("views.sqlite3*"):
        path.unlink()
    again = Store.open(env.home)
    starts = folded_from(again, monkeypatch)
    assert again.journal.rebuild_views().refused is not None
    assert starts == [0]
    again.close()


def test_an_unreadable_snapshot_is_refused(env: Cli, store: Store) -> None:
    write_runs(store, 0, 6)
    kept = store.journal.snapshot()
    kept.path.write_bytes(b"not a database" * 100)
    rebuilt = store.journal.rebuild_views()
    assert rebuilt.restored is None
    assert rebuilt.refused is not None
    assert "unreadable" in rebuilt.refused
    assert rebuilt.head == store.log.head()


def test_a_snapshot_with_a_changed_view_restores_the_rest(
        env: Cli, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from uwf.workflows.projection import WorkflowsProjection

    write_runs(store, 0, 12)
    store.journal.snapshot()
    write_runs(store, 12, 6)
    expected = full_replay(env)
    store.close()
    # A newer uwf changed the workflows view: the snapshot's copy of it is not used;
    # that view alone is folded from seq 1, the others from the snapshot.
    monkeypatch.setattr(WorkflowsProjection, "version", WorkflowsProjection.version + 1)
    again = Store.open(env.home)
    assert again.journal.rebuild_views().restored is not None
    assert again.journal.freshness().status == "valid"
    again.close()
    monkeypatch.undo()
    assert reads(env) == expected


def test_stores_without_sqlite_views_keep_no_snapshots() -> None:
    store = Store.memory()
    with pytest.raises(UsageError, match="keep no snapshots"):
        store.journal.snapshot()
    assert store.journal.rebuild_views().restored is None


def test_snapshot_of_an_empty_store_is_refused_with_one_line(env: Cli) -> None:
    result = env.run("registry", "snapshot")
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert "no views to keep a snapshot of" in result.err
    assert not list(env.home.glob("views/snapshot-*"))


def journal_mode(home: Path) -> str:
    import sqlite3

    db = sqlite3.connect(home / "views" / "views.sqlite3")
    try:
        return str(db.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        db.close()


@pytest.mark.parametrize("another", [False, True])
def test_a_restore_in_place_keeps_other_connections_valid(
        env: Cli, store: Store, another: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from uwf.engine import snapshot

    unjournalled: list[bool] = []
    original = snapshot._unjournalled

    def recorded(db: Any, busy_timeout: float) -> bool:
        unjournalled.append(original(db, busy_timeout))
        return unjournalled[-1]

    monkeypatch.setattr(snapshot, "_unjournalled", recorded)
    write_runs(store, 0, 12)
    kept = store.journal.snapshot()
    write_runs(store, 12, 6)
    head = store.log.head()
    store.close()  # no connection of this store open: a restore with the journal off
    reader = Store.open(env.home)
    if another:  # a reader's connection open: the restore goes through the WAL
        assert reader.read().get("runs", thread_id(13)) is not None
    rebuilt = Store.open(env.home)
    assert rebuilt.journal.rebuild_views().restored == kept.checkpoint
    rebuilt.close()
    assert unjournalled == [not another]
    views = reader.read()
    assert views.head == head
    assert views.get("runs", thread_id(13)) is not None
    assert reader.journal.freshness().status == "valid"
    reader.close()
    assert journal_mode(env.home) == "wal"
    # The views match a replay (the heads these runs name are made up: not in the CAS).
    verified = env.run("registry", "verify", "--json")
    assert json.loads(verified.out)["differences"] == []
