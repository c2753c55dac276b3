"""The store's log as the resident writer's rounds see it (uwf/writer/server.py): one
exclusive section a round, its fsync left to the syncer (uwf/writer/syncer.py), the
round's entry by the writer's own tail when it can (uwf/writer/owned.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from types import TracebackType

from uwf.engine.events import LogRepaired
from uwf.engine.log import Checkpoint, EventLog, LogLine, LogProblem, LogSession
from uwf.writer.owned import own_head


class _Counted:
    """A round's exclusive section, noting whether anything was appended in it."""

    def __init__(self, session: LogSession) -> None:
        self.session = session
        self.appended = False
        self.fd: int | None = None  # the segment appended to, not yet fsynced (`unsynced`)

    def tail(self) -> Checkpoint | None:
        return self.session.tail()

    def own_head(self) -> Checkpoint | None:
        return own_head(self.session)

    def recover(self) -> tuple[Checkpoint, list[LogRepaired]]:
        return self.session.recover()

    def append(self, lines: Sequence[bytes]) -> Checkpoint:
        self.appended = self.appended or bool(lines)
        return self.session.append(lines)

    def defer_sync(self) -> None:
        self.session.defer_sync()


class _Round:
    """`DeferredLog.round`'s context (a class, not a generator's context manager: the
    writer enters one a round)."""

    __slots__ = ("counted", "log", "section")

    def __init__(self, log: DeferredLog) -> None:
        self.log = log

    def __enter__(self) -> _Counted:
        self.section = section = self.log.inner.exclusive()
        session = section.__enter__()
        try:
            session.defer_sync()
            self.log._round = self.counted = counted = _Counted(session)
        except BaseException:
            section.__exit__(None, None, None)
            raise
        return counted

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.log._round = None
        counted = self.counted
        try:
            fd = unsynced(counted.session)
            if kind is None:
                counted.fd = fd
            elif fd is not None:  # no call of the round is answered as done
                os.close(fd)
        finally:
            self.section.__exit__(kind, exc, trace)


class DeferredLog:
    """The store's log as the writer's commands see it: inside `round()`, every command's
    exclusive section is the round's one (the lock taken once a round); outside it, each
    command has its own. Either way no section fsyncs (`LogSession.defer_sync`): the
    syncer's `sync` does, once for many rounds."""

    def __init__(self, log: EventLog) -> None:
        self.inner = log
        self.durable = log.durable
        self.told = log.told
        self._round: _Counted | None = None

    def round(self) -> _Round:
        """One exclusive section for a round of commands, ended with the round; its
        fsync left to the caller (`sync`), as every section's here."""
        return _Round(self)

    def head(self) -> Checkpoint:
        return self.inner.head()

    def read(self, after: int = 0) -> Iterator[LogLine]:
        return self.inner.read(after)

    def read_reverse(self) -> Iterator[LogLine]:
        return self.inner.read_reverse()

    def line(self, seq: int) -> bytes | None:
        return self.inner.line(seq)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[LogSession]:
        if self._round is not None:
            yield self._round
            return
        with self.inner.exclusive() as session:
            session.defer_sync()
            yield session

    def problems(self) -> list[LogProblem]:
        return self.inner.problems()

    def describe(self) -> dict[str, int]:
        return self.inner.describe()

    def wait(self, after: int, timeout: float) -> bool:
        return self.inner.wait(after, timeout)

    def sync(self) -> None:
        self.inner.sync()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def unsynced(session: LogSession) -> int | None:
    """The descriptor of the segment `session` appended to and did not fsync, now the
    caller's to fdatasync and close (None: none, or a log that does not say)."""
    take = getattr(session, "take_unsynced", None)
    return None if take is None else take()


