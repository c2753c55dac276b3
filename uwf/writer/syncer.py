"""The resident writer's fsyncs: a group commit of whole rounds behind its loop (or, a
round the loop says to make durable `here`, or with `inline` a lone round, in the loop
itself).

The loop (uwf/writer/server.py) runs a round of calls and hands its replies here with
the descriptor of the segment it appended to (None: nothing appended, or a log that
is not durable). With `inline` (off by default: slower on a loaded disk, as measured
in docs/benchmarks.md), a round of one call while nothing else is on its way to the
disk is made durable at once, in the loop's own thread (`fdatasync` of that
descriptor, then the reply). Every other round goes to this module's thread, and the
loop goes on to the next round at once; the thread takes every round handed to it so
far (each one's lines already written), fdatasyncs the last segment written once for
all of them (a segment before it was fsynced when the next one started), and only then
sends their replies, in the order the rounds ran. While it waits for the disk, the loop
decides the next round, so the disk and the CPU work at the same time, as they do for
processes that each fsync after letting the writers' lock go. A round's lines are
written before it is handed here, so an fsync begun after that covers them; a round
that appended nothing waits for the rounds before it, whose lines it may have read.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

Replies = list[tuple[Any, Any]]  # (peer, reply) of one round


class Syncer:
    """`submit` a round's replies; they are sent once an fsync covers the round."""

    def __init__(self, sync: Callable[[], None], send: Callable[[Any, Any], None],
                 failure: Callable[[str], Any], *, inline: bool = False) -> None:
        self._sync = sync  # the log's own fsync: for a round whose descriptor is unknown
        self._send = send
        self._failure = failure  # the reply every call gets once an fsync failed
        self._queue: queue.SimpleQueue[tuple[Replies, int | None, bool] | None] = \
            queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="uwf-writer-fsync",
                                        daemon=True)
        # Rounds handed to the thread, and answered by it: each counted by one thread
        # only, so their difference (rounds on their way) needs no lock.
        self._inline = inline  # a lone round made durable in the loop's thread
        self._handed = 0
        self._answered = 0
        self.fsyncs = 0
        self.inline = 0  # rounds made durable in the loop's thread (a test looks)
        self.failed: str | None = None  # why the log could not be made durable

    @property
    def busy(self) -> bool:
        """Whether a round handed to the thread still waits for its fsync or replies."""
        return self._handed != self._answered

    def start(self) -> None:
        self._thread.start()

    def submit(self, replies: Replies, fd: int | None, appended: bool, *,
               here: bool = False) -> None:
        """Answer a round once an fsync covers it: `fd` is the segment it appended to
        (the caller's no more: closed here), `appended` whether it appended at all;
        `here`: in the caller's thread when nothing else is on its way to the disk."""
        # A lone round, nothing else on its way to the disk: nothing to overlap.
        if not self.busy and (here or (self._inline and len(replies) <= 1)):
            self.inline += 1
            self._durable([(replies, fd, appended)])
            return
        self._handed += 1
        self._queue.put((replies, fd, appended))

    def stop(self) -> None:
        """Answer every round handed here, then end the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _loop(self) -> None:
        while True:
            waiting = self._queue
            batch = [waiting.get()]
            while not waiting.empty():  # every round handed here meanwhile shares this fsync
                batch.append(waiting.get_nowait())  # (this thread is its only reader)
            rounds = [item for item in batch if item is not None]
            self._durable(rounds)
            self._answered += len(rounds)
            if len(rounds) < len(batch):
                return

    def _durable(self, rounds: Sequence[tuple[Replies, int | None, bool]]) -> None:
        """One fsync for `rounds` (the last descriptor's: the segments before it were
        fsynced when the next one started), then their replies in order."""
        last: int | None = None
        earlier: list[int] = []
        appended = False
        for _, fd, wrote in rounds:
            if fd is not None:
                if last is not None:
                    earlier.append(last)
                last = fd
            appended = appended or wrote
        try:
            if self.failed is None and appended:
                try:
                    if last is not None:
                        os.fdatasync(last)
                    else:
                        self._sync()
                    self.fsyncs += 1
                except OSError as exc:
                    self.failed = str(exc)
        finally:
            if last is not None:
                earlier.append(last)
            for fd in earlier:
                with contextlib.suppress(OSError):
                    os.close(fd)
        send = self._send
        if self.failed is None:
            for replies, _, _ in rounds:
                for peer, reply in replies:
                    send(peer, reply)
        else:
            for replies, _, _ in rounds:
                for peer, _reply in replies:
                    send(peer, self._failure(self.failed))
