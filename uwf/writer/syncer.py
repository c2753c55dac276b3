"""The resident writer's fsyncs, behind its loop: a group commit of whole rounds.

The loop (uwf/writer/server.py) runs a round of calls, hands its replies here, and
goes on to the next round at once; this thread takes every round handed to it so far
(each one's lines already written), fsyncs the log once for all of them, and only then
sends their replies, in the order the rounds ran. While it waits for the disk, the loop
decides the next round, so the disk and the CPU work at the same time, as they do for
processes that each fsync after letting the writers' lock go. A round's lines are
written before it is handed here, so an fsync begun after that covers them; a round
that appended nothing waits for the rounds before it, whose lines it may have read.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

Replies = list[tuple[Any, Any]]  # (peer, reply) of one round


class Syncer:
    """`submit` a round's replies; they are sent once an fsync covers the round."""

    def __init__(self, sync: Callable[[], None], send: Callable[[Any, Any], None],
                 failure: Callable[[str], Any]) -> None:
        self._sync = sync
        self._send = send
        self._failure = failure  # the reply every call gets once an fsync failed
        self._queue: queue.SimpleQueue[tuple[Replies, bool] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="uwf-writer-fsync",
                                        daemon=True)
        self.fsyncs = 0
        self.failed: str | None = None  # why the log could not be made durable

    def start(self) -> None:
        self._thread.start()

    def submit(self, replies: Replies, appended: bool) -> None:
        self._queue.put((replies, appended))

    def stop(self) -> None:
        """Answer every round handed here, then end the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while True:  # every round handed here meanwhile shares this fsync
                    batch.append(self._queue.get_nowait())
            rounds = [item for item in batch if item is not None]
            if self.failed is None and any(appended for _, appended in rounds):
                try:
                    self._sync()
                    self.fsyncs += 1
                except OSError as exc:
                    self.failed = str(exc)
            for replies, _ in rounds:
                for peer, reply in replies:
                    self._send(peer, reply if self.failed is None
                               else self._failure(self.failed))
            if len(rounds) < len(batch):
                return
