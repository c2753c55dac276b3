"""The PostgreSQL view store (uwf/engine/pgviews.py) beyond the views contract suite
(tests/contract/test_contract.py): its commits inside a writer's section, concurrent commits
from several processes, its lock, typed columns, the trigram index, and the real
projections folded into it."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import EXAMPLE
from uwf.cas.backends import MemoryBlobs
from uwf.cas.store import Cas
from uwf.config.settings import process_settings
from uwf.engine.clock import system_clock
from uwf.engine.events import NewEvent
from uwf.engine.journal import Journal, Outcome
from uwf.engine.log import Checkpoint, MemoryLog
from uwf.engine.memviews import MemoryViewStore
from uwf.engine.pgdb import PgDatabase
from uwf.engine.pgviews import PgViewStore
from uwf.engine.viewspec import STREAMS, Query, Row, ViewSpec
from uwf.errors import Corrupt, StoreBusy
from uwf.queue import sched
from uwf.queue import service as queue
from uwf.store import Store, all_projections, event_catalog
from uwf.threads.events import ThreadEnded, ThreadStarted, ThreadStepped, ThreadStepStarted
from uwf.workflows.service import put_workflow

SPECS = [
    ViewSpec("w", 1, columns=("status", "priority", "at"),
             indexes=(("status", "priority", "at", "key"),), counted=("status",), text=True,
             types=("text", "int", "text")),
    ViewSpec("s", 1),
]


def cp(seq: int) -> Checkpoint:
    return Checkpoint(seq, f"{seq:032x}")


def row(status: str | None, priority: int | None = 100, at: str | None = "t",
        text: str = "") -> Row:
    return Row(f"{status}/{priority}/{at}".encode(), (status, priority, at), text)


@pytest.fixture
def db(pg_url: str) -> Iterator[PgDatabase]:
    opened = PgDatabase(pg_url, lock_timeout=0.2)
    yield opened
    opened.close()


@pytest.fixture
def views(db: PgDatabase) -> PgViewStore:
    store = PgViewStore(db, SPECS)
    assert store.commit({"w": {"a": row("ready")}}, {"w": None, "s": None, STREAMS: None},
                        cp(1), streams=[("thread/a", 1)])
    return store


def state(store: PgViewStore) -> tuple[Any, ...]:
    """Everything a reader sees (committed rows only, outside a section)."""
    return (store.checkpoints(), list(store.scan("w")), store.counts("w", "status"),
            store.stream("thread/a"), store.query(Query("w", text="fix")))


# -- commits in a writer's section ------------------------------------------------------

def test_a_rolled_back_section_leaves_views_and_checkpoints_as_they_were(
        db: PgDatabase, views: PgViewStore) -> None:
    before = state(views)

    def section() -> None:
        with db.transaction():
            assert views.commit({"w": {"a": None, "b": row("done", text="Fix it")}},
                                {"w": cp(1), STREAMS: cp(1)}, cp(2), streams=[("thread/a", 2)])
            # The section reads what it wrote; a reset in place is in it too.
            assert views.checkpoints()["w"] == cp(2)
            assert views.load("w", "b") == row("done").value
            assert views.stream("thread/a") == [1, 2]
            assert views.commit({"w": {"c": row("x")}}, {"w": cp(2), "s": cp(1)}, cp(3),
                                reset=True)
            assert [key for key, _ in views.scan("w")] == ["c"]
            raise RuntimeError("the command is refused")

    with pytest.raises(RuntimeError):
        section()
    assert state(views) == before
    assert views.checkpoints() == {"w": cp(1), "s": cp(1), STREAMS: cp(1)}


def test_a_commit_in_a_section_is_committed_with_it_and_readers_see_it_only_then(
        db: PgDatabase, views: PgViewStore) -> None:
    reader = PgDatabase(db.url)
    other = PgViewStore(reader, SPECS)
    reader.reader.execute("SET lock_timeout = '1s'")  # a reader blocked would fail, not hang
    try:
        before = state(other)
        with db.transaction() as connection:
            connection.execute("CREATE TABLE appended (seq int)")  # the log's append
            connection.execute("INSERT INTO appended VALUES (2)")
            assert views.commit({"w": {"b": row("done")}}, {"w": cp(1), "s": cp(1)}, cp(2),
                                reset=True)
            assert state(other) == before  # the old rows, not blocked by the reset
        assert other.checkpoints() == {"w": cp(2), "s": cp(2), STREAMS: cp(1)}
        assert [key for key, _ in other.scan("w")] == ["b"]
        assert reader.reader.execute("SELECT seq FROM appended").fetchall() == [(2,)]
    finally:
        reader.close()


def test_a_fold_the_database_refuses_rolls_back_alone_and_the_section_commits(
        db: PgDatabase, views: PgViewStore) -> None:
    before = state(views)
    with db.transaction() as connection:
        connection.execute("CREATE TABLE appended (seq int)")
        # The index has (thread/a, 1) already: the database refuses the whole fold.
        with pytest.raises(Exception, match="duplicate key"):
            views.commit({"w": {"b": row("done")}}, {"w": cp(1), STREAMS: cp(1)}, cp(2),
                         streams=[("thread/a", 1)])
        with pytest.raises(ValueError, match="column priority is int"):
            views.commit({"w": {"b": row("done", "high")}}, {"w": cp(1)}, cp(2))  # type: ignore[arg-type]
        connection.execute("INSERT INTO appended VALUES (2)")
    assert state(views) == before
    assert db.reader.execute("SELECT seq FROM appended").fetchall() == [(2,)]


def _race(url: str, name: str, rounds: int, barrier: Any, results: Any) -> None:
    """One process's commits, each expecting the checkpoint the round starts at."""
    db = PgDatabase(url)
    store = PgViewStore(db, SPECS)
    try:
        for number in range(1, rounds + 1):
            barrier.wait(timeout=60)
            won = store.commit({"w": {f"r{number:02d}": row(name)}}, {"w": cp(number)},
                               cp(number + 1))
            results.put((number, name, won))
    finally:
        db.close()


def test_two_processes_committing_the_same_expected_checkpoint_exactly_one_wins(
        views: PgViewStore, db: PgDatabase) -> None:
    rounds = 15
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    workers = [context.Process(target=_race, args=(db.url, name, rounds, barrier, results))
               for name in ("p1", "p2")]
    for worker in workers:
        worker.start()
    found = [results.get(timeout=120) for _ in range(2 * rounds)]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    winners = {number: name for number, name, won in found if won}
    assert sorted(winners) == list(range(1, rounds + 1))  # one per round...
    assert sum(won for _, _, won in found) == rounds  # ...and only one
    assert views.checkpoints()["w"] == cp(rounds + 1)
    rows = dict(views.scan("w"))
    assert {key: rows[key] for key in rows if key != "a"} == {
        f"r{number:02d}": row(name).value for number, name in winners.items()}


def test_a_commit_waits_for_the_views_lock_at_most_the_lock_timeout(
        db: PgDatabase, views: PgViewStore) -> None:
    holder_db = PgDatabase(db.url)
    holder = PgViewStore(holder_db, SPECS)
    try:
        with holder_db.transaction():  # holds the views' lock until it ends
            assert holder.commit({"w": {"b": row("done")}}, {"w": cp(1)}, cp(2))
            # Refused while the lock is still held: it waited its lock timeout, not
            # for the holder (which lets go only after this).
            with pytest.raises(StoreBusy, match="the views are busy"):
                views.commit({"w": {"c": row("done")}}, {"w": cp(1)}, cp(2))
            assert views.checkpoints()["w"] == cp(1)  # readers take no lock
        assert views.commit({"w": {"c": row("done")}}, {"w": cp(2)}, cp(3))
    finally:
        holder_db.close()


def test_one_store_serves_threads_reading_while_another_commits(
        views: PgViewStore) -> None:
    seen: dict[int, list[int]] = {n: [] for n in range(3)}
    keys = ["a", *(f"k{n}" for n in range(1, 21))]

    def read(number: int) -> None:
        for _ in range(40):
            seen[number].append(len(views.load_many("w", keys)))

    readers = [threading.Thread(target=read, args=(n,)) for n in range(3)]
    for reader in readers:
        reader.start()
    for number in range(1, 21):
        assert views.commit({"w": {f"k{number}": row("ready")}}, {"w": cp(number)},
                            cp(number + 1))
    for reader in readers:
        reader.join()
    for found in seen.values():  # each reader sees commits whole, in order
        assert len(found) == 40
        assert found == sorted(found)
        assert found[0] >= 1
        assert found[-1] <= 21
    assert views.count(Query("w")) == 21
    assert len(views.load_many("w", keys)) == 21


def test_damaged_views_are_corrupt_and_a_rebuild_in_a_section_replaces_them(
        db: PgDatabase, views: PgViewStore) -> None:
    db.reader.execute("ALTER TABLE uwf_views DROP COLUMN digest")  # a hand edit
    with pytest.raises(Corrupt, match="views are unreadable"):
        views.checkpoints()
    with db.transaction():  # as the journal's rebuild does, inside the writers' section
        with pytest.raises(Corrupt, match="views are unreadable"):
            views.checkpoints()
        views.drop()  # the section's transaction is still usable
        assert views.commit({"w": {"b": row("ok")}}, {"w": None, "s": None, STREAMS: None},
                            cp(2), streams=[("thread/b", 2)])
    assert views.checkpoints() == {"w": cp(2), "s": cp(2), STREAMS: cp(2)}
    assert [key for key, _ in views.scan("w")] == ["b"]
    db.reader.execute('ALTER TABLE uwf_v_w ALTER COLUMN "c_priority" TYPE text')
    with pytest.raises(Corrupt, match="views are unreadable"):
        views.query(Query("w", (("priority", "<", 5),)))


# -- typed columns, indexes, search --------------------------------------------------------

def test_column_types_are_required_and_each_value_checked(db: PgDatabase) -> None:
    with pytest.raises(ValueError, match="declares no column types"):
        PgViewStore(db, [ViewSpec("w", 1, columns=("status",))])
    with pytest.raises(ValueError, match="types"):
        ViewSpec("w", 1, columns=("status",), types=("float",))
    store = PgViewStore(db, SPECS)
    with pytest.raises(ValueError, match="view w: column status is text, not 7"):
        store.commit({"w": {"a": row(7)}}, {"w": None}, cp(1))  # type: ignore[arg-type]
    assert store.checkpoints() == {}
    assert store.load("w", "a") is None
    with pytest.raises(ValueError, match="column priority is int, not compared with '1'"):
        store.query(Query("w", (("priority", "<", "1"),)))
    with pytest.raises(ValueError, match="column at is text, not compared with 1"):
        store.count(Query("w", (("at", "in", ("x", 1)),)))


def test_ints_are_bigint_and_bools_are_ints(views: PgViewStore) -> None:
    big = 2**62  # the runs view's "no deadline"
    assert views.commit({"w": {"b": row("x", big), "c": row("x", True), "d": row("x", -big),
                               "e": row("x", None)}}, {"w": cp(1)}, cp(2))
    ordered = views.query(Query("w", (("status", "=", "x"),), order=("-priority",)))
    assert [key for key, _ in ordered] == ["b", "c", "d", "e"]  # NULL last descending
    picked = views.query(Query("w", (("priority", "in", (big, 1)),)))
    assert [key for key, _ in picked] == ["b", "c"]
    assert [key for key, _ in views.query(Query("w", (("key", "in", ("e", "a")),)))] == \
        ["a", "e"]
    assert views.counts("w", "priority") == {100: 1, big: 1, 1: 1, -big: 1, None: 1}


def test_a_change_of_column_types_alone_rebuilds_the_view(db: PgDatabase,
                                                         views: PgViewStore) -> None:
    retyped = ViewSpec("w", 1, columns=("status", "priority", "at"),
                       indexes=SPECS[0].indexes, counted=("status",), text=True,
                       types=("text", "int", "int"))
    assert retyped.signature == SPECS[0].signature  # SQLite and memory: the same view
    again = PgViewStore(db, [retyped, SPECS[1]])
    assert again.checkpoints() == {"s": cp(1), STREAMS: cp(1)}
    assert again.commit({"w": {"a": row("ready", 1, None), "b": row("ready", 1, None)}},
                        {"w": None}, cp(1))
    assert again.count(Query("w", (("at", "=", None),))) == 2
    assert again.counts("w", "status") == {"ready": 2}


def test_drop_forgets_every_view_even_those_no_longer_declared(db: PgDatabase,
                                                              views: PgViewStore) -> None:
    PgViewStore(db, [SPECS[1]]).drop()
    tables = db.reader.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE "
                               "'uwf%' ORDER BY tablename").fetchall()
    assert tables == [("uwf_counts",), ("uwf_migrations",), ("uwf_schema",), ("uwf_streams",),
                      ("uwf_views",)]
    assert views.checkpoints() == {}
    assert views.load("w", "a") is None  # the table it had seen is gone: absent, no error
    assert views.stream("thread/a") == []
    assert views.commit({"w": {"b": row("ready")}}, {"w": None}, cp(5))
    assert [key for key, _ in views.scan("w")] == ["b"]


def test_search_terms_use_the_trigram_index(db: PgDatabase, views: PgViewStore) -> None:
    assert views.trigram
    rows = {f"k{n:04d}": row("ok", n, text=f"Entry number {n} about {topic} things")
            for n in range(3000) for topic in ["other" if n % 97 else "LOGIN"]}
    assert views.commit({"w": rows}, {"w": cp(1)}, cp(2))
    found = views.query(Query("w", text="LOGIN things"))
    assert [key for key, _ in found] == [f"k{n:04d}" for n in range(0, 3000, 97)]
    with db.transaction() as connection:
        connection.execute("SET LOCAL enable_seqscan = off")
        plan = connection.execute("EXPLAIN SELECT key FROM uwf_v_w WHERE text LIKE "
                                  "'%login%'").fetchall()
    assert "uwf_t_w" in "\n".join(line for line, in plan)


def test_without_pg_trgm_searches_answer_the_same_by_scanning(pg_url: str) -> None:
    # A user who may not create extensions (no CREATE on the database), on a database
    # where nobody made pg_trgm yet.
    role = "plain"  # roles are the server's: one per test session, as the server is
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT CREATE ON SCHEMA public TO {role}")
    plain = PgDatabase(pg_url.replace("postgres@", f"{role}@"))
    try:
        store = PgViewStore(plain, SPECS)
        assert not store.trigram
        texts = {"a": "Fix the LOGIN bug in #42", "b": "Refactor the parser", "c": "50%_off\0!"}
        assert store.commit({"w": {k: row("ok", text=t) for k, t in texts.items()}},
                            {"w": None}, cp(1))
        assert [k for k, _ in store.query(Query("w", text="login"))] == ["a"]
        assert [k for k, _ in store.query(Query("w", text="THE"))] == ["a", "b"]
        assert [k for k, _ in store.query(Query("w", text="%_"))] == ["c"]
        assert store.query(Query("w", text="%o")) == []  # % and _ are not wildcards
        assert store.query(Query("w", text="_f")) == []
        assert [k for k, _ in store.query(Query("w", text="off\0"))] == ["c"]  # NUL kept
        assert plain.reader.execute("SELECT count(*) FROM pg_indexes WHERE indexname = "
                                    "'uwf_t_w'").fetchone() == (0,)
    finally:
        plain.close()


def test_a_store_opened_beside_existing_views_takes_no_lock(db: PgDatabase,
                                                           views: PgViewStore) -> None:
    with db.transaction():  # holds the views' lock
        assert views.commit({"w": {"b": row("done")}}, {"w": cp(1)}, cp(2))
        other = PgDatabase(db.url, lock_timeout=0.2)
        try:
            assert PgViewStore(other, SPECS).checkpoints()["w"] == cp(1)
        finally:
            other.close()


# -- the real projections -------------------------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.ms = 1_795_000_000_000

    def __call__(self) -> int:
        self.ms += 1_000
        return self.ms


def test_the_real_projections_fold_into_postgres_as_they_replay(
        db: PgDatabase, tmp_path: Path) -> None:
    projections = all_projections()
    views = PgViewStore(db, [projection.spec() for projection in projections])
    clock = Clock()
    store = Store(None, Journal(MemoryLog(), views, projections, event_catalog(), clock=clock),
                  Cas(MemoryBlobs(wall=system_clock), clock=clock), settings=process_settings())
    put_workflow(store, EXAMPLE)
    sched.set_policy(store.journal, {"leaseTtlMs": 10_000})
    added = [queue.add(store, queue.EntrySpec(workflow="solve-issue", prompt=f"job {n}",
                                              repo=str(tmp_path), priority=n % 3,
                                              session="s" if n % 2 else None),
                       store.settings).entry.id
             for n in range(6)]
    (lease,) = sched.lease(store, 1).leases
    sched.complete(store, lease.id, lease.lease_id)
    (lease,) = sched.lease(store, 1).leases
    sched.release(store, lease.id, lease.lease_id, failed=True)
    queue.cancel(store, added[-1], "not needed")
    thread = "thread/01JD0000000000000000000001"
    for data in (ThreadStarted("70D2DHWNFR6T8", "a", "07M38PX0M6M1C", "/r"),
                 ThreadStepStarted("s1", "planner", "go", "mock", 5),
                 ThreadStepped("s1", "0HMFKR60QCWK5", "planner", "done", "70D2DHWNFR6T8"),
                 ThreadEnded("end")):
        store.journal.write(lambda _views, d=data: Outcome([NewEvent(thread, d)]))  # type: ignore[misc]
    replayed = store.journal.replay()
    memory = MemoryViewStore([projection.spec() for projection in projections])
    changes: dict[str, dict[str, Row | None]] = {}
    for (view, key), value in replayed.items():
        changes.setdefault(view, {})[key] = value
    assert memory.commit(changes, dict.fromkeys(changes), cp(1))
    assert {(view, key): raw for view in changes for key, raw in views.scan(view)} == {
        key: value.value for key, value in replayed.items()}
    for view in ("queue", "threads", "runs", "steps"):
        spec = next(p.spec() for p in projections if p.name == view)
        for column in spec.columns:
            assert views.counts(view, column) == memory.counts(view, column), (view, column)
            for order in ((column,), (f"-{column}",)):
                query = Query(view, order=order)
                assert views.query(query) == memory.query(query), (view, order)
    page = queue.list_entries(store.read(), status="ready")  # the queue's own queries answer
    assert page.total == len(page.entries) == memory.counts("queue", "status")["ready"] > 0
