"""The file backend's own behaviour, beyond the log contract: segments, rotation,
torn tails, incomplete batches and the pending-repair note."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.logkit import append
from uwf.engine.events import LogRepaired, NewEvent
from uwf.engine.filelog import OPENSSL_AFTER, FileLog
from uwf.engine.log import digest
from uwf.engine.segments import PENDING_NOTE
from uwf.errors import StoreBusy
from uwf.store import event_catalog
from uwf.workflows.events import WorkflowRegistered

CATALOG = event_catalog()


def registered(name: str) -> NewEvent:
    return NewEvent(f"workflow/{name}", WorkflowRegistered(name, "70D2DHWNFR6T8"))


def make(tmp_path: Path, segment_bytes: int = 64 << 20) -> FileLog:
    return FileLog(tmp_path / "events", tmp_path / "lock", lock_timeout=0.05,
                   segment_bytes=segment_bytes)


def segment_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "events").glob("*.jsonl"))


def test_segments_rotate_by_size_and_never_split_a_batch(tmp_path: Path) -> None:
    log = make(tmp_path, segment_bytes=300)
    for index in range(6):
        append(log, registered(f"w{index}a"), registered(f"w{index}b"))
    files = segment_files(tmp_path)
    assert len(files) > 1
    seqs = []
    for path in files:
        batch = [json.loads(line) for line in path.read_bytes().splitlines()]
        assert path.name == f"{batch[0]['seq']:020d}.jsonl"
        assert batch[0]["batch"][0] == 1
        assert batch[-1]["batch"][0] == batch[-1]["batch"][1]
        seqs += [event["seq"] for event in batch]
    assert seqs == list(range(1, 13))
    assert log.head().seq == 12
    assert log.problems() == []
    # Line numbers count from each segment's start when it is read from its start.
    numbers = [(line.where, line.number) for line in log.read()]
    assert numbers[0] == (files[0].name, 1)
    assert all(number >= 1 for _, number in numbers)


def test_a_line_far_from_the_end_is_found_by_bisecting_the_segment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One 64 MiB segment of lines of every length, some longer than a read window: every
    seq is found, reading a few KiB, not the segment from its end."""
    log = make(tmp_path)
    for index in range(1500):
        append(log, registered("x" * (index * 37 % 900) if index % 97 else "y" * 70_000))
    size = segment_files(tmp_path)[0].stat().st_size
    assert size > 4 * (256 << 10)
    lines = {line.seq: line.raw for line in log.read()}
    read: list[int] = []
    original = log.segments.read

    def counting(name: str, start: int, end: int) -> bytes:
        data = original(name, start, end)
        read.append(len(data))
        return data

    monkeypatch.setattr(log.segments, "read", counting)
    far: list[int] = []  # bytes read for a line far from the last one
    for seq in [1, 2, 96, 97, 98, 700, 1499, 1500, *range(3, 1500, 41)]:
        read.clear()
        log._hint = None  # as another process would look it up
        assert log.line(seq) == lines[seq], seq
        assert sum(read) < size / 3, (seq, sum(read))
        if 1500 - seq > 64:
            far.append(sum(read))
        assert [line.seq for line in log.read(seq)][:2] == [s for s in (seq + 1, seq + 2)
                                                            if s <= 1500]
    # Bisected at once, without first walking back 256 KiB from the end.
    assert sorted(far)[len(far) // 2] < 256 << 10, far
    assert log.line(1501) is None
    assert log.line(0) is None


def test_a_segment_whose_lines_claim_no_seq_is_walked(tmp_path: Path) -> None:
    """A line without the `{"seq":N,` prefix (an edited log) cannot be bisected over:
    the walk from the end still finds what it finds for a well-formed line."""
    log = make(tmp_path)
    for index in range(1200):
        append(log, registered(f"w{index:04d}" + "x" * 500))
    path = segment_files(tmp_path)[0]
    data = path.read_bytes().split(b"\n")
    for number in range(0, 1200, 3):
        data[number] = b" " + data[number][1:]  # same length, no seq claimed
    path.write_bytes(b"\n".join(data))
    for seq in (2, 500, 1100):
        assert log.line(seq) == data[seq - 1]
    assert log.line(1) is None


def test_a_line_longer_than_any_read_window_is_found(tmp_path: Path) -> None:
    log = make(tmp_path)
    append(log, registered("a" * 200_000))
    append(log, registered("b"))
    assert [CATALOG.decode(line.raw).seq for line in log.read_reverse()] == [2, 1]
    assert log.line(1) is not None
    assert [line.seq for line in log.read(1)] == [2]


def test_torn_last_line_is_ignored_by_readers_and_cut_by_recovery(tmp_path: Path) -> None:
    log = make(tmp_path)
    append(log, registered("a"))
    before = log.head()
    path = segment_files(tmp_path)[-1]
    size = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(b'{"seq":2,"id":"01J')
    assert [line.seq for line in log.read()] == [1]
    assert log.head() == before
    assert [p.problem for p in log.problems()] == ["torn tail: 18 bytes without a newline"]
    with log.exclusive() as session:
        assert session.tail() == before
        head_after, repairs = session.recover()
    assert head_after == before
    (repair,) = repairs
    assert isinstance(repair, LogRepaired)
    assert repair.dropped_bytes == 18
    assert repair.dropped_lines == 1
    assert repair.offset == size
    assert path.stat().st_size == size
    # Until a writer records it, the note of the truncation survives...
    assert (tmp_path / "events" / PENDING_NOTE).exists()
    with log.exclusive() as session:
        assert session.recover() == (before, [repair])
    # ...and the first append after it, the batch that records it, clears it.
    with log.exclusive() as session:
        session.recover()
        session.append([b'{"seq":2}'])
    assert not (tmp_path / "events" / PENDING_NOTE).exists()


def test_an_incomplete_batch_is_cut_by_recovery(tmp_path: Path) -> None:
    log = make(tmp_path)
    append(log, registered("a"))
    kept = log.head()
    append(log, registered("b"), registered("c"), registered("d"))
    path = segment_files(tmp_path)[-1]
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]))  # keep [1,3] and [2,3] of the last batch
    with log.exclusive() as session:
        assert session.tail() is None  # unknown until the cut
        head, (repair,) = session.recover()
    assert head == kept
    assert repair.dropped_lines == 2
    assert "batch cut after 2 of 3" in repair.reason
    assert log.head() == kept


def test_a_recorded_repair_is_not_recorded_twice(tmp_path: Path) -> None:
    """A writer killed after appending `log.repaired` but before removing the note:
    the next writer sees its record at the end of the log and drops the note."""
    log = make(tmp_path)
    append(log, registered("a"))
    path = segment_files(tmp_path)[-1]
    with path.open("ab") as handle:
        handle.write(b"torn")
    with log.exclusive() as session:
        _, (repair,) = session.recover()
    note = (tmp_path / "events" / PENDING_NOTE).read_bytes()
    append(log, NewEvent("store", repair))  # recorded; the note is cleared with it
    (tmp_path / "events" / PENDING_NOTE).write_bytes(note)  # as if the clear never ran
    with log.exclusive() as session:
        assert session.recover()[1] == []
    assert not (tmp_path / "events" / PENDING_NOTE).exists()


def test_a_misnamed_segment_is_a_problem(tmp_path: Path) -> None:
    log = make(tmp_path, segment_bytes=300)
    for index in range(6):
        append(log, registered(f"w{index}"))
    files = segment_files(tmp_path)
    assert len(files) > 1
    files[-1].rename(files[-1].with_name(f"{99:020d}.jsonl"))
    problems = [p.problem for p in log.problems()]
    assert any("segment name does not match its first seq" in p for p in problems)


def test_a_writer_killed_between_its_note_and_the_cut_leaves_one_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The note of a cut is saved, then the writer dies before truncating: the next
    writer finds the same torn tail and that note, and records the cut once."""
    from uwf.engine.journal import Outcome
    from uwf.engine.segments import FileSegments
    from uwf.store import Store

    def register(store: Store, name: str) -> None:
        store.journal.write(lambda _views: Outcome([registered(name)]))

    store = Store.open(tmp_path / "s")
    register(store, "a")
    segment = sorted((tmp_path / "s" / "events").glob("*.jsonl"))[-1]
    with segment.open("ab") as handle:
        handle.write(b'{"seq":3,"id"')

    def killed(self: FileSegments, name: str, size: int) -> None:
        raise KeyboardInterrupt  # the writer dies after its note, before the cut

    with monkeypatch.context() as patch:
        patch.setattr(FileSegments, "truncate", killed)
        with pytest.raises(KeyboardInterrupt):
            register(store, "b")
    assert (tmp_path / "s" / "events" / PENDING_NOTE).exists()
    register(Store.open(tmp_path / "s"), "c")
    events = [json.loads(line) for line in segment.read_bytes().splitlines()]
    repaired = [e for e in events if e["type"] == "log.repaired"]
    assert len(repaired) == 1
    assert repaired[0]["batch"] == [1, 1]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert not (tmp_path / "s" / "events" / PENDING_NOTE).exists()


def test_two_cuts_are_two_records_each_alone_in_its_batch(tmp_path: Path) -> None:
    """An earlier cut still unrecorded (its writer died before recording it) and a new
    torn tail: both recorded, each in a batch of its own, and nothing lost between."""
    log = make(tmp_path)
    append(log, registered("a"))
    path = segment_files(tmp_path)[-1]
    with path.open("ab") as handle:
        handle.write(b"first tear")
    with log.exclusive() as session:
        session.recover()  # cut and noted, never recorded: the writer "dies" here
    with path.open("ab") as handle:
        handle.write(b"second tear")
    with log.exclusive() as session:
        _, repairs = session.recover()
    assert [r.dropped_bytes for r in repairs] == [10, 11]
    note = json.loads((tmp_path / "events" / PENDING_NOTE).read_bytes())
    assert [r["droppedBytes"] for r in note] == [10, 11]


_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process that holds the store's lock for `seconds`, then exits."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_writer_waits_for_a_held_lock_and_takes_it_once_let_go(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "events", tmp_path / "lock", lock_timeout=30)
    holder = _hold_lock(tmp_path / "lock", 0.3)
    append(log, registered("after"))  # blocks until the holder exits, then appends
    assert holder.wait(timeout=30) == 0
    assert log.head().seq == 1
    append(log, registered("again"))  # the lock was let go after the append
    assert log.head().seq == 2


def test_a_waiter_given_up_on_lets_the_lock_go_when_it_gets_it(tmp_path: Path) -> None:
    log = make(tmp_path)  # lock_timeout 0.05
    holder = _hold_lock(tmp_path / "lock", 0.5)
    with pytest.raises(StoreBusy), log.exclusive():
        pass
    assert holder.wait(timeout=30) == 0
    # The abandoned waiter got the lock when the holder left, and closed its file: an
    # outside process (here, another open file of this one) can take it again.
    fd = os.open(tmp_path / "lock", os.O_RDWR)
    try:
        for _ in range(500):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.01)
        else:
            pytest.fail("the lock stayed held after its waiter was given up on")
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    append(log, registered("after"))
    assert log.head().seq == 1


def test_a_log_that_has_appended_many_batches_digests_as_before(tmp_path: Path) -> None:
    """After OPENSSL_AFTER appends a FileLog digests with OpenSSL's SHA-256: the same
    digests (each line's `prev` is the one before it's, the head the last line's)."""
    log = make(tmp_path)
    heads = [append(log, registered(f"w{n}"), registered(f"v{n}"))
             for n in range(OPENSSL_AFTER + 3)]
    assert log.digest is not digest
    lines = [line.raw for line in log.read()]
    assert len(lines) == 2 * len(heads)
    for before, line in itertools.pairwise(lines):
        assert json.loads(line)["prev"] == digest(before)
    assert heads[-1].digest == digest(lines[-1]) == log.head().digest
    again = FileLog(tmp_path / "events", tmp_path / "lock")  # reads it afresh
    assert again.head() == heads[-1]


def test_a_segment_started_by_a_writer_with_smaller_segments_is_seen(tmp_path: Path) -> None:
    """The next segment's name a writer looks for before it takes its own line as the
    log's last (spelled as its append ends): another writer whose segments are smaller
    starts one after it, and the first writer's next append follows it."""
    mine = make(tmp_path)
    append(mine, registered("a"))
    append(mine, registered("b"))  # the tail hint: its own line 2
    theirs = make(tmp_path, segment_bytes=1)
    assert append(theirs, registered("c")).seq == 3
    assert len(segment_files(tmp_path)) == 2
    assert append(mine, registered("d")).seq == 4
    assert [line.seq for line in mine.read()] == [1, 2, 3, 4]
    assert mine.problems() == []
