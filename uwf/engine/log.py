"""The append-only event log: chaining, torn-tail recovery, reading (SPEC §3).

Durability order, kept here: a command's lines are written with one append and
fsynced before anyone is told they exist; a tail that was never acknowledged (a
last line without `\\n`, a batch with fewer than n lines) is truncated by the
next writer, which records what it dropped as `log.repaired`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from uwf.engine.events import (
    GENESIS_PREV,
    Envelope,
    LogRepaired,
    NewEvent,
    digest,
    encode_line,
)
from uwf.engine.segments import Segments, segment_name
from uwf.errors import Corrupt

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_TAIL_WINDOW = 4096  # a few lines; grows when a line or batch is longer


@dataclass(frozen=True)
class Head:
    """The last complete line of the log: what the next line chains to."""

    seq: int
    digest: str
    segment: str
    start: int
    end: int


EMPTY_HEAD = Head(0, GENESIS_PREV, "", 0, 0)


@dataclass(frozen=True)
class TailScan:
    """The end of the last segment: bytes from `cut` to `size` were never acknowledged;
    `head` is the last line that stays (None: look further back after the cut)."""

    segment: str
    size: int
    cut: int
    reasons: tuple[str, ...]
    head: Head | None


class Line(NamedTuple):
    """A complete line as stored: where it is and its bytes without the newline."""

    segment: str
    start: int
    end: int
    raw: bytes


class _TailInfo(msgspec.Struct):
    seq: int
    batch: tuple[int, int]


_tail_decoder = msgspec.json.Decoder(_TailInfo)
_repair_decoder = msgspec.json.Decoder(LogRepaired)


class _LastRepair(msgspec.Struct):
    type: str
    data: LogRepaired


_last_repair_decoder = msgspec.json.Decoder(_LastRepair)


def _tail_info(raw: bytes, where: str) -> _TailInfo:
    try:
        return _tail_decoder.decode(raw)
    except msgspec.DecodeError:
        raise Corrupt(
            f"the last line of {where} is not a valid event", "run `uwf log verify` to inspect it"
        ) from None


class EventLog:
    """The log over a `Segments` backend; writers call it under `lock()`."""

    def __init__(
        self,
        segments: Segments,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        durable: bool = True,
        lock_timeout: float = 10.0,
    ) -> None:
        self.segments = segments
        self.segment_bytes = segment_bytes
        self.durable = durable
        self.lock_timeout = lock_timeout

    def lock(self) -> AbstractContextManager[None]:
        return self.segments.lock(self.lock_timeout)

    # -- reading ---------------------------------------------------------

    def head(self) -> Head:
        """The last complete line (torn bytes after it are ignored)."""
        names = self.segments.names()
        for name in reversed(names):
            size = self.segments.size(name)
            lines = self._last_lines(name, self._complete_end(name, size), 1)
            if lines:
                start, end = lines[-1]
                raw = self.segments.read(name, start, end - 1)
                return Head(_tail_info(raw, name).seq, digest(raw), name, start, end)
        return EMPTY_HEAD

    def read(self, segment: str = "", offset: int = 0) -> Iterator[Line]:
        """Complete lines after (segment, offset); from the beginning by default."""
        for name in self.segments.names():
            if segment and name < segment:
                continue
            yield from self.read_segment(name, offset if name == segment else 0)

    def read_segment(self, name: str, start: int = 0) -> Iterator[Line]:
        """The complete lines of one segment from `start`."""
        data = self.segments.read(name, start)
        complete = data.rfind(b"\n") + 1
        position = start
        for raw in data[:complete].split(b"\n")[:-1] if complete else ():
            end = position + len(raw) + 1
            yield Line(name, position, end, raw)
            position = end

    def line_at(self, segment: str, start: int, end: int) -> bytes | None:
        """The bytes of a line previously read there, or None if they are gone."""
        data = self.segments.read(segment, start, end)
        if len(data) != end - start or not data.endswith(b"\n"):
            return None
        return data[:-1]

    # -- writing (under the lock) -----------------------------------------

    def scan_tail(self) -> TailScan:
        """Read (never change) the end of the log: what a writer would keep and cut."""
        names = self.segments.names()
        if not names:
            return TailScan("", 0, 0, (), EMPTY_HEAD)
        name = names[-1]
        size = self.segments.size(name)
        # One read of the last few KiB answers the common case: a clean last line.
        window_start = max(0, size - _TAIL_WINDOW)
        chunk = self.segments.read(name, window_start, size)
        newline = chunk.rfind(b"\n")
        previous = chunk.rfind(b"\n", 0, newline) if newline > 0 else -1
        if newline >= 0 and (previous >= 0 or window_start == 0):
            cut = window_start + newline + 1
            start = window_start + previous + 1
            raw = chunk[previous + 1 : newline]
        else:  # a line longer than the window, or no complete line at all
            cut = self._complete_end(name, size)
            last = self._last_lines(name, cut, 1)
            if not last:
                reasons = ("torn last line",) if cut < size else ()
                return TailScan(name, size, cut, reasons, None)
            start = last[0][0]
            raw = self.segments.read(name, start, cut - 1)
        reasons = ("torn last line",) if cut < size else ()
        info = _tail_info(raw, name)
        k, n = info.batch
        if k < n:
            cut = self._last_lines(name, cut, k)[0][0]
            return TailScan(name, size, cut, (*reasons, f"batch cut after {k} of {n} lines"),
                            None)
        return TailScan(name, size, cut, reasons, Head(info.seq, digest(raw), name, start, cut))

    def recover(self, scan: TailScan | None = None) -> tuple[Head, list[LogRepaired]]:
        """Truncate an unacknowledged tail; the head after it, and what was dropped.

        The note of a truncation is saved before the bytes go, so a writer killed
        between truncating and recording leaves the record to the next writer.
        """
        scan = scan or self.scan_tail()
        repairs = []
        note = self.segments.pending()
        if note is not None:
            earlier = _repair_decoder.decode(note)
            if self._tail_records(earlier):
                self.segments.set_pending(None)  # recorded before its writer died
            else:
                repairs.append(earlier)
        if scan.cut < scan.size:
            repairs.append(self._cut(scan))
        elif scan.head is not None:
            return scan.head, repairs
        return self.head(), repairs

    def _tail_records(self, repair: LogRepaired) -> bool:
        """Whether the log's last line already is this `log.repaired`."""
        head = self.head()
        if head.seq == 0:
            return False
        raw = self.segments.read(head.segment, head.start, head.end - 1)
        try:
            last_event = _last_repair_decoder.decode(raw)
        except msgspec.DecodeError:
            return False
        return last_event.type == LogRepaired.type and last_event.data == repair

    def _cut(self, scan: TailScan) -> LogRepaired:
        dropped = self.segments.read(scan.segment, scan.cut, scan.size)
        repair = LogRepaired(
            segment=scan.segment,
            offset=scan.cut,
            dropped_bytes=len(dropped),
            dropped_lines=dropped.count(b"\n") + (0 if dropped.endswith(b"\n") else 1),
            digest=hashlib.sha256(dropped).hexdigest()[:32],
            reason="; ".join(scan.reasons),
        )
        self.segments.set_pending(msgspec.json.encode(repair))
        if scan.cut == 0:
            self.segments.remove(scan.segment)
        else:
            self.segments.truncate(scan.segment, scan.cut)
        return repair

    def append(
        self, head: Head, events: Sequence[NewEvent], ts: str, ids: Sequence[str]
    ) -> list[tuple[Envelope, Line]]:
        """Chain `events` after `head` as one batch, write them once, fsync."""
        total = len(events)
        prev = head.digest
        envelopes: list[Envelope] = []
        raws: list[bytes] = []
        for index, event in enumerate(events):
            envelope = Envelope(
                seq=head.seq + index + 1,
                id=ids[index],
                ts=ts,
                type=event.data.type,
                subject=event.subject,
                batch=(index + 1, total),
                data=event.data,
                prev=prev,
            )
            raw = encode_line(envelope)
            prev = digest(raw)
            envelopes.append(envelope)
            raws.append(raw)
        name = head.segment
        if not name or self.segments.size(name) >= self.segment_bytes:
            name = segment_name(head.seq + 1)
        position = self.segments.size(name)
        self.segments.append(name, b"\n".join(raws) + b"\n", self.durable)
        written: list[tuple[Envelope, Line]] = []
        for envelope, raw in zip(envelopes, raws, strict=True):
            end = position + len(raw) + 1
            written.append((envelope, Line(name, position, end, raw)))
            position = end
        return written

    # -- helpers ---------------------------------------------------------

    def _complete_end(self, name: str, size: int) -> int:
        """Offset just after the last `\\n` of a segment (0 if it has none)."""
        window = _TAIL_WINDOW
        while True:
            start = max(0, size - window)
            chunk = self.segments.read(name, start, size)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            if start == 0:
                return 0
            window *= 4

    def _last_lines(self, name: str, end: int, count: int) -> list[tuple[int, int]]:
        """(start, end) of the last `count` complete lines ending at `end`."""
        if end == 0 or count == 0:
            return []
        window = _TAIL_WINDOW
        while True:
            start = max(0, end - window)
            chunk = self.segments.read(name, start, end)
            # Walk back over newlines; a line that starts before the chunk is only
            # known complete when the chunk reaches the start of the segment.
            spans: list[tuple[int, int]] = []
            line_end = len(chunk)
            search_to = len(chunk) - 1
            while len(spans) < count:
                newline = chunk.rfind(b"\n", 0, search_to)
                if newline < 0:
                    if start == 0:
                        spans.append((start, start + line_end))
                    break
                spans.append((start + newline + 1, start + line_end))
                line_end = newline + 1
                search_to = newline
            if len(spans) == count or start == 0:
                spans.reverse()
                return spans
            window *= 4
