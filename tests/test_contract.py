"""One contract suite for each storage interface, run against every backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from uwf.cas.backends import Blobs, FileBlobs, MemoryBlobs
from uwf.cas.store import Cas, builtin_hash
from uwf.engine.events import (
    GENESIS_PREV,
    LogRepaired,
    NewEvent,
    StoreCreated,
    WorkflowRegistered,
    decode_line,
    digest,
)
from uwf.engine.log import EMPTY_HEAD, EventLog, Head
from uwf.engine.segments import FileSegments, MemorySegments, Segments
from uwf.engine.viewstore import MemoryViewStore, SqliteViewStore, ViewStore
from uwf.errors import NotFound, Rejected, StoreBusy, UsageError

TS = "2026-11-25T20:57:13.123Z"
ULIDS = [f"01JD{i:022d}" for i in range(100)]


# -- backends ------------------------------------------------------------------

@pytest.fixture(params=["memory", "file"])
def segments(request: pytest.FixtureRequest, tmp_path: Path) -> Segments:
    if request.param == "memory":
        return MemorySegments()
    return FileSegments(tmp_path / "events", tmp_path / "lock")


@pytest.fixture(params=["memory", "sqlite"])
def views(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ViewStore]:
    if request.param == "memory":
        yield MemoryViewStore("v1")
        return
    store = SqliteViewStore(tmp_path / "views" / "views.sqlite3", "v1")
    yield store
    store.close()


@pytest.fixture(params=["memory", "file"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Blobs:
    if request.param == "memory":
        return MemoryBlobs()
    return FileBlobs(tmp_path / "cas")


def registered(name: str, hash_: str = "70D2DHWNFR6T8") -> NewEvent:
    return NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_))


def append(log: EventLog, *events: NewEvent) -> Head:
    written = log.append(log.head(), events, TS, ULIDS[: len(events)])
    return log.head() if written else EMPTY_HEAD


# -- the event log ---------------------------------------------------------------

def test_empty_log_has_genesis_head(segments: Segments) -> None:
    log = EventLog(segments)
    assert log.head() == EMPTY_HEAD
    assert list(log.read()) == []
    assert log.recover() == (EMPTY_HEAD, [])


def test_append_chains_lines_and_numbers_batches(segments: Segments) -> None:
    log = EventLog(segments)
    append(log, NewEvent("store", StoreCreated(format=1)), registered("a"))
    append(log, registered("b"))
    lines = list(log.read())
    events = [decode_line(line.raw) for line in lines]
    assert [e.seq for e in events] == [1, 2, 3]
    assert [e.batch for e in events] == [(1, 2), (2, 2), (1, 1)]
    assert events[0].prev == GENESIS_PREV
    assert events[1].prev == digest(lines[0].raw)
    assert events[2].prev == digest(lines[1].raw)
    head = log.head()
    assert (head.seq, head.digest) == (3, digest(lines[2].raw))


def test_line_field_order_is_fixed(segments: Segments) -> None:
    log = EventLog(segments)
    append(log, registered("a"))
    raw = next(iter(log.read())).raw
    assert raw.startswith(b'{"seq":1,"id":"')
    order = [b'"seq"', b'"id"', b'"ts"', b'"type"', b'"subject"', b'"batch"', b'"data"', b'"prev"']
    positions = [raw.index(key) for key in order]
    assert positions == sorted(positions)


def test_read_from_a_position_returns_only_later_lines(segments: Segments) -> None:
    log = EventLog(segments)
    append(log, registered("a"))
    first = log.head()
    append(log, registered("b"), registered("c"))
    later = [decode_line(line.raw).seq for line in log.read(first.segment, first.end)]
    assert later == [2, 3]


def test_segments_rotate_by_size_and_never_split_a_batch(segments: Segments) -> None:
    log = EventLog(segments, segment_bytes=300)
    for index in range(6):
        append(log, registered(f"w{index}a"), registered(f"w{index}b"))
    names = segments.names()
    assert len(names) > 1
    seqs = []
    for name in names:
        batch = [decode_line(line.raw) for line in log.read_segment(name)]
        assert name == f"{batch[0].seq:020d}.jsonl"
        assert batch[0].batch[0] == 1
        assert batch[-1].batch[0] == batch[-1].batch[1]
        seqs += [e.seq for e in batch]
    assert seqs == list(range(1, 13))
    assert log.head().seq == 12


def test_torn_last_line_is_ignored_by_readers_and_cut_by_recovery(segments: Segments) -> None:
    log = EventLog(segments)
    append(log, registered("a"))
    before = log.head()
    name = segments.names()[-1]
    segments.append(name, b'{"seq":2,"id":"01J', durable=True)
    assert [decode_line(line.raw).seq for line in log.read()] == [1]
    assert log.head() == before
    head_after, repairs = log.recover()
    assert head_after == before
    repair = repairs[0]
    assert isinstance(repair, LogRepaired)
    assert repair.dropped_bytes == len(b'{"seq":2,"id":"01J')
    assert repair.dropped_lines == 1
    assert repair.offset == before.end
    assert segments.size(name) == before.end
    # Until a writer records it, the note of the truncation survives.
    assert log.recover() == (before, [repair])
    segments.set_pending(None)
    assert log.recover() == (before, [])


def test_incomplete_batch_is_cut_by_recovery(segments: Segments) -> None:
    log = EventLog(segments)
    append(log, registered("a"))
    kept = log.head()
    append(log, registered("b"), registered("c"), registered("d"))
    name = segments.names()[-1]
    lines = list(log.read())
    segments.truncate(name, lines[2].end)  # keep [1,3] and [2,3] of the last batch
    _, (repair,) = log.recover()
    assert repair.dropped_lines == 2
    assert "batch cut after 2 of 3" in repair.reason
    assert log.head() == kept


def test_line_at_detects_a_rewritten_line(segments: Segments) -> None:
    log = EventLog(segments)
    append(log, registered("a"))
    head = log.head()
    assert log.line_at(head.segment, head.start, head.end) is not None
    assert log.line_at(head.segment, head.start, head.end + 5) is None


def test_lock_is_exclusive(segments: Segments) -> None:
    log = EventLog(segments, lock_timeout=0.05)
    with log.lock(), pytest.raises(StoreBusy), EventLog(segments, lock_timeout=0.05).lock():
        pass


# -- the view store --------------------------------------------------------------

def head(seq: int) -> Head:
    return Head(seq, f"{seq:032x}", "00000000000000000001.jsonl", seq * 10, seq * 10 + 10)


def test_views_start_absent(views: ViewStore) -> None:
    assert views.checkpoint() is None
    assert views.load("workflows", "a") is None
    assert list(views.scan("workflows")) == []
    assert views.count("workflows") == 0


def test_commit_moves_rows_and_checkpoint_together(views: ViewStore) -> None:
    assert views.commit({("w", "a"): b"1", ("w", "b"): b"2"}, EMPTY_HEAD, head(2))
    assert views.checkpoint() == head(2)
    assert list(views.scan("w")) == [("a", b"1"), ("b", b"2")]
    assert views.commit({("w", "a"): None, ("w", "c"): b"3"}, head(2), head(3))
    assert list(views.scan("w")) == [("b", b"2"), ("c", b"3")]
    assert views.count("w") == 2


def test_commit_refuses_a_stale_checkpoint(views: ViewStore) -> None:
    assert views.commit({("w", "a"): b"1"}, EMPTY_HEAD, head(1))
    assert not views.commit({("w", "a"): b"X"}, EMPTY_HEAD, head(1))
    assert not views.commit({("w", "a"): b"X"}, head(5), head(6))
    assert views.load("w", "a") == b"1"
    assert views.checkpoint() == head(1)


def test_replace_and_drop(views: ViewStore) -> None:
    views.commit({("w", "old"): b"0"}, EMPTY_HEAD, head(1))
    views.replace([("w", "a", b"1"), ("s", "store", b"2")], head(9))
    assert views.checkpoint() == head(9)
    assert views.load("w", "old") is None
    assert views.load("s", "store") == b"2"
    views.drop()
    assert views.checkpoint() is None
    assert views.load("w", "a") is None


def test_outdated_view_version_reads_as_absent(tmp_path: Path) -> None:
    path = tmp_path / "views.sqlite3"
    old = SqliteViewStore(path, "v1")
    old.commit({("w", "a"): b"1"}, EMPTY_HEAD, head(1))
    old.close()
    assert SqliteViewStore(path, "v2").checkpoint() is None


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


def test_verify_detects_an_altered_file(tmp_path: Path) -> None:
    cas = Cas(FileBlobs(tmp_path / "cas"), clock=lambda: 1)
    hash_ = cas.put_text("original")
    path = tmp_path / "cas" / hash_[:2] / f"{hash_}.json"
    path.write_text(path.read_text().replace("original", "altered"))
    assert any("altered" in problem for problem in cas.verify(hash_))

