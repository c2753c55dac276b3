"""An idle worker woken by the log instead of its poll (issue 20: LISTEN/NOTIFY).

On a store whose log tells its readers of new lines (PostgreSQL), a thread waits
on the log and sets `woken` when an event that can make an entry eligible lands:
an entry added, released, reclaimed or reset, a lease ended (a slot under a
ceiling frees), a policy changed. The worker's loop then leases at once rather
than at its next poll. A lease that expires writes nothing, so the poll stays.
On a folder store, whose files tell no one, there is no such thread: the poll it
has always had is what wakes it.
"""

from __future__ import annotations

import threading

import msgspec

from uwf.errors import UwfError
from uwf.store import Store

# The events after which a lease may find work that it did not find before.
WAKES = frozenset({
    "queue.added", "queue.released", "queue.reclaimed", "queue.reset", "queue.completed",
    "queue.cancelled", "queue.status_set", "queue.received", "sched.policy_set",
})
WAIT_SECONDS = 1.0  # each wait on the log; the stop flag is looked at between them


class _Typed(msgspec.Struct):
    type: str


class Waker:
    """Sets `woken` when the log gains an event in WAKES, until `stop` is set."""

    def __init__(self, store: Store, stop: threading.Event) -> None:
        self.store = store
        self.stop = stop
        self.woken = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="uwf-worker-waker",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self.stop.set()
        self._thread.join()

    def _watch(self) -> None:
        log = self.store.log
        decode = msgspec.json.Decoder(_Typed).decode
        seen: int | None = None
        while not self.stop.is_set():
            try:
                if seen is None:
                    seen = log.head().seq
                if not log.wait(seen, WAIT_SECONDS):
                    continue
                for line in log.read(seen):
                    seen = line.seq
                    if decode(line.raw).type in WAKES:
                        self.woken.set()
            except (UwfError, msgspec.DecodeError):
                # The server is away, or a line is damaged (`log verify` names it): the
                # poll still wakes the worker; look again after a wait.
                self.stop.wait(WAIT_SECONDS)
