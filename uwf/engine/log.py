"""The event log's interface, cut at the level of events (SPEC §3), and its in-memory twin.

A backend stores complete lines, each the JSON of one event, numbered from 1
(`seq`). It offers four things: the head (seq and chain digest of the last
line), lines read forward from a seq or backward from the end, the line at a
seq, and a writer's exclusive section in which an unacknowledged tail is
recovered and batches are appended. Where lines live (segment files, offsets,
torn tails, notes of pending repairs; a table) is the backend's own business:
the journal, audit, gc and the registry see only this interface.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

from uwf.engine.events import GENESIS_PREV, LogRepaired, digest
from uwf.errors import StoreBusy

__all__ = ["GENESIS", "Checkpoint", "EventLog", "LogLine", "LogProblem", "LogSession",
           "MemoryLog", "digest"]


class Checkpoint(NamedTuple):
    """A position in the log: a seq and the chain digest of the line there."""

    seq: int
    digest: str


GENESIS = Checkpoint(0, GENESIS_PREV)


class LogLine(NamedTuple):
    """A complete line: its seq, its bytes without the newline, and where it is stored
    (`where`, `number`: a segment and line number, for messages to people)."""

    seq: int
    raw: bytes
    where: str
    number: int


class LogProblem(NamedTuple):
    """Something wrong with the stored log beyond its lines (a torn tail, a misnamed
    segment), as `uwf log verify` reports it."""

    seq: int | None
    where: str
    number: int
    problem: str


class LogSession(Protocol):
    """What a writer may do inside the exclusive section."""

    def tail(self) -> Checkpoint | None:
        """The head that recovery would keep (None: unknown until recovery has cut);
        reads only, so a caller can refuse before anything is cut."""
        ...

    def recover(self) -> tuple[Checkpoint, list[LogRepaired]]:
        """Cut an unacknowledged tail; the head after it and what was dropped. The first
        `append` after a recovery that dropped something must record it (`log.repaired`)."""
        ...

    def append(self, lines: Sequence[bytes]) -> Checkpoint:
        """Write `lines` (already chained, without newlines) after the head as one
        write, durable before the section ends (a backend may let the lock go first);
        the new head."""
        ...

    def defer_sync(self) -> None:
        """This section's appends acknowledge nothing: the section may end without
        waiting for them to be durable (the next durable append covers them: a step's
        start, covered by its result's fsync). A backend that cannot tell may ignore it."""
        ...


class EventLog(Protocol):
    """Storage for the log's lines. Readers take no lock and see only complete lines."""

    durable: bool
    # Whether `wait` is told of new lines (PostgreSQL's NOTIFY, a condition in memory)
    # rather than looking at the head again and again (a folder's files).
    told: bool

    def head(self) -> Checkpoint:
        """The last complete line (GENESIS when the log is empty)."""
        ...

    def read(self, after: int = 0) -> Iterator[LogLine]:
        """Complete lines with seq > `after`, in order."""
        ...

    def read_reverse(self) -> Iterator[LogLine]:
        """Complete lines newest first, reading from the end (constant memory)."""
        ...

    def line(self, seq: int) -> bytes | None:
        """The bytes of the line at `seq`, or None when there is none."""
        ...

    def exclusive(self) -> contextlib.AbstractContextManager[LogSession]:
        """The writers' exclusive section (a bounded wait, then StoreBusy)."""
        ...

    def problems(self) -> list[LogProblem]:
        """What is wrong with the stored form itself (never a line's content)."""
        ...

    def describe(self) -> dict[str, int]:
        """Facts for people, in the backend's own words (a folder's `segments`, a
        table's `rows`), and `bytes`, which every backend gives: the size of the lines
        as JSONL, newlines included."""
        ...

    def wait(self, after: int, timeout: float) -> bool:
        """Block until the log holds a line after seq `after` (True), or `timeout`
        seconds pass (False): how a follower (`log tail --follow`, the bridge) waits,
        told by the backend where it can be (PostgreSQL's LISTEN/NOTIFY)."""
        ...

    def sync(self) -> None:
        """Make every complete line the log holds now durable: the barrier a reader
        passes before it hands lines on for good (the bridge's messages, the archive's
        files). A writer may let its lock go before its fsync, and a reader may see
        its lines in between."""
        ...


def polled_wait(log: EventLog, after: int, timeout: float, every: float = 0.05) -> bool:
    """`EventLog.wait` by looking at the head every `every` seconds: for a log that
    cannot tell its readers (a folder's files)."""
    deadline = time.monotonic() + timeout
    while log.head().seq <= after:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(every, left))
    return True


class MemoryLog:
    """The in-memory twin: a list of lines behind a lock."""

    told = True

    def __init__(self, lock_timeout: float = 10.0) -> None:
        self.durable = True
        self.lock_timeout = lock_timeout
        self._lines: list[bytes] = []
        self._digests: list[str] = []
        self._lock = threading.Lock()
        self._grown = threading.Condition()

    def head(self) -> Checkpoint:
        if not self._lines:
            return GENESIS
        return Checkpoint(len(self._lines), self._digests[-1])

    def read(self, after: int = 0) -> Iterator[LogLine]:
        for index in range(max(after, 0), len(self._lines)):
            yield LogLine(index + 1, self._lines[index], "memory", index + 1)

    def read_reverse(self) -> Iterator[LogLine]:
        for index in range(len(self._lines) - 1, -1, -1):
            yield LogLine(index + 1, self._lines[index], "memory", index + 1)

    def line(self, seq: int) -> bytes | None:
        return self._lines[seq - 1] if 1 <= seq <= len(self._lines) else None

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[LogSession]:
        if not self._lock.acquire(timeout=self.lock_timeout):
            raise StoreBusy("store is busy: the in-memory log is locked", "retry")
        try:
            yield _MemorySession(self)
        finally:
            self._lock.release()

    def problems(self) -> list[LogProblem]:
        return []

    def describe(self) -> dict[str, int]:
        return {"lines": len(self._lines),
                "bytes": sum(len(line) + 1 for line in self._lines)}

    def _append(self, lines: Sequence[bytes]) -> Checkpoint:
        for raw in lines:
            if b"\n" in raw:
                raise ValueError("a log line may not contain a newline")
        self._lines.extend(lines)
        self._digests.extend(digest(raw) for raw in lines)
        with self._grown:
            self._grown.notify_all()
        return self.head()

    def wait(self, after: int, timeout: float) -> bool:
        with self._grown:
            return self._grown.wait_for(lambda: len(self._lines) > after, timeout)

    def sync(self) -> None:
        """Nothing to do: memory is as durable as it gets."""


class _MemorySession:
    def __init__(self, log: MemoryLog) -> None:
        self._log = log

    def tail(self) -> Checkpoint | None:
        return self._log.head()

    def recover(self) -> tuple[Checkpoint, list[LogRepaired]]:
        return self._log.head(), []  # nothing is ever half-written in memory

    def append(self, lines: Sequence[bytes]) -> Checkpoint:
        return self._log._append(lines)

    def defer_sync(self) -> None:
        """Memory is as durable as it gets."""
