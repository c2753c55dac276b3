"""One contract suite for each storage interface, run against every backend.

Backend-only behaviour lives in tests/contract/test_filelog.py (segments, torn tails) and
tests/contract/test_pg*.py (processes racing, a killed writer); the journal's in
tests/contract/test_views.py.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.logkit import append
from tests.pgkit import pg_database  # noqa: F401  (the postgres backends' database)
from uwf.cas.backends import Blobs, FileBlobs, MemoryBlobs
from uwf.cas.builtins import builtin_hash
from uwf.cas.pgblobs import PgBlobs
from uwf.cas.store import Cas
from uwf.engine.clock import system_clock
from uwf.engine.events import GENESIS_PREV, NewEvent, StoreCreated, digest
from uwf.engine.filelog import FileLog
from uwf.engine.log import GENESIS, Checkpoint, EventLog, MemoryLog
from uwf.engine.memviews import MemoryViewStore
from uwf.engine.pglog import PgLog
from uwf.engine.viewspec import STREAMS, Query, Row, ViewSpec, ViewStore
from uwf.engine.viewstore import SqliteViewStore
from uwf.errors import NotFound, Rejected, StoreBusy, UsageError
from uwf.store import event_catalog
from uwf.workflows.events import WorkflowRegistered

CATALOG = event_catalog()


# -- backends ------------------------------------------------------------------

@pytest.fixture(params=["memory", "file", "postgres"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> EventLog:
    if request.param == "memory":
        return MemoryLog(lock_timeout=0.05)
    if request.param == "postgres":
        return PgLog(request.getfixturevalue("pg_database"))
    return FileLog(tmp_path / "events", tmp_path / "lock", lock_timeout=0.05,
                   segment_bytes=400)


SPECS = [
    ViewSpec("w", 1, columns=("status", "priority", "at"),
             indexes=(("status", "priority", "at", "key"),), counted=("status",), text=True,
             types=("text", "int", "text")),
    ViewSpec("s", 1),
]


def view_store(kind: str, path: Path, specs: list[ViewSpec] = SPECS, *,
               url: str = "") -> ViewStore:
    """A view store of `kind`; "postgres" lives in the database at `url`."""
    if kind == "memory":
        return MemoryViewStore(specs)
    if kind == "postgres":
        from uwf.engine.pgdb import PgDatabase
        from uwf.engine.pgviews import PgViewStore
        return PgViewStore(PgDatabase(url), specs)
    return SqliteViewStore(path / "views" / "views.sqlite3", specs)


def closed(store: ViewStore) -> None:
    """Close the store, and the database a PostgreSQL one was given."""
    store.close()
    db = getattr(store, "db", None)
    if db is not None:
        db.close()


def database(request: pytest.FixtureRequest, kind: str) -> str:
    return str(request.getfixturevalue("pg_url")) if kind == "postgres" else ""


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def views(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ViewStore]:
    store = view_store(request.param, tmp_path, url=database(request, request.param))
    yield store
    closed(store)


@pytest.fixture(params=["memory", "file", "postgres"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Blobs:
    if request.param == "memory":
        return MemoryBlobs(wall=system_clock)
    if request.param == "postgres":
        return PgBlobs(request.getfixturevalue("pg_database"))
    return FileBlobs(tmp_path / "cas", wall=system_clock)


def registered(name: str, hash_: str = "70D2DHWNFR6T8") -> NewEvent:
    return NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_))


def seqs(log: EventLog, after: int = 0) -> list[int]:
    return [CATALOG.decode(line.raw).seq for line in log.read(after)]


# -- the event log ---------------------------------------------------------------

def test_empty_log_has_genesis_head(log: EventLog) -> None:
    assert log.head() == GENESIS == Checkpoint(0, GENESIS_PREV)
    assert list(log.read()) == []
    assert list(log.read_reverse()) == []
    assert log.line(1) is None
    assert log.problems() == []
    with log.exclusive() as session:
        assert session.tail() == GENESIS
        assert session.recover() == (GENESIS, [])


def test_wait_is_told_of_a_new_line_and_times_out_without_one(log: EventLog) -> None:
    import threading

    append(log, NewEvent("store", StoreCreated(format=1)))
    assert log.wait(0, 0) is True  # already there
    assert log.wait(1, 0.05) is False  # nothing after seq 1
    writer = threading.Timer(0.1, lambda: append(log, registered("a")))
    writer.start()
    try:
        assert log.wait(1, 30) is True
    finally:
        writer.join()
    assert log.head().seq == 2


def test_append_returns_the_head_and_lines_chain(log: EventLog) -> None:
    head = append(log, NewEvent("store", StoreCreated(format=1)), registered("a"))
    assert head == log.head()
    assert head.seq == 2
    append(log, registered("b"))
    lines = list(log.read())
    assert [line.seq for line in lines] == [1, 2, 3]
    events = [CATALOG.decode(line.raw) for line in lines]
    assert [e.batch for e in events] == [(1, 2), (2, 2), (1, 1)]
    assert events[0].prev == GENESIS_PREV
    for before, after in zip(lines, events[1:], strict=False):
        assert after.prev == digest(before.raw)
    assert log.head().digest == digest(lines[-1].raw)


def test_read_after_a_seq_returns_only_later_lines(log: EventLog) -> None:
    for index in range(12):  # enough to rotate the file backend's small segments
        append(log, registered(f"w{index}"))
    assert seqs(log, 0) == list(range(1, 13))
    assert seqs(log, 5) == list(range(6, 13))
    assert seqs(log, 11) == [12]
    assert seqs(log, 12) == []
    assert [line.seq for line in log.read(7)] == list(range(8, 13))


def test_read_reverse_is_newest_first(log: EventLog) -> None:
    for index in range(12):
        append(log, registered(f"w{index}"))
    assert [CATALOG.decode(line.raw).seq for line in log.read_reverse()] == list(
        range(12, 0, -1))


def test_line_returns_the_bytes_at_a_seq(log: EventLog) -> None:
    for index in range(8):
        append(log, registered(f"w{index}"))
    lines = {line.seq: line.raw for line in log.read()}
    for seq, raw in lines.items():
        assert log.line(seq) == raw
    assert log.line(0) is None
    assert log.line(9) is None


def test_append_refuses_a_line_with_a_newline(log: EventLog) -> None:
    with log.exclusive() as session:
        session.recover()
        with pytest.raises(ValueError, match="newline"):
            session.append([b'{"a":\n1}'])
    assert log.head() == GENESIS


def test_exclusive_section_is_exclusive(log: EventLog) -> None:
    entered = threading.Event()
    release = threading.Event()
    failures: list[BaseException] = []

    def hold() -> None:
        with log.exclusive():
            entered.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(5)
    try:
        with pytest.raises(StoreBusy), log.exclusive():
            pass
    except BaseException as exc:  # pragma: no cover - reported below
        failures.append(exc)
    release.set()
    holder.join()
    assert not failures
    with log.exclusive():  # free again
        pass


def test_describe_counts_bytes(log: EventLog) -> None:
    append(log, registered("a"))
    facts = log.describe()
    assert facts["bytes"] == sum(len(line.raw) + 1 for line in log.read())
    # The rest is in each backend's own words (a folder's segments, a table's rows).
    assert all(type(value) is int and value >= 1 for value in facts.values()), facts


# -- the view store --------------------------------------------------------------

def cp(seq: int) -> Checkpoint:
    return Checkpoint(seq, f"{seq:032x}")


def row(status: str | None, priority: int | None = 100, at: str | None = "t",
        text: str = "") -> Row:
    return Row(f"{status}/{priority}/{at}".encode(), (status, priority, at), text)


def test_views_start_absent(views: ViewStore) -> None:
    assert views.checkpoints() == {}
    assert views.load("w", "a") is None
    assert views.load_many("w", ["a", "b"]) == {}
    assert list(views.scan("w")) == []
    assert views.count(Query("w")) == 0
    assert views.query(Query("w")) == []
    assert views.counts("w", "status") == {}


def test_commit_moves_rows_and_each_checkpoint_together(views: ViewStore) -> None:
    assert views.commit({"w": {"a": row("ready"), "b": row("done")}}, {"w": None, "s": None},
                        cp(2))
    assert views.checkpoints() == {"w": cp(2), "s": cp(2)}
    assert [key for key, _ in views.scan("w")] == ["a", "b"]
    assert views.commit({"w": {"a": None, "c": row("ready")}}, {"w": cp(2)}, cp(3))
    assert views.checkpoints() == {"w": cp(3), "s": cp(2)}
    assert [key for key, _ in views.scan("w")] == ["b", "c"]
    assert views.load("w", "c") == row("ready").value
    assert views.counts("w", "status") == {"done": 1, "ready": 1}


def test_load_many_reads_the_present_keys_in_one_go(views: ViewStore) -> None:
    keys = [f"k{n:04d}" for n in range(1200)]  # more than one statement's worth
    views.commit({"w": {key: row(key) for key in keys[::2]}}, {"w": None}, cp(1))
    found = views.load_many("w", [*keys, keys[0], "absent"])
    assert found == {key: row(key).value for key in keys[::2]}
    assert views.counts("w", "status") == dict.fromkeys(keys[::2], 1)
    # Replacing many counted rows at once moves each count (old values read in chunks).
    views.commit({"w": {key: row("done") for key in keys[::2]}}, {"w": cp(1)}, cp(2))
    assert views.counts("w", "status") == {"done": 600}


def test_commit_refuses_a_stale_checkpoint_and_changes_nothing(views: ViewStore) -> None:
    assert views.commit({"w": {"a": row("ready")}}, {"w": None, "s": None}, cp(1))
    assert not views.commit({"w": {"a": row("X")}}, {"w": None}, cp(1))
    assert not views.commit({"w": {"a": row("X")}}, {"w": cp(1), "s": cp(5)}, cp(6))
    assert views.load("w", "a") == row("ready").value
    assert views.checkpoints() == {"w": cp(1), "s": cp(1)}


def test_reset_empties_in_place_and_drop_forgets(views: ViewStore) -> None:
    views.commit({"w": {"old": row("ready")}}, {"w": None, "s": None}, cp(1))
    assert views.commit({"w": {"a": row("done")}}, {"w": cp(1), "s": cp(1)}, cp(9), reset=True)
    assert views.checkpoints() == {"w": cp(9), "s": cp(9)}
    assert views.load("w", "old") is None
    assert views.counts("w", "status") == {"done": 1}
    views.drop()
    assert views.checkpoints() == {}
    assert views.load("w", "a") is None


def test_the_stream_index_moves_with_the_views(views: ViewStore) -> None:
    assert views.stream("thread/a") == []
    assert views.version("thread/a") == 0
    assert views.commit({"w": {"a": row("ready")}}, {"w": None, "s": None, STREAMS: None},
                        cp(3), streams=[("store", 1), ("thread/a", 2), ("thread/b", 3)])
    assert views.checkpoints() == {"w": cp(3), "s": cp(3), STREAMS: cp(3)}
    assert views.commit({}, {"w": cp(3), "s": cp(3), STREAMS: cp(3)}, cp(6),
                        streams=[("thread/a", 4), ("thread/a", 5), ("thread/b", 6)])
    assert views.stream("thread/a") == [2, 4, 5]
    assert views.stream("thread/a", 2) == [4, 5]
    assert views.stream("thread/a", 5) == []
    assert views.stream("thread/a", reverse=True) == [5, 4, 2]
    assert views.stream("thread/a", 3, reverse=True) == [5, 4]
    assert views.stream("thread/none") == []
    assert (views.version("thread/a"), views.version("thread/b")) == (5, 6)
    assert views.version("thread/none") == 0
    # A commit that does not name the index leaves it, and its checkpoint, alone.
    assert views.commit({"w": {"b": row("done")}}, {"w": cp(6)}, cp(7),
                        streams=[("thread/c", 7)])
    assert views.checkpoints()[STREAMS] == cp(6)
    assert views.stream("thread/c") == []
    # A stale index checkpoint refuses the whole commit.
    assert not views.commit({}, {"s": cp(6), STREAMS: cp(5)}, cp(8), streams=[("x", 8)])
    assert views.stream("x") == []


def test_the_stream_index_is_rebuilt_with_the_views_and_dropped_with_them(
        views: ViewStore) -> None:
    views.commit({}, {"w": None, "s": None, STREAMS: None}, cp(2),
                 streams=[("thread/a", 1), ("thread/b", 2)])
    expected = {"w": cp(2), "s": cp(2), STREAMS: cp(2)}
    # A rebuild in place: the index holds what the rebuild gives it, nothing before.
    assert views.commit({}, dict(expected), cp(3), reset=True,
                        streams=[("thread/b", 3), ("thread/a", 1)])  # any order
    assert views.stream("thread/a") == [1]
    assert views.stream("thread/b") == [3]
    assert views.checkpoints()[STREAMS] == cp(3)
    # Expected absent while present: refused, nothing changed.
    assert not views.commit({}, {STREAMS: None}, cp(4), streams=[("thread/c", 4)])
    assert views.stream("thread/c") == []
    views.drop()
    assert views.checkpoints() == {}
    assert views.stream("thread/b") == []
    assert views.version("thread/b") == 0
    # Absent (dropped, or views of an older uwf): the first commit creates it empty.
    assert views.commit({}, {STREAMS: None}, cp(4), streams=[("thread/c", 4)])
    assert views.stream("thread/c") == [4]
    assert views.checkpoints() == {STREAMS: cp(4)}


def test_no_view_may_take_the_stream_index_name() -> None:
    with pytest.raises(ValueError, match="stream index"):
        ViewSpec(STREAMS, 1)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_a_changed_view_reads_as_absent_alone(kind: str, tmp_path: Path,
                                              request: pytest.FixtureRequest) -> None:
    url = database(request, kind)
    first = view_store(kind, tmp_path, url=url)
    first.commit({"w": {"a": row("ready")}}, {"w": None, "s": None}, cp(1))
    changed = ViewSpec("w", 2, columns=("status", "priority", "at"),
                       types=("text", "int", "text"))
    if kind == "memory":
        assert isinstance(first, MemoryViewStore)
        first.specs["w"] = changed
        again: ViewStore = first
    else:
        closed(first)
        again = view_store(kind, tmp_path, [changed, SPECS[1]], url=url)
    assert again.checkpoints() == {"s": cp(1)}
    closed(again)


def test_views_store_serves_several_threads(views: ViewStore) -> None:
    views.commit({"w": {"a": row("ready")}}, {"w": None, "s": None}, cp(1))
    seen: list[Any] = []
    worker = threading.Thread(target=lambda: seen.append(views.load("w", "a")))
    worker.start()
    worker.join()
    assert seen == [row("ready").value]


# -- queries: one semantics, both backends -----------------------------------------

statuses = st.sampled_from(["ready", "leased", "parked", None])
texts = st.text(alphabet="abcXYZ é\"'%_", max_size=12)
rows_strategy = st.dictionaries(
    st.text(alphabet="0123456789ab", min_size=1, max_size=4),
    st.tuples(statuses, st.one_of(st.none(), st.integers(-3, 3)),
              st.one_of(st.none(), st.sampled_from(["2026-01", "2026-02", "2026-03"])), texts),
    max_size=25,
)
wheres = st.lists(st.one_of(
    st.tuples(st.just("status"), st.just("="), st.sampled_from(["ready", "parked", None])),
    st.tuples(st.just("status"), st.just("in"),
              st.lists(st.sampled_from(["ready", "leased", "parked"]), max_size=2).map(tuple)),
    st.tuples(st.just("priority"), st.sampled_from(["<", "<=", ">", ">="]), st.integers(-3, 3)),
    st.tuples(st.just("at"), st.sampled_from(["<", ">="]), st.sampled_from(["2026-02"])),
), max_size=2).map(tuple)
orders = st.lists(st.sampled_from(["status", "-status", "priority", "-priority", "at", "-at",
                                   "-key"]), max_size=3, unique=True).map(tuple)


@pytest.fixture
def postgres(pg_url: str, tmp_path: Path) -> Iterator[ViewStore]:
    store = view_store("postgres", tmp_path, url=pg_url)
    yield store
    closed(store)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows_strategy, where=wheres, order=orders,
       text=st.one_of(st.none(), st.sampled_from(["a", "ab", "abc", "XYZ", "é", "c x", "%",
                                                  '"']), texts),
       limit=st.one_of(st.none(), st.integers(0, 6)), offset=st.integers(0, 4))
def test_queries_answer_the_same_in_every_backend(  # noqa: PLR0917
        tmp_path_factory: pytest.TempPathFactory, postgres: ViewStore,
        rows: dict[str, tuple[Any, Any, Any, str]], where: tuple[tuple[str, str, Any], ...],
        order: tuple[str, ...], text: str | None, limit: int | None, offset: int) -> None:
    changes = {"w": {key: row(s, p, a, t) for key, (s, p, a, t) in rows.items()}}
    memory = MemoryViewStore(SPECS)
    sqlite = SqliteViewStore(tmp_path_factory.mktemp("q") / "v.sqlite3", SPECS)
    postgres.drop()  # one database for every example
    try:
        for store in (memory, sqlite, postgres):
            assert store.commit(changes, {"w": None, "s": None}, cp(1))
        query = Query("w", where, text, order, limit, offset)
        for other in (sqlite, postgres):
            assert memory.query(query) == other.query(query)
            assert memory.count(query) == other.count(query)
            assert memory.counts("w", "status") == other.counts("w", "status")
            assert memory.counts("w", "priority") == other.counts("w", "priority")
    finally:
        sqlite.close()


def test_query_pages_in_order_and_counts(views: ViewStore) -> None:
    changes = {"w": {f"k{index:02d}": row("failed" if index % 2 else "ok", index % 3,
                                          f"2026-{index:02d}") for index in range(50)}}
    views.commit(changes, {"w": None, "s": None}, cp(1))
    page = views.query(Query("w", (("status", "=", "failed"),), order=("at",), limit=5,
                             offset=10))
    assert [key for key, _ in page] == [f"k{index:02d}" for index in range(21, 31, 2)]
    first = views.query(Query("w", (("status", "in", ("ok", "failed")),),
                              order=("priority", "at"), limit=3))
    assert [key for key, _ in first] == ["k00", "k03", "k06"]
    assert views.count(Query("w", (("status", "=", "failed"),))) == 25
    assert views.counts("w", "status") == {"failed": 25, "ok": 25}


def test_equal_to_none_selects_the_rows_without_a_value(views: ViewStore) -> None:
    views.commit({"w": {"a": row(None), "b": row("ready"), "c": row(None, 2)}},
                 {"w": None, "s": None}, cp(1))
    assert [key for key, _ in views.query(Query("w", (("status", "=", None),)))] == ["a", "c"]
    assert views.count(Query("w", (("status", "=", None), ("priority", "<", 50)))) == 1


def test_text_search_is_substring_and_ascii_case_insensitive(views: ViewStore) -> None:
    views.commit({"w": {"a": row("ok", text="Fix the LOGIN bug in #42"),
                        "b": row("ok", text="Refactor the parser")}},
                 {"w": None, "s": None}, cp(1))
    assert [k for k, _ in views.query(Query("w", text="login"))] == ["a"]
    assert [k for k, _ in views.query(Query("w", text="the"))] == ["a", "b"]
    assert [k for k, _ in views.query(Query("w", text="#4 bug"))] == ["a"]
    assert [k for k, _ in views.query(Query("w", text="PARSE fix"))] == []


def test_an_update_keeps_what_did_not_change_and_moves_what_did(views: ViewStore) -> None:
    """Rows rewritten in place (SQLite updates only the changed columns, and the text
    index only when the text changed): every read answers as if written afresh."""
    views.commit({"w": {"a": row("ready", 5, text="Fix the login bug"),
                        "b": row("ready", 7, text="Refactor the parser")}},
                 {"w": None, "s": None}, cp(1))
    # a: a column moves, the text stays; b: the text moves, the columns stay.
    views.commit({"w": {"a": row("leased", 5, text="Fix the login bug"),
                        "b": row("ready", 7, text="Rewrite the lexer")}}, {"w": cp(1)}, cp(2))
    assert views.load("w", "a") == row("leased", 5).value
    assert [k for k, _ in views.query(Query("w", text="login"))] == ["a"]
    assert [k for k, _ in views.query(Query("w", text="parser"))] == []
    assert [k for k, _ in views.query(Query("w", text="lexer"))] == ["b"]
    assert [k for k, _ in views.query(Query("w", (("status", "=", "ready"),)))] == ["b"]
    assert [k for k, _ in views.query(Query("w", (("status", "=", "leased"),)))] == ["a"]
    assert views.counts("w", "status") == {"leased": 1, "ready": 1}
    # Only the value changes; then a row deleted and another one made in one commit.
    views.commit({"w": {"a": Row(b"other", ("leased", 5, "t"), "Fix the login bug")}},
                 {"w": cp(2)}, cp(3))
    assert views.load("w", "a") == b"other"
    assert [k for k, _ in views.query(Query("w", text="login"))] == ["a"]
    views.commit({"w": {"a": None, "c": row("ready", 1, text="login page")}},
                 {"w": cp(3)}, cp(4))
    assert [k for k, _ in views.query(Query("w", text="login"))] == ["c"]
    assert [k for k, _ in views.query(Query("w", order=("priority", "key")))] == ["c", "b"]
    assert views.counts("w", "status") == {"ready": 2}
    # Deleting a key that was never written changes nothing.
    views.commit({"w": {"never": None}}, {"w": cp(4)}, cp(5))
    assert views.count(Query("w")) == 2


@pytest.mark.parametrize("scan_from", [0, 10**9], ids=["index-walk", "by-rowid"])
def test_a_search_of_many_matches_pages_in_order_either_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan_from: int) -> None:
    """A common word's page comes from walking the order's index, a rare one's from its
    matches fetched by rowid (`SCAN_ORDER_FROM`): the same rows, order and count."""
    from uwf.engine import viewstore

    monkeypatch.setattr(viewstore, "SCAN_ORDER_FROM", scan_from)
    views = view_store("sqlite", tmp_path)
    rows = {f"k{n:04d}": row("ready" if n % 3 else "done", n % 7, f"t{1200 - n:04d}",
                             text=f"run {n} {'timeout' if n % 4 == 0 else 'ok'} #{n % 5}")
            for n in range(1200)}
    views.commit({"w": rows}, {"w": None, "s": None}, cp(1))
    wanted = sorted((key for key, r in rows.items() if "timeout" in r.text),
                    key=lambda key: (rows[key].columns[1], rows[key].columns[2], key))
    query = Query("w", text="TIMEOUT", order=("priority", "at"), limit=25, offset=40)
    assert [key for key, _ in views.query(query)] == wanted[40:65]
    assert views.count(query) == len(wanted) == 300
    both = Query("w", (("status", "=", "done"),), text="timeout #3", order=("at",), limit=10)
    chosen = sorted((key for key in wanted if rows[key].columns[0] == "done"
                     and "#3" in rows[key].text), key=lambda key: (rows[key].columns[2], key))
    assert [key for key, _ in views.query(both)] == chosen[:10]
    assert views.count(both) == len(chosen)
    # The words' count is kept between a page and its total, never past a commit: of
    # this connection, or of another one.
    views.commit({"w": {"z0001": row("ready", -1, "t", text="timeout again")}}, {"w": cp(1)},
                 cp(2))
    assert views.count(query) == 301
    other = view_store("sqlite", tmp_path)
    other.commit({"w": {"z0002": row("ready", -1, "t", text="one more timeout")}},
                 {"w": cp(2)}, cp(3))
    closed(other)
    assert views.count(query) == 302
    assert [key for key, _ in views.query(Query("w", text="timeout", order=("priority", "key"),
                                                limit=2))] == ["z0001", "z0002"]
    closed(views)


def test_closing_the_views_keeps_sqlites_statistics_without_waiting(tmp_path: Path) -> None:
    """Closing a connection that queried a view lets SQLite gather statistics its
    planner lacks (`PRAGMA optimize`), and never waits for a writer to do it: a
    file another connection is writing keeps what it has, and closing returns."""
    import sqlite3
    import threading

    views = view_store("sqlite", tmp_path)
    views.commit({"w": {f"k{n:04d}": row("ready" if n % 5 else "done", n % 7)
                        for n in range(2000)}}, {"w": None, "s": None}, cp(1))
    path = tmp_path / "views" / "views.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    views.query(Query("w", (("status", "=", "done"),), order=("priority",), limit=5))
    # Were closing to wait for the writer, it would wait for ever: the writer lets go
    # only after it (a hang guard, not a timing: it ends at once or never).
    for db in views._all:  # type: ignore[attr-defined]
        db.execute("PRAGMA busy_timeout = 2147483647")
    closing = threading.Thread(target=views.close, daemon=True)
    closing.start()
    closing.join(timeout=120)
    assert not closing.is_alive(), "closing the views waited for the writer"
    stats = "SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'"
    assert writer.execute(stats).fetchone() == (0,)
    writer.execute("ROLLBACK")
    writer.close()

    views = view_store("sqlite", tmp_path)
    assert views.count(Query("w", (("status", "=", "done"),))) == 400
    views.close()
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'v_w'").fetchone()[0]
    reader.close()


# -- the CAS ---------------------------------------------------------------------

@pytest.fixture
def cas(blobs: Blobs) -> Cas:
    store = Cas(blobs, clock=lambda: 1_700_000_000_000)
    store.ensure_builtins()
    return store


def test_put_get_round_trip(cas: Cas) -> None:
    text = builtin_hash("Text")
    hash_ = cas.put(text, "hello")
    node = cas.get(hash_)
    assert (node.type, node.payload, node.timestamp) == (text, "hello", 1_700_000_000_000)
    assert cas.has(hash_)
    assert cas.verify(hash_) == []


def test_put_is_idempotent_and_keeps_the_first_timestamp(blobs: Blobs) -> None:
    first = Cas(blobs, clock=lambda: 1)
    first.ensure_builtins()
    hash_ = first.put(builtin_hash("Text"), "same")
    again = Cas(blobs, clock=lambda: 2).put(builtin_hash("Text"), "same")
    assert again == hash_
    assert first.get(hash_).timestamp == 1


def test_the_first_node_records_the_hash_rule_and_nothing_else_does(blobs: Blobs) -> None:
    """A store with no node yet is new: its first write records json-cas's rule. A store
    with nodes and no record was made by an older uwf and keeps no record (old rule)."""
    assert blobs.hash_rule() is None
    cas = Cas(blobs, clock=lambda: 1)
    assert cas.hash_rule() == "uwf-legacy"  # nothing written yet: nothing to name
    cas.put_text("first")
    assert blobs.hash_rule() == "json-cas" == Cas(blobs, clock=lambda: 1).hash_rule()
    blobs.record_hash_rule("json-cas")  # idempotent
    assert blobs.hash_rule() == "json-cas"
    assert "hash-rule" not in list(blobs.hashes())


def test_a_store_with_nodes_and_no_record_stays_an_old_rule_store(blobs: Blobs) -> None:
    blobs.write("0000000000000", b"{}")  # a node an older uwf wrote
    cas = Cas(blobs, clock=lambda: 1)
    cas.put_text("new")
    assert blobs.hash_rule() is None
    assert cas.hash_rule() == "uwf-legacy"


def test_put_validates_against_the_type_schema(cas: Cas) -> None:
    with pytest.raises(Rejected, match="payload does not match"):
        cas.put(builtin_hash("Text"), {"not": "text"})
    with pytest.raises(Rejected, match="does not match"):
        cas.put(builtin_hash("StartNode"), {"workflow": "../../x", "prompt": "p"})


def test_schema_nodes_are_validated_as_json_schema(cas: Cas) -> None:
    with pytest.raises(Rejected):
        cas.put_schema({"type": "no-such-type"})
    schema = cas.put_schema({"type": "object", "required": ["status"]})
    assert cas.put(schema, {"status": "ok"})
    with pytest.raises(Rejected, match="status"):
        cas.put(schema, {})


def test_get_of_an_absent_hash_is_not_found(cas: Cas) -> None:
    with pytest.raises(NotFound):
        cas.get("0000000000000")
    assert not cas.has("0000000000000")


@pytest.mark.parametrize("bad", ["../../x", "", "EYHPV6X8XHTC", "eyhpv6x8xhtcs", "..", "a/b"])
def test_invalid_hash_never_becomes_a_path(cas: Cas, bad: str) -> None:
    with pytest.raises(UsageError, match="invalid hash"):
        cas.get(bad)
    with pytest.raises(UsageError):
        cas.has(bad)


def test_walk_follows_cas_refs_marked_in_the_schema(cas: Cas) -> None:
    start = cas.put(builtin_hash("StartNode"), {"workflow": builtin_hash("Text"), "prompt": "p"})
    entries = cas.walk(start)
    assert [(e.hash, e.depth, e.path) for e in entries] == [
        (start, 0, ""), (builtin_hash("Text"), 1, "workflow")
    ]
    assert [e.hash for e in cas.walk(start, depth=0)] == [start]


def test_garbage_is_what_the_roots_do_not_reach(cas: Cas) -> None:
    kept = cas.put(builtin_hash("Text"), "kept")
    dropped = cas.put(builtin_hash("Text"), "dropped")
    assert cas.garbage([kept], grace_seconds=0) == [dropped]
    assert cas.garbage([kept], grace_seconds=3600) == []


def test_a_node_file_written_this_instant_is_garbage_under_no_grace(tmp_path: Path) -> None:
    """A node's age is never below 0: the wall clock in whole ms reads a file written
    within its ms (mtime to the ns) as written in the future, and `gc --grace 0` then
    spared it (seen once in .ci/run, test_garbage_is_what_the_roots_do_not_reach)."""
    blobs = FileBlobs(tmp_path / "cas", wall=system_clock)
    cas = Cas(blobs, clock=lambda: 1)
    cas.ensure_builtins()
    kept = cas.put(builtin_hash("Text"), "kept")
    dropped = cas.put(builtin_hash("Text"), "dropped")
    ahead = system_clock() / 1000 + 5  # as a file written within the clock's ms reads
    os.utime(blobs._path(dropped), (ahead, ahead))
    assert blobs.age(dropped) == 0
    assert cas.garbage([kept], grace_seconds=0) == [dropped]


def test_verify_detects_an_altered_file(tmp_path: Path) -> None:
    cas = Cas(FileBlobs(tmp_path / "cas", wall=system_clock), clock=lambda: 1)
    hash_ = cas.put_text("original")
    path = tmp_path / "cas" / hash_[:2] / f"{hash_}.json"
    path.write_text(path.read_text().replace("original", "altered"))
    assert any("altered" in problem for problem in cas.verify(hash_))

