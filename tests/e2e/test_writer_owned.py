"""The writer's entry to a round when the log's tail is its own (uwf/writer/owned.py):
no scan, no recovery after its own line; and the full entry whenever the file system
says anything else happened (another process appended, a torn tail left by a killed
process, a repair note), so the file lock stays the protocol."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import Cli
from tests.e2e.test_writer import events, ok, prepared, whole_and_replayable
from uwf.engine.events import LogRepaired, digest
from uwf.queue import sched

pytestmark = pytest.mark.cli_processes


class Parts:
    """The writer's store, log and memory, as `Writer` sets them up, without serving."""

    def __init__(self, cli: Cli) -> None:
        from uwf.store import Store
        from uwf.writer.deferred import DeferredLog
        from uwf.writer.memqueue import QueueMemory

        self.store = Store.open(cli.home)
        self.store.writer = None
        self.log = DeferredLog(self.store.journal.log)
        self.store.journal.log = self.log
        self.memory = QueueMemory(self.store.journal)
        self.segments = self.log.inner.segments  # type: ignore[attr-defined]

    def round(self, *decides: Any) -> list[Any]:
        """One round in the writer's section (`DeferredLog.round`), fsynced."""
        with self.log.round() as section:
            results = self.store.journal.write_round(list(decides), self.memory)
        if section.fd is not None:
            os.fdatasync(section.fd)
            os.close(section.fd)
        return results

    def last_segment(self) -> Path:
        names: list[str] = self.segments.names()
        return Path(self.segments.events_dir) / names[-1]


@pytest.fixture
def parts(cli: Cli) -> Iterator[Parts]:
    os.environ["UWF_DURABILITY"] = "fsync"
    try:
        made = Parts(cli)
        try:
            yield made
        finally:
            made.store.close()
    finally:
        del os.environ["UWF_DURABILITY"]


def _counting(parts: Parts) -> dict[str, int]:
    """How often a round reads the log's bytes or its repair note (the tail scan and
    the recovery do; the writer's own entry does neither)."""
    counts = {"read": 0, "pending": 0}
    segments = parts.segments

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)
        return call

    segments.read = counted("read", segments.read)
    segments.pending = counted("pending", segments.pending)
    return counts


def test_a_round_after_the_writers_own_reads_no_tail(cli: Cli, parts: Parts) -> None:
    """After the writer's own round, the next rounds read neither the log's bytes nor
    its repair note: the segment's size and file, and no segment or note after them,
    say the tail is the line the writer appended."""
    prepared(cli, entries=4, ceiling=4)
    (first,) = parts.round(sched.lease_decision(1, None))
    counts = _counting(parts)
    lease = first.leases[0]
    (done,) = parts.round(sched.complete_decision(lease.id, lease.lease_id, None))
    (again,) = parts.round(sched.lease_decision(1, None))
    assert done.status == "drained"
    assert again.granted == 1
    assert counts == {"read": 0, "pending": 0}
    whole_and_replayable(cli)


def test_another_process_appends_between_two_rounds(cli: Cli, parts: Parts) -> None:
    """A process that never asks the writer leases under the lock between two rounds:
    the next round sees its line (the segment grew), catches up and counts its lease
    against the ceiling."""
    prepared(cli, entries=4, ceiling=2)
    (mine,) = parts.round(sched.lease_decision(1, None))
    theirs = ok(cli, "sched", "lease", "--limit", "1")["leases"][0]  # 2 of 2 now
    (full,) = parts.round(sched.lease_decision(1, None))
    assert type(full).__name__ == "NothingToDo"  # their lease counts
    assert parts.memory.entries[theirs["id"]].status == "leased"
    lease = mine.leases[0]
    (done,) = parts.round(sched.complete_decision(lease.id, lease.lease_id, None))
    assert done.status == "drained"
    whole_and_replayable(cli)


def test_a_torn_tail_left_by_a_killed_process(cli: Cli, parts: Parts) -> None:
    """A process killed mid-write leaves half a line after the writer's last one: the
    next round cuts it, records the cut (`log.repaired`), and appends after it; the log
    verifies."""
    prepared(cli, entries=4, ceiling=4)
    (first,) = parts.round(sched.lease_decision(1, None))
    with parts.last_segment().open("ab") as torn:
        torn.write(b'{"seq":999,"id":"torn')
    lease = first.leases[0]
    (done,) = parts.round(sched.complete_decision(lease.id, lease.lease_id, None))
    assert done.status == "drained"
    (repair,) = events(cli, "log.repaired")
    assert repair["data"]["droppedBytes"] == len(b'{"seq":999,"id":"torn')
    whole_and_replayable(cli)


def test_a_repair_note_left_after_the_writers_line(cli: Cli, parts: Parts) -> None:
    """A process that cut a torn tail back to the writer's line, and was killed before
    it recorded the cut, leaves the segment as the writer wrote it and a repair note:
    the next round records the cut before its own line, as any writer would."""
    prepared(cli, entries=4, ceiling=4)
    (first,) = parts.round(sched.lease_decision(1, None))
    segment = parts.last_segment()
    dropped = b'{"seq":999,"id":"torn'
    noted = LogRepaired(segment=segment.name, offset=segment.stat().st_size,
                        dropped_bytes=len(dropped), dropped_lines=1,
                        digest=digest(dropped), reason="torn last line")
    parts.segments.set_pending(msgspec.json.encode([noted]))
    lease = first.leases[0]
    (done,) = parts.round(sched.complete_decision(lease.id, lease.lease_id, None))
    assert done.status == "drained"
    (repair,) = events(cli, "log.repaired")
    assert repair["data"]["offset"] == noted.offset
    assert parts.segments.pending() is None
    whole_and_replayable(cli)


def test_a_segment_started_by_another_process(cli: Cli, parts: Parts) -> None:
    """Another process whose append started a new segment (the last one full by its
    settings): the writer's segment kept its size, yet its line is no longer the tail;
    the next round finds the new segment and chains after its line."""
    prepared(cli, entries=4, ceiling=4)
    (first,) = parts.round(sched.lease_decision(1, None))
    before = parts.segments.names()
    cli.env["UWF_SEGMENT_BYTES"] = "1"  # every append of that process starts a segment
    try:
        theirs = ok(cli, "sched", "lease", "--limit", "1")["leases"][0]
    finally:
        del cli.env["UWF_SEGMENT_BYTES"]
    assert len(parts.segments.names()) == len(before) + 1
    lease = first.leases[0]
    (done,) = parts.round(sched.complete_decision(lease.id, lease.lease_id, None))
    assert done.status == "drained"
    assert parts.memory.entries[theirs["id"]].status == "leased"
    whole_and_replayable(cli)
