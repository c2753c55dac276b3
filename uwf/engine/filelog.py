"""The embedded log backend: JSONL segment files, one `write` + `fsync` per batch.

Durability order, kept here: a command's lines are written with one append and
fsynced before anyone is told they exist (the fsync just after the writers' lock
is let go: `FileLog.exclusive`); a tail that was never acknowledged (a
last line without `\\n`, a batch with fewer than n lines) is truncated by the
next writer, which records what it dropped as `log.repaired`. The note of a
truncation is saved before the bytes go, so a writer killed between truncating
and recording leaves the record to the next writer.

Segments are named by the seq of their first line; a line is found by its seq
by picking the segment from the names, then walking back from its end (catch-up
reads are near the end) or bisecting its bytes when the line is far from it
(`uwf.engine.spans`), with the last position this process saw as a hint.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.engine.events import LogRepaired, openssl_digester
from uwf.engine.log import (
    GENESIS,
    Checkpoint,
    LogLine,
    LogProblem,
    digest,
    polled_wait,
)
from uwf.engine.segments import PENDING_NOTE, FileSegments, segment_name
from uwf.engine.spans import (
    WINDOW,
    Span,
    backward,
    complete_end,
    count_lines,
    find,
    seq_of,
)
from uwf.engine.tailcut import check_whole, cut_tail, read_note, recorded_tail, tail_info
from uwf.errors import StoreBusy

if TYPE_CHECKING:
    from uwf.engine.writeback import Writeback

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
# Appends of one FileLog after which it digests lines with OpenSSL's SHA-256 (hashlib's,
# ~1.4 µs less a line) instead of CPython's own (`events.digest`), whose module loads in
# a tenth of the time: a CLI call appends once or twice, a worker or a writer thousands
# of times. The digests are the same. From then on too, a durable command's pages are
# sent to the disk as soon as its line is written (uwf/engine/writeback.py: the views'
# fold overlaps the disk's write; the fsync after the unlock waits for less).
OPENSSL_AFTER = 64


class FileLog:
    """The log as segment files under `events/`, with `lock` as the writers' lock."""

    told = False  # files tell no one: `wait` looks at the head

    def __init__(
        self,
        events_dir: Path,
        lock_path: Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        durable: bool = True,
        lock_timeout: float = 10.0,
    ) -> None:
        self.segments = FileSegments(events_dir, lock_path)
        self.segment_bytes = segment_bytes
        self.durable = durable
        self.lock_timeout = lock_timeout
        self._thread_lock = threading.Lock()  # flock is per open file: threads queue here
        self._hint: Span | None = None  # the last line this process saw at the end
        # The log's last line as this process last wrote or scanned it, ending its
        # segment: while that segment keeps its size and no next segment exists, it is
        # still the last line (lines are only ever appended, and a cut removes only
        # bytes after complete batches), so a writer skips the scan.
        self._tail_hint: Span | None = None
        self._tail_file: tuple[int, int] | None = None  # its segment's (device, inode)
        self._known: tuple[Span, Checkpoint] | None = None  # a span's checkpoint, once
        self._after: tuple[Span, str | None] | None = None  # the tail hint's next segment
        self.digest: Callable[[bytes], str] = digest  # a line's (`OPENSSL_AFTER`)
        self.writeback: Writeback | None = None  # pages sent early (`OPENSSL_AFTER`)
        self._appends = 0

    def _checkpoint(self, span: Span) -> Checkpoint:
        """The checkpoint of the line `span` holds (its seq and digest), computed once for
        the span last asked about (the tail: `head`, `tail`, `recover`, `append`)."""
        known = self._known
        if known is not None and known[0] is span:
            return known[1]
        checkpoint = Checkpoint(tail_info(span.raw, span.segment).seq, self.digest(span.raw))
        self._known = span, checkpoint
        return checkpoint

    # -- reading ---------------------------------------------------------

    def head(self) -> Checkpoint:
        span = self._still_last()
        if span is not None:
            return self._checkpoint(span)
        span = self._last_span()
        if span is None:
            return GENESIS
        return self._checkpoint(span)

    def read(self, after: int = 0) -> Iterator[LogLine]:
        names = self.segments.names()
        if after <= 0:
            start_index, offset, seq = 0, 0, 0
        else:
            found = self._locate(after, names)
            if found is None:
                return
            start_index, offset, seq = names.index(found.segment), found.end, after
        for index in range(start_index, len(names)):
            name = names[index]
            begin = offset if index == start_index else 0
            # Line numbers are known only when a segment is read from its start. This
            # loop is the rebuild's hot path: lines are cut and wrapped once, here.
            numbered = begin == 0
            number = 0
            position = begin
            rest = b""
            while chunk := self.segments.read(name, position, position + (1 << 20)):
                position += len(chunk)
                data = rest + chunk
                complete = data.rfind(b"\n") + 1
                if not complete:
                    rest = data
                    continue
                for raw in data[:complete - 1].split(b"\n"):
                    seq += 1
                    if numbered:
                        number += 1
                    yield LogLine(seq, raw, name, number)
                rest = data[complete:]

    def read_reverse(self) -> Iterator[LogLine]:
        for name in reversed(self.segments.names()):
            end = complete_end(self.segments, name)
            for span in backward(self.segments, name, end, WINDOW):
                yield LogLine(seq_of(span.raw) or 0, span.raw, name, 0)

    def line(self, seq: int) -> bytes | None:
        if seq <= 0:
            return None
        span = self._locate(seq)
        return None if span is None else span.raw

    def problems(self) -> list[LogProblem]:
        found: list[LogProblem] = []
        expected = 1
        for name in self.segments.names():
            end = complete_end(self.segments, name)
            lines = count_lines(self.segments, name, end)
            if lines and name != segment_name(expected):
                found.append(LogProblem(expected, name, 1,
                                        f"segment name does not match its first seq {expected}"))
            size = self.segments.size(name)
            if size > end:
                found.append(LogProblem(None, name, lines + 1,
                                        f"torn tail: {size - end} bytes without a newline"))
            expected += lines
        return found

    def describe(self) -> dict[str, int]:
        names = self.segments.names()
        return {"segments": len(names),
                "bytes": sum(self.segments.size(name) for name in names)}

    def wait(self, after: int, timeout: float) -> bool:
        """Files tell no one: the head is looked at every 50 ms."""
        return polled_wait(self, after, timeout)

    def sync(self) -> None:
        """fsync the last segment: every segment before it was fsynced when the next one
        was started, so this covers every line there is now."""
        names = self.segments.names()
        if self.durable and names:
            # Gone since: a new segment cut away whole held no complete line.
            with contextlib.suppress(FileNotFoundError):
                self.segments.sync(names[-1])

    # -- writing -----------------------------------------------------------

    def exclusive(self) -> _Section:
        """The writers' section. Its appends are fsynced after the lock is let go (a
        group commit: the next writer appends while this one waits for the disk, and
        the kernel serves fsyncs of one file that overlap together), and before the
        section's caller goes on, so nothing is acknowledged before it is durable. A
        writer that appends after lines not yet fsynced has its own fsync cover them."""
        return _Section(self)

    # -- finding lines -----------------------------------------------------

    def _still_last(self) -> Span | None:
        """The tail hint (the last line this process wrote or scanned, closing its batch
        at its segment's end) while it is still the log's last line: its segment kept its
        size and no next segment exists (lines are only appended; a cut removes only bytes
        after whole batches), and is still the file it was (device, inode). Two stats, no
        scan; None when that cannot be told so."""
        hint = self._tail_hint
        found = None if hint is None else self.segments.stat(hint.segment)
        if hint is None or found is None or found.st_size != hint.end or \
                (found.st_dev, found.st_ino) != self._tail_file:
            return None
        after = self._after
        if after is None or after[0] is not hint:  # the next segment's name, once a hint
            seq = seq_of(hint.raw)
            self._after = after = hint, None if seq is None else segment_name(seq + 1)
        if after[1] is None or self.segments.exists(after[1]):
            return None
        return hint

    def _last_span(self) -> Span | None:
        for name in reversed(self.segments.names()):
            for span in backward(self.segments, name, complete_end(self.segments, name)):
                self._hint = span
                return span
        return None

    def _locate(self, seq: int, names: list[str] | None = None) -> Span | None:
        """The line whose seq is `seq`: from the hint, else in the segment its name says
        (of `names`, listed here when not given)."""
        hint = self._hint
        if hint is not None and seq_of(hint.raw) == seq:
            data = self.segments.read(hint.segment, hint.start, hint.end)
            if data == hint.raw + b"\n":
                return hint
        if names is None:
            names = self.segments.names()
        firsts = [int(name[:20]) for name in names]
        index = bisect.bisect_right(firsts, seq) - 1
        if index < 0:
            return None
        return find(self.segments, names[index], seq)

    def close(self) -> None:
        self.segments.close()


class _Section:
    """`FileLog.exclusive`'s context: this process's threads queued, the file lock
    taken; on leaving, the lock let go, then the section's appends fsynced (a class,
    not a generator's context manager: a third of the cost, every write)."""

    __slots__ = ("log", "session", "waited")

    def __init__(self, log: FileLog) -> None:
        self.log = log

    def __enter__(self) -> _FileSession:
        log = self.log
        if not log._thread_lock.acquire(timeout=log.lock_timeout):
            raise StoreBusy(f"store is busy: another thread held the log for "
                            f"{log.lock_timeout:g}s", "retry, or raise UWF_LOCK_TIMEOUT")
        self.session = session = _FileSession(log)
        try:  # the file lock taken and given back without a context manager's cost
            self.waited = log.segments.take(log.lock_timeout)
        except BaseException:
            log._thread_lock.release()
            raise
        return session

    def __exit__(self, *exc: object) -> None:
        try:
            self.log.segments.let_go(self.waited)
        finally:
            self.log._thread_lock.release()
            self.session.settle()


class _FileSession:
    """A writer's section on the file log: scan, cut, append."""

    def __init__(self, log: FileLog) -> None:
        self.log = log
        self.segments = log.segments
        self._scan: tuple[str, int, int, tuple[str, ...], Span | None] | None = None
        self._head_span: Span | None = None
        self._head: Checkpoint | None = None
        # The head span's segment's (device, inode), when this section found it ending
        # at the span's end: an append writes at that end through the kept descriptor.
        self._file: tuple[int, int] | None = None
        self._unrecorded = 0
        self._unsynced: int | None = None  # a segment's descriptor, written, not fsynced
        self._deferred = False  # `defer_sync`: nothing waits for this section's appends
        self._early = False  # `sync_early`: the append's pages sent as it is written

    def defer_sync(self) -> None:
        self._deferred = True

    def sync_early(self) -> None:
        """Send this section's append to the disk as soon as it is written (when the log
        does that: `FileLog.writeback`), so the work before the section ends overlaps
        the disk's write; the section's fsync still waits for all of it."""
        self._early = True

    def settle(self) -> None:
        """fsync what this section appended (its last segment: any before it were
        fsynced when the next one started); a no-op when nothing waits, or when the
        section's appends acknowledge nothing (`defer_sync`: the next durable append
        to the segment, or the fsync before a new segment starts, covers them)."""
        fd, self._unsynced = self._unsynced, None
        if fd is not None:
            try:
                if not self._deferred:
                    os.fsync(fd)
            finally:
                os.close(fd)

    def take_unsynced(self) -> int | None:
        """The segment's descriptor this section appended to, not fsynced, for the
        caller (uwf/writer/syncer.py) to fdatasync and close instead of the section."""
        fd, self._unsynced = self._unsynced, None
        return fd

    def own(self) -> Checkpoint | None:
        """The head, when the log's last line is still the one this process appended or
        scanned last and no repair note waits: `recover` would cut and record nothing.
        The section is set at it (no scan); None: `tail` and `recover` look."""
        log = self.log
        known = log._known
        hint = log._still_last()
        if hint is None or known is None or known[0] is not hint or \
                self.segments.exists(PENDING_NOTE):
            return None
        self._head_span, self._file, self._head = hint, log._tail_file, known[1]
        return known[1]

    def _scan_tail(self) -> tuple[str, int, int, tuple[str, ...], Span | None]:
        """(segment, size, cut, reasons, last kept line): bytes from `cut` to `size`
        were never acknowledged; the kept line is None when it lies before the cut's
        segment start or is unknown."""
        if self._scan is not None:
            return self._scan
        hint = self.log._still_last()
        if hint is not None:
            self._scan = (hint.segment, hint.end, hint.end, (), hint)
            self._file = self.log._tail_file
            return self._scan
        self.log._tail_hint = self._file = None
        names = self.segments.names()
        # An empty last segment (a writer killed between creating it and writing) holds
        # no tail: the one to check is the last segment with bytes in it.
        while len(names) > 1 and self.segments.size(names[-1]) == 0:
            names.pop()
        if not names:
            self._scan = ("", 0, 0, (), None)
            return self._scan
        name = names[-1]
        size = self.segments.size(name)
        cut = complete_end(self.segments, name)
        reasons: tuple[str, ...] = ("torn last line",) if cut < size else ()
        last = next(backward(self.segments, name, cut), None)
        kept = last
        if last is not None:
            k, n = tail_info(last.raw, name).batch
            if k < n:
                # Walk back over the k lines of the incomplete batch: they all go.
                spans = backward(self.segments, name, cut)
                first = last
                for _ in range(k):
                    first = next(spans)
                cut = first.start
                reasons = (*reasons, f"batch cut after {k} of {n} lines")
                kept = None
        if cut == 0 and len(names) > 1:
            check_whole(self.segments, names[-2], name)
        self._scan = (name, size, cut, reasons, kept)
        found = self.segments.stat(name)
        if kept is not None and cut == size and found is not None and found.st_size == size:
            self.log._tail_hint = kept
            self._file = self.log._tail_file = (found.st_dev, found.st_ino)
        return self._scan

    def tail(self) -> Checkpoint | None:
        name, _, _, _, kept = self._scan_tail()
        if not name:
            return GENESIS
        if kept is None:
            return None
        return self.log._checkpoint(kept)

    def recover(self) -> tuple[Checkpoint, list[LogRepaired]]:
        name, size, cut, reasons, kept = self._scan_tail()
        # The note lists the cuts made and not yet known to be recorded. Those whose
        # record already ends the log were recorded by a writer that died before it
        # could clear the note.
        noted = read_note(self.segments)
        recorded = recorded_tail(self.segments, len(noted)) if noted else []
        unrecorded = [repair for repair in noted if repair not in recorded]
        if cut < size:
            # A note for this very cut means its writer died before truncating: the
            # cut below is the same one, so it is recorded once, not twice.
            tail = self.segments.read(name, cut, size)
            same = (name, cut, len(tail), digest(tail))
            unrecorded = [r for r in unrecorded
                          if (r.segment, r.offset, r.dropped_bytes, r.digest) != same]
            unrecorded.append(cut_tail(self.segments, name, size, cut,
                                       reasons=reasons, unrecorded=unrecorded))
            kept = self._file = None
        elif noted and not unrecorded:
            self.segments.set_pending(None)
        self._unrecorded = len(unrecorded)
        self._scan = None
        span = kept if kept is not None else self.log._last_span()
        if kept is None:
            self._file = None
        self._head_span = span
        self._head = GENESIS if span is None else self.log._checkpoint(span)
        return self._head, unrecorded

    def append(self, lines: Sequence[bytes]) -> Checkpoint:
        if self._head is None:
            self.recover()  # never append after a tail that was not looked at
        assert self._head is not None
        if not lines:
            return self._head
        span = self._head_span
        name = span.segment if span is not None else ""
        file = self._file  # the segment ends at the span's end: no stat
        position = (span.end if file is not None and span is not None
                    else self.segments.size(name) if name else 0)
        if not name or position >= self.log.segment_bytes:
            name = segment_name(self._head.seq + 1)
            position = self.segments.size(name)
            file = None
        durable = self.log.durable
        if durable and span is not None and name != span.segment:
            # A new segment starts only after the one before it is durable: a crash
            # of the machine never keeps a later segment and loses an earlier tail.
            self.segments.sync(span.segment)
        data = b"\n".join([*lines, b""])  # each line ended, the bytes copied once
        if data.count(b"\n") != len(lines):
            raise ValueError("a log line may not contain a newline")
        # The fsync waits for the lock's release (`FileLog.exclusive`), unless this
        # batch records a cut: the note goes only once its record is durable.
        unsynced = self.segments.append(name, data, durable, defer=not self._unrecorded,
                                        file=file)
        if unsynced is not None:
            writeback = self.log.writeback
            if self._early and writeback is not None and not self._deferred:
                writeback.start(unsynced)
            if self._unsynced is not None:  # the same segment: one fsync covers both
                os.close(self._unsynced)
            self._unsynced = unsynced
        if self._unrecorded:  # each repair is a batch of its own, recorded first
            self._unrecorded -= 1
            if not self._unrecorded:  # the last batch recording a cut is durable now
                self.segments.set_pending(None)
        last = lines[-1]
        end = position + len(data)
        self._head_span = Span(name, end - len(last) - 1, end, last)
        self.log._hint = self.log._tail_hint = self._head_span
        self._file = self.log._tail_file = self.segments.identity(name)
        log = self.log
        log._appends += 1
        if log._appends == OPENSSL_AFTER:
            log.digest = openssl_digester()
            if log.durable:
                from uwf.engine.writeback import Writeback  # ctypes: not for a command line

                log.writeback = Writeback()
        self._head = Checkpoint(self._head.seq + len(lines), log.digest(last))
        log._known = self._head_span, self._head
        # The next segment's name, which the next section looks for (`_still_last`),
        # spelled here, while the disk works (`sync_early`), not before its write.
        log._after = self._head_span, segment_name(self._head.seq + 1)
        return self._head
