"""Views are derived: incremental fold == full rebuild == rebuild after deleting them."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uwf.api.store import Store
from uwf.engine.events import (
    Envelope,
    LogRepaired,
    NewEvent,
    StoreCreated,
    WorkflowRegistered,
    as_envelope,
    decode_line,
    encode_line,
)
from uwf.engine.journal import Journal
from uwf.engine.viewstore import Key
from uwf.errors import Corrupt

HASHES = ["70D2DHWNFR6T8", "07M38PX0M6M1C", "0HMFKR60QCWK5"]


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    opened = Store.memory() if request.param == "memory" else Store.open(tmp_path / "s")
    yield opened
    opened.close()


def register(store: Store, name: str, hash_: str) -> list[Envelope]:
    return store.journal.write(
        lambda _j: [NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_))]
    )


def persisted(journal: Journal) -> dict[Key, bytes]:
    return {(view, key): raw for view in journal.projections for key, raw in
            journal.views.scan(view)}


def test_first_write_creates_the_store_in_the_same_batch(store: Store) -> None:
    written = register(store, "a", HASHES[0])
    assert [e.type for e in written] == ["store.created", "workflow.registered"]
    assert [e.batch for e in written] == [(1, 2), (2, 2)]
    assert isinstance(written[0].data, StoreCreated)


def test_a_command_that_decides_nothing_writes_nothing(store: Store) -> None:
    assert store.journal.write(lambda _j: []) == []
    assert store.log.head().seq == 0


def test_rejection_inside_decide_writes_nothing(store: Store) -> None:
    register(store, "a", HASHES[0])
    before = store.log.head()

    def reject(_journal: Journal) -> list[NewEvent]:
        raise Corrupt("no")

    with pytest.raises(Corrupt):
        store.journal.write(reject)
    assert store.log.head() == before


registrations = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(HASHES)),
    min_size=1, max_size=25,
)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(registrations)
def test_incremental_equals_rebuild_equals_replay(store: Store,
                                                  steps: list[tuple[str, str]]) -> None:
    store.journal.views.drop()
    base = store.log.head().seq
    for name, hash_ in steps:
        register(store, name, hash_)
    incremental = persisted(store.journal)
    assert store.journal.replay() == incremental
    store.journal.rebuild()
    assert persisted(store.journal) == incremental
    store.journal.views.drop()
    store.read()
    assert persisted(store.journal) == incremental
    assert store.log.head().seq >= base + len(steps)


def test_rebuild_after_deleting_the_views_folder(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    for index in range(30):
        register(store, f"w{index % 7}", HASHES[index % 3])
    before = persisted(store.journal)
    store.close()
    shutil.rmtree(tmp_path / "s" / "views")
    again = Store.open(tmp_path / "s")
    again.read()
    assert persisted(again.journal) == before


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
    checkpoint = store.journal.views.checkpoint()
    assert checkpoint is not None
    # Append behind the views' back, as another process would.
    store.log.append(store.log.head(), [NewEvent("workflow/b", WorkflowRegistered("b", HASHES[1]))],
                     "2026-11-25T00:00:00.000Z", ["01JD0000000000000000000000"])
    fresh = store.journal.freshness()
    assert (fresh.status, fresh.behind) == ("stale", 1)
    store.read()
    assert store.journal.freshness().status == "valid"
    assert store.journal.get("workflows", "b").hash == HASHES[1]


def test_a_rewritten_log_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    register(store, "a", HASHES[0])
    register(store, "b", HASHES[1])
    segment = tmp_path / "s" / "events" / store.log.segments.names()[0]
    lines = segment.read_bytes().splitlines(keepends=True)
    segment.write_bytes(b"".join(lines[:-1]))  # drop the last, already folded, event
    assert store.journal.freshness().status == "mismatch"
    with pytest.raises(Corrupt, match="views do not match the log at seq 3"):
        store.read()
    store.journal.rebuild()
    assert store.journal.get("workflows", "b") is None


def test_newer_store_format_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    store.log.append(store.log.head(), [NewEvent("store", StoreCreated(format=99))],
                     "2026-11-25T00:00:00.000Z", ["01JD0000000000000000000000"])
    with pytest.raises(Corrupt, match="store format 99 is newer"):
        store.read()


def test_writer_repairs_a_torn_tail_and_records_it(store: Store) -> None:
    register(store, "a", HASHES[0])
    name = store.log.segments.names()[-1]
    store.log.segments.append(name, b'{"seq":3,"id"', durable=False)
    written = register(store, "b", HASHES[1])
    events = [decode_line(line.raw) for line in store.log.read()]
    repaired = [e for e in events if e.type == "log.repaired"]
    assert len(repaired) == 1
    assert isinstance(repaired[0].data, LogRepaired)
    assert repaired[0].data.dropped_bytes == len(b'{"seq":3,"id"')
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert written[-1].seq == 4
    assert store.read().get("store", "store").repairs == 1


@given(st.sampled_from(HASHES), st.text(max_size=20), st.integers(1, 10**9))
def test_event_round_trip(hash_: str, name: str, seq: int) -> None:
    envelope = Envelope(seq, "01JD0000000000000000000000", "2026-11-25T00:00:00.000Z",
                        "workflow.registered", f"workflow/{name}", (1, 1),
                        WorkflowRegistered(name, hash_, None), "0" * 32)
    decoded = decode_line(encode_line(envelope))
    assert decoded.type == envelope.type
    assert as_envelope(decoded) == envelope


def test_unknown_fields_in_data_are_an_error() -> None:
    line = (b'{"seq":1,"id":"01JD0000000000000000000000","ts":"2026-11-25T00:00:00.000Z",'
            b'"type":"store.created","subject":"store","batch":[1,1],'
            b'"data":{"format":1,"extra":true},"prev":"' + b"0" * 32 + b'"}')
    with pytest.raises(Corrupt, match="invalid data"):
        decode_line(line)
    with pytest.raises(Corrupt, match="unknown event type"):
        decode_line(line.replace(b"store.created", b"store.exploded"))


def test_event_data_is_encoded_in_camel_case() -> None:
    raw = msgspec.json.encode(LogRepaired("s", 1, 2, 3, "d", "r"))
    assert b'"droppedBytes":2' in raw
