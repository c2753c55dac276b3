"""The journal's contract, on the in-memory and the file store alike (and the in-memory
one with its views in PostgreSQL): incremental fold == full rebuild == rebuild after
deleting the views; a checkpoint per view; writes return their result; decide is
read-only; rebuilds never move views back."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.logkit import append
from tests.viewkit import HASHES
from uwf.cas.backends import MemoryBlobs
from uwf.cas.store import Cas
from uwf.config.settings import process_settings
from uwf.engine.clock import system_clock
from uwf.engine.events import (
    Envelope,
    EventData,
    LogRepaired,
    NewEvent,
    StoreCreated,
    as_envelope,
    encode_line,
)
from uwf.engine.journal import Journal, Outcome, Views
from uwf.engine.log import MemoryLog
from uwf.errors import Corrupt, StoreBusy
from uwf.store import Store, all_projections, event_catalog
from uwf.threads.events import (
    ThreadBlocked,
    ThreadEnded,
    ThreadStarted,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
)
from uwf.workflows.events import WorkflowRegistered

CATALOG = event_catalog()


@pytest.fixture(params=["memory", "file", "pgviews"])
def store(request: pytest.FixtureRequest, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    if request.param == "pgviews":  # the in-memory store, its views in PostgreSQL
        from uwf.engine.pgdb import PgDatabase
        from uwf.engine.pgviews import PgViewStore

        db = PgDatabase(request.getfixturevalue("pg_url"))
        projections = all_projections()
        views = PgViewStore(db, [projection.spec() for projection in projections])
        yield Store(None, Journal(MemoryLog(), views, projections, CATALOG, clock=system_clock),
                    Cas(MemoryBlobs(wall=system_clock), clock=system_clock),
                    settings=process_settings())
        db.close()
        return
    opened = Store.memory() if request.param == "memory" else Store.open(tmp_path / "s")
    yield opened
    opened.close()


def register(store: Store, name: str, hash_: str) -> str:
    return store.journal.write(lambda _views: Outcome(
        [NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_))], name))


def events(store: Store) -> list[Envelope]:
    return [CATALOG.decode(line.raw) for line in store.log.read()]


def persisted(store: Store) -> dict[tuple[str, str], bytes]:
    return {(view, key): raw for view in store.journal.projections for key, raw in
            store.views.scan(view)}


def test_write_returns_what_decide_decided(store: Store) -> None:
    assert register(store, "a", HASHES[0]) == "a"
    found = events(store)
    assert [e.type for e in found] == ["store.created", "workflow.registered"]
    assert [e.batch for e in found] == [(1, 2), (2, 2)]
    assert isinstance(found[0].data, StoreCreated)


def test_a_command_that_decides_nothing_writes_nothing(store: Store) -> None:
    assert store.journal.write(lambda _views: Outcome((), 7)) == 7
    assert store.log.head().seq == 0


def test_rejection_inside_decide_writes_nothing(store: Store) -> None:
    register(store, "a", HASHES[0])
    before = store.log.head()

    def reject(_views: Views) -> Outcome[None]:
        raise Corrupt("no")

    with pytest.raises(Corrupt):
        store.journal.write(reject)
    assert store.log.head() == before


def test_decide_sees_read_only_views_and_cannot_write_or_rebuild(store: Store) -> None:
    register(store, "a", HASHES[0])

    def nested(views: Views) -> Outcome[None]:
        assert views.get("workflows", "a").hash == HASHES[0]
        assert not hasattr(views, "write")
        store.journal.write(lambda _v: Outcome(()))
        return Outcome(())

    with pytest.raises(RuntimeError, match="read-only"):
        store.journal.write(nested)

    def rebuilds(_views: Views) -> Outcome[None]:
        store.journal.rebuild()
        return Outcome(())

    with pytest.raises(RuntimeError, match="read-only"):
        store.journal.write(rebuilds)
    assert store.log.head().seq == 2


# Every event type, with the subjects the projections key them by.
T = "thread/01JD0000000000000000000001"
U = "thread/01JD0000000000000000000002"
event_data: st.SearchStrategy[tuple[str, EventData]] = st.one_of(
    st.tuples(st.sampled_from(["workflow/a", "workflow/b"]), st.builds(
        WorkflowRegistered, st.sampled_from(["a", "b"]),
        st.sampled_from(HASHES), st.one_of(st.none(), st.sampled_from(HASHES)))),
    st.tuples(st.sampled_from([T, U]), st.builds(
        lambda h, r: ThreadStarted(HASHES[0], "a", HASHES[1], r, head=h),
        st.one_of(st.none(), st.sampled_from(HASHES)), st.sampled_from(["/r1", "/r2"]))),
    st.tuples(st.sampled_from([T, U]), st.builds(
        lambda step, role: ThreadStepStarted(step, role, "go", "mock", 5),
        st.sampled_from(["s1", "s2"]), st.sampled_from(["planner", "dev"]))),
    st.tuples(st.sampled_from([T, U]), st.builds(
        lambda step, status: ThreadStepped(step, HASHES[2], "planner", status, HASHES[0]),
        st.sampled_from(["s1", "s2"]), st.sampled_from(["ready", "done"]))),
    st.tuples(st.sampled_from([T, U]), st.builds(
        lambda step: ThreadStepFailed(step, "planner", "exit", "boom"),
        st.sampled_from(["s1", "s2"]))),
    st.tuples(st.sampled_from([T, U]), st.just(ThreadBlocked("no-agent", "none", "dev"))),
    st.tuples(st.sampled_from([T, U]), st.builds(
        ThreadEnded, st.sampled_from(["end", "killed"]))),
    st.tuples(st.just("store"), st.just(LogRepaired("s", 1, 2, 1, "d" * 32, "torn"))),
)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(event_data, min_size=1, max_size=3), min_size=1, max_size=12))
def test_fold_all_at_once_equals_step_by_step_equals_replay(
        store: Store, batches: list[list[tuple[str, EventData]]]) -> None:
    store.journal.rebuild()
    for batch in batches:
        store.journal.write(lambda _views, b=batch: Outcome(  # type: ignore[misc]
            [NewEvent(subject, data) for subject, data in b]))
    incremental = persisted(store)
    assert {key: row.value for key, row in store.journal.replay().items()} == incremental
    store.journal.rebuild()
    assert persisted(store) == incremental
    store.views.drop()
    store.read()
    assert persisted(store) == incremental


def test_rebuild_after_deleting_the_views_folder(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    for index in range(30):
        register(store, f"w{index % 7}", HASHES[index % 3])
    before = persisted(store)
    store.close()
    shutil.rmtree(tmp_path / "s" / "views")
    again = Store.open(tmp_path / "s")
    again.read()
    assert persisted(again) == before


def test_reads_catch_up_with_events_written_by_another_handle(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    reader = Store.open(tmp_path / "s")
    writer = Store.open(tmp_path / "s")
    register(writer, "a", HASHES[0])
    assert reader.read().get("workflows", "a").hash == HASHES[0]
    register(writer, "a", HASHES[1])
    assert reader.read().get("workflows", "a").hash == HASHES[1]
    assert reader.journal.freshness().status == "valid"


def test_views_behind_the_log_are_stale_then_refreshed(store: Store) -> None:
    register(store, "a", HASHES[0])
    append(store.log, NewEvent("workflow/b", WorkflowRegistered("b", HASHES[1])))
    fresh = store.journal.freshness()
    assert (fresh.status, fresh.behind) == ("stale", 1)
    assert {v.status for v in fresh.views.values()} == {"stale"}
    assert store.read().get("workflows", "b").hash == HASHES[1]
    assert store.journal.freshness().status == "valid"


def test_a_new_or_changed_view_is_built_alone(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from uwf.threads.projection import ThreadsProjection
    from uwf.workflows.projection import WorkflowsProjection

    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    register(store, "a", HASHES[0])
    store.journal.write(lambda _views: Outcome([NewEvent(T, ThreadStarted(
        HASHES[0], "a", HASHES[1], "/r"))]))
    before = persisted(store)
    store.close()
    # The threads projection changes: only its view reads as absent and is rebuilt.
    monkeypatch.setattr(ThreadsProjection, "version", ThreadsProjection.version + 100)
    folded: list[str] = []
    original = WorkflowsProjection.apply

    def counting(self: WorkflowsProjection, state: Any, event: Envelope) -> Any:
        folded.append(event.type)
        return original(self, state, event)

    monkeypatch.setattr(WorkflowsProjection, "apply", counting)
    again = Store.open(tmp_path / "s")
    fresh = again.journal.freshness()
    assert fresh.views["threads"].status == "absent"
    assert fresh.views["workflows"].status == "valid"
    again.read()
    assert again.journal.freshness().status == "valid"
    assert persisted(again) == before
    assert folded == []  # the workflows view stayed; nothing was folded into it again
    again.close()


def test_a_rewritten_log_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    register(store, "a", HASHES[0])
    register(store, "b", HASHES[1])
    segment = sorted((tmp_path / "s" / "events").glob("*.jsonl"))[0]
    lines = segment.read_bytes().splitlines(keepends=True)
    segment.write_bytes(b"".join(lines[:-1]))  # drop the last, already folded, event
    assert store.journal.freshness().status == "mismatch"
    with pytest.raises(Corrupt, match="views do not match the log at seq 3"):
        store.read()
    store.journal.rebuild()
    assert store.read().get("workflows", "b") is None


def test_newer_store_format_fails_closed(store: Store) -> None:
    append(store.log, NewEvent("store", StoreCreated(format=99)))
    with pytest.raises(Corrupt, match="store format 99 is newer"):
        store.read()


def test_a_rebuild_never_moves_views_back_under_a_writer(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader rebuilding absent views, paused between its replay and its commit while
    a writer commits newer state, must not replace that state with its older replay."""
    monkeypatch.setenv("UWF_DURABILITY", "none")
    reader = Store.open(tmp_path / "s")
    writer = Store.open(tmp_path / "s")
    register(writer, "a", HASHES[0])
    writer.views.drop()  # views absent: the reader's next read rebuilds them
    replayed = threading.Event()
    resume = threading.Event()
    original = reader.views.commit

    def paused_commit(*args: Any, **kwargs: Any) -> bool:
        replayed.set()
        assert resume.wait(10)
        return original(*args, **kwargs)

    reader.views.commit = paused_commit  # type: ignore[method-assign]
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(reader.read().get("workflows", "a")))
    thread.start()
    assert replayed.wait(10)
    register(writer, "a", HASHES[1])  # the writer rebuilds, then commits seq 4
    resume.set()
    thread.join(10)
    reader.views.commit = original  # type: ignore[method-assign]
    assert writer.read().get("workflows", "a").hash == HASHES[1]
    assert reader.journal.freshness().status == "valid"
    assert result
    assert result[0].hash == HASHES[1]  # the reader retried from the new state


def test_busy_views_are_not_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database lock held by another connection is busy, not corrupt: the write of the
    events succeeds, the views stay (stale), and a later read catches them up."""
    import sqlite3

    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    register(store, "a", HASHES[0])
    path = tmp_path / "s" / "views" / "views.sqlite3"
    store.views.busy_timeout = 0.05  # type: ignore[attr-defined]
    store.views.close()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        assert register(store, "b", HASHES[1]) == "b"  # durable: the command succeeds
        assert store.journal.freshness().views["workflows"].status == "stale"
        with pytest.raises(StoreBusy):
            store.read()  # catching up needs the database: busy, said so, nothing deleted
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert path.exists()
    assert store.read().get("workflows", "b").hash == HASHES[1]


def test_a_store_is_usable_from_several_threads(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for round_ in range(5):
                register(store, f"t{index}-{round_}", HASHES[index % 3])
                store.read().get("workflows", f"t{index}-{round_}")
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(index,)) for index in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert store.views.count_rows() if False else True
    assert len(list(store.read().scan("workflows"))) == 20
    assert [e.seq for e in events(store)] == list(range(1, 22))


def test_writer_repairs_a_torn_tail_and_records_it(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    register(store, "a", HASHES[0])
    segment = sorted((tmp_path / "s" / "events").glob("*.jsonl"))[-1]
    with segment.open("ab") as handle:
        handle.write(b'{"seq":3,"id"')
    register(store, "b", HASHES[1])
    found = events(store)
    repaired = [e for e in found if e.type == "log.repaired"]
    assert len(repaired) == 1
    assert isinstance(repaired[0].data, LogRepaired)
    assert repaired[0].data.dropped_bytes == len(b'{"seq":3,"id"')
    assert [e.seq for e in found] == [1, 2, 3, 4]
    assert store.read().get("store", "store").repairs == 1


@given(st.sampled_from(HASHES), st.text(max_size=20), st.integers(1, 10**9))
def test_event_round_trip(hash_: str, name: str, seq: int) -> None:
    envelope = Envelope(seq, "01JD0000000000000000000000", "2026-11-25T00:00:00.000Z",
                        "workflow.registered", f"workflow/{name}", (1, 1),
                        WorkflowRegistered(name, hash_, None), "0" * 32)
    decoded = CATALOG.decode(encode_line(envelope))
    assert decoded.type == envelope.type
    assert as_envelope(decoded) == envelope


def test_unknown_fields_and_types_are_errors() -> None:
    line = (b'{"seq":1,"id":"01JD0000000000000000000000","ts":"2026-11-25T00:00:00.000Z",'
            b'"type":"store.created","subject":"store","batch":[1,1],'
            b'"data":{"format":1,"extra":true},"prev":"' + b"0" * 32 + b'"}')
    with pytest.raises(Corrupt, match="invalid data"):
        CATALOG.decode(line)
    with pytest.raises(Corrupt, match="unknown event type"):
        CATALOG.decode(line.replace(b"store.created", b"store.exploded"))


def test_a_catalogue_knows_only_what_was_registered() -> None:
    from uwf.engine.events import EventCatalog

    core = EventCatalog()
    line = encode_line(Envelope(1, "01JD0000000000000000000000", "2026-11-25T00:00:00.000Z",
                                "workflow.registered", "workflow/a", (1, 1),
                                WorkflowRegistered("a", HASHES[0]), "0" * 32))
    with pytest.raises(Corrupt, match="unknown event type"):
        core.decode(line)
    assert CATALOG.decode(line).type == "workflow.registered"


def test_event_data_is_encoded_in_camel_case() -> None:
    raw = msgspec.json.encode(LogRepaired("s", 1, 2, 3, "d", "r"))
    assert b'"droppedBytes":2' in raw


def test_rebuild_replaces_a_damaged_views_file(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    register(store, "a", HASHES[0])
    store.close()
    path = tmp_path / "s" / "views" / "views.sqlite3"
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"this is not a database" * 200)
    again = Store.open(tmp_path / "s")
    assert again.journal.freshness().status == "unreadable"
    with pytest.raises(Corrupt, match="views are unreadable"):
        again.read()
    again.journal.rebuild()
    assert again.read().get("workflows", "a").hash == HASHES[0]
    assert again.journal.freshness().status == "valid"
