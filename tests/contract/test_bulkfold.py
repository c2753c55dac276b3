"""A full replay's own fold (uwf/engine/bulkfold.py: every view made anew, planned per
event type, its states written in parts past a bound and read back when wanted again)
leaves the views file a fold command by command leaves: every row with its columns,
the kept counts and the stream index, on random logs that break the thread's table
too (the planned folds leave those events to `evolve`)."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.contract.test_views import T, U, event_data
from tests.viewkit import HASHES
from uwf.engine import bulkfold
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Outcome
from uwf.queue.events import SchedPolicySet
from uwf.runs.events import RunArchived, RunRerunLinked, RunUnarchived
from uwf.store import Store
from uwf.threads.events import (
    ThreadAnswered,
    ThreadAsked,
    ThreadBlocked,
    ThreadEnded,
    ThreadStarted,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
    ThreadTimedOut,
    Usage,
)

THREADS = st.sampled_from([T, U])
STEPS = st.sampled_from(["s1", "s2"])
# The events test_views draws, and those of questions, reruns, usage, archives, a policy.
more_data: st.SearchStrategy[tuple[str, EventData]] = st.one_of(
    event_data,
    st.tuples(THREADS, st.builds(
        lambda step, due: ThreadAsked(step, "planner", "why?", HASHES[0], due),
        STEPS, st.one_of(st.none(), st.integers(0, 10)))),
    st.tuples(THREADS, st.builds(lambda step: ThreadAnswered(step, HASHES[1], "me"), STEPS)),
    st.tuples(THREADS, st.builds(lambda step: ThreadTimedOut(step, 5), STEPS)),
    st.tuples(THREADS, st.builds(
        lambda step, reused, tokens: ThreadStepped(
            step, HASHES[2], "dev", "done", HASHES[0], reused,
            None if tokens is None else Usage(tokens, 1, 0.5)),
        STEPS, st.one_of(st.none(), st.just(HASHES[1])),
        st.one_of(st.none(), st.integers(0, 9)))),
    st.tuples(THREADS, st.builds(ThreadEnded, st.sampled_from(["end", "killed", "x"]))),
    st.tuples(THREADS, st.builds(RunArchived, st.sampled_from(["", "old"]))),
    st.tuples(THREADS, st.builds(RunUnarchived)),
    st.tuples(THREADS, st.just(RunRerunLinked(T[7:], "/r", T[7:], 1))),
    st.tuples(st.just("policy/sched"), st.builds(
        lambda n: SchedPolicySet(n, 3, 1000, 10, 2.0, 100), st.integers(1, 4))),
)


def dumped(root: Path) -> dict[str, Any]:
    """Every table of the views file but the checkpoints: its rows with every column
    (in key order), the kept counts that are not 0, the stream index."""
    db = sqlite3.connect(root / "views" / "views.sqlite3")
    try:
        found: dict[str, Any] = {}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                   "AND (name LIKE 'v\\_%' ESCAPE '\\' OR name = 'streams')"):
            found[table] = sorted(db.execute(f'SELECT * FROM "{table}"'), key=repr)
        found["counts"] = sorted(db.execute("SELECT * FROM counts WHERE n <> 0"))
        return found
    finally:
        db.close()


START = (T, ThreadStarted(HASHES[0], "a", HASHES[1], "/r"))
STEP_1 = (T, ThreadStepStarted("s1", "planner", "go", "mock", 5))
# Logs the table refuses, which the planned folds leave to `evolve`: a result of a step
# not in flight, a step's result while none runs, a block or a second start mid-step.
REFUSED = [
    [START, STEP_1, (T, ThreadStepFailed("s2", "planner", "exit", "boom"))],
    [START, STEP_1, (T, ThreadStepped("s2", HASHES[2], "planner", "done", HASHES[0]))],
    [START, (T, ThreadStepped("s1", HASHES[2], "planner", "done", HASHES[0]))],
    [START, STEP_1, (T, ThreadBlocked("no-agent", "none", "dev")), STEP_1],
    [START, (T, ThreadEnded("end")), STEP_1, (T, ThreadEnded("killed")), START],
]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@example([[event] for event in REFUSED[0]], 1, 0)
@example([[event] for event in REFUSED[1]], 2, 1)
@example([REFUSED[2]], 6, 0)
@example([[event] for event in REFUSED[3]], 1, 1)
@example([[event] for event in REFUSED[4]], 3, 0)
@given(st.lists(st.lists(more_data, min_size=1, max_size=3), min_size=1, max_size=16),
       st.integers(1, 6), st.integers(0, 3))
def test_a_full_replay_leaves_the_rows_a_fold_command_by_command_leaves(
        monkeypatch: pytest.MonkeyPatch, batches: list[list[tuple[str, EventData]]],
        bound: int, keep: int) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    with tempfile.TemporaryDirectory(prefix="uwf-bulkfold-") as scratch:
        root = Path(scratch) / "s"
        store = Store.open(root)
        for batch in batches:
            store.journal.write(lambda _views, b=batch: Outcome(  # type: ignore[misc]
                [NewEvent(subject, data) for subject, data in b]))
        store.close()
        incremental = dumped(root)
        # Parts past `bound` states (down to `keep`): states written, then read back.
        with monkeypatch.context() as patched:
            patched.setattr(bulkfold, "BOUND", bound)
            patched.setattr(bulkfold, "KEEP", keep)
            patched.setattr(bulkfold, "CHECK_EVERY", 1)
            store = Store.open(root)
            store.journal.rebuild_views(snapshot=False)
            store.close()
            assert dumped(root) == incremental
        # And held whole (the bound never reached).
        store = Store.open(root)
        store.journal.rebuild_views(snapshot=False)
        store.close()
        assert dumped(root) == incremental
        # And into no views file at all (loaded with the journal off).
        views_file(root).unlink()
        store = Store.open(root)
        store.journal.rebuild_views(snapshot=False)
        store.close()
        assert dumped(root) == incremental


def views_file(root: Path) -> Path:
    return root / "views" / "views.sqlite3"


def wal_bytes(root: Path) -> int:
    wal = Path(f"{views_file(root)}-wal")
    return wal.stat().st_size if wal.exists() else 0


def logged(root: Path, runs: int) -> dict[str, Any]:
    """A store of `runs` threads, each started and stepped, its views as folded."""
    store = Store.open(root)
    for number in range(runs):
        thread = f"thread/01J00000000000000000{number:06d}"
        store.journal.write(lambda _views, t=thread: Outcome([  # type: ignore[misc]
            NewEvent(t, START[1]), NewEvent(t, STEP_1[1])]))
    store.close()
    return dumped(root)


def test_a_replay_into_no_views_writes_its_pages_once_not_through_the_wal(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A rebuild's replay that finds no views (a copy's new store) loads them with the journal off
    (its pages written into the file, none into a WAL), and leaves the file in WAL mode
    with the rows a fold command by command leaves; with another connection open on the
    file, the replay goes through the WAL, as every commit does, to the same rows."""
    monkeypatch.setenv("UWF_DURABILITY", "none")
    root = tmp_path / "s"
    incremental = logged(root, 300)
    views_file(root).unlink()
    Path(f"{views_file(root)}-wal").unlink(missing_ok=True)
    store = Store.open(root)
    store.journal.rebuild_views(snapshot=False)
    assert wal_bytes(root) == 0
    store.close()
    assert dumped(root) == incremental
    db = sqlite3.connect(views_file(root))
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    # Another connection open: the WAL path.
    views_file(root).unlink()
    Path(f"{views_file(root)}-wal").unlink(missing_ok=True)
    other = sqlite3.connect(views_file(root))
    other.execute("PRAGMA journal_mode=WAL")
    other.execute("SELECT count(*) FROM sqlite_master").fetchone()
    try:
        store = Store.open(root)
        store.journal.rebuild_views(snapshot=False)
        assert wal_bytes(root) > 0
        store.close()
    finally:
        other.close()
    assert dumped(root) == incremental


def test_a_replay_without_a_journal_commits_its_rows_before_its_checkpoints(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With no journal a commit writes its pages in the file's order, the checkpoints'
    before the last rows': so the rows are committed first and the checkpoints in a
    transaction of their own (a kill between leaves views that claim none), under the
    exclusive lock, which is let go after (another connection writes)."""
    from uwf.engine import viewstore

    monkeypatch.setenv("UWF_DURABILITY", "none")
    root = tmp_path / "s"
    incremental = logged(root, 300)
    views_file(root).unlink()
    statements: list[str] = []
    real = viewstore.unjournalled  # type: ignore[attr-defined]

    def traced(db: sqlite3.Connection) -> bool:
        db.set_trace_callback(statements.append)
        return real(db)

    monkeypatch.setattr(viewstore, "unjournalled", traced)
    store = Store.open(root)
    store.journal.rebuild_views(snapshot=False)
    other = sqlite3.connect(views_file(root), timeout=0)
    other.execute("CREATE TABLE lock_probe (x)")  # the exclusive lock was let go
    other.execute("DROP TABLE lock_probe")
    other.close()
    store.close()
    first = next(n for n, sql in enumerate(statements)
                 if sql.startswith(("UPDATE checkpoints", "INSERT OR REPLACE INTO checkpoints")))
    assert "COMMIT" in statements[:first]
    assert dumped(root) == incremental


def test_a_replay_cut_short_with_the_journal_off_leaves_no_views(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A replay with the journal off that fails past its first part (pages of it may be
    in the file) leaves no views, never a part taken for the whole: the next read folds
    the log again, to the rows a fold command by command leaves."""
    monkeypatch.setenv("UWF_DURABILITY", "none")
    root = tmp_path / "s"
    incremental = logged(root, 300)
    views_file(root).unlink()
    made = bulkfold.BulkFold._part
    calls: list[int] = []

    def cut(self: bulkfold.BulkFold, keep: int) -> Any:
        calls.append(keep)
        if len(calls) == 3:
            raise RuntimeError("cut short")
        return made(self, keep)

    with monkeypatch.context() as patched:
        patched.setattr(bulkfold, "BOUND", 20)
        patched.setattr(bulkfold, "KEEP", 5)
        patched.setattr(bulkfold, "CHECK_EVERY", 1)
        patched.setattr(bulkfold.BulkFold, "_part", cut)
        store = Store.open(root)
        with pytest.raises(RuntimeError, match="cut short"):
            store.journal.rebuild_views(snapshot=False)
        assert store.journal.views.checkpoints() == {}
        store.close()
    store = Store.open(root)
    store.journal.rebuild_views(snapshot=False)
    store.close()
    assert dumped(root) == incremental

