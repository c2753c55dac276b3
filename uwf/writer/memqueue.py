"""The queue as the resident writer holds it: every entry and the policy as Python
values, with the selections a lease reads kept as indexes (each pool's ready entries
in queue order; each session's leases and their expiry), so a round decides a lease,
a renewal, a completion or a release without reading SQLite.

It is a cache of the views at a head (`head`): read whole from the views when the
writer starts (or after anything it cannot account for), and, when the log moved
under it (a process that does not use the writer wrote under the lock), only the
entities the new lines changed are read again from the views, caught up by then.
Reads it cannot answer from what it holds raise `NotHeld` (a bug of the caller: the
writer serves only the commands whose reads are listed here).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from uwf.engine.fold import Key
from uwf.engine.journal import Journal, Views
from uwf.engine.log import Checkpoint
from uwf.engine.rounds import MISSING, Unsaved
from uwf.engine.viewspec import ColumnValue, Query
from uwf.errors import UwfError
from uwf.queue.projection import DEFAULT_POOL, POLICY_KEY, QUEUE_ORDER, QueueEntry

HELD = ("queue", "sched")
_STATUS, _SESSION, _EXPIRES, _READY_POOL = 0, 3, 6, 8  # the queue view's columns
_NOT_LEASED: Any = object()  # (a leased entry's session may be None: no session)


class NotHeld(UwfError):
    """A read the writer's memory does not answer."""


class QueueMemory:
    """The queue view and the policy, in memory, valid at `head` (see the module)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.head: Checkpoint | None = None
        self.unsaved: Unsaved | None = None  # rows the views have not been given yet
        self._columns = journal.projections["queue"].column_values  # type: ignore[attr-defined]
        self.entries: dict[str, QueueEntry] = {}
        self.policy: Any = None
        self.ready: dict[str, list[tuple[int, str, str]]] = {}  # pool -> queue order
        self.leased: dict[ColumnValue, dict[str, ColumnValue]] = {}  # session -> expiry
        # Where `_put` placed each entry: its ready pool and queue-order tuple (None:
        # not ready), its session when leased (else _NOT_LEASED), for `_drop`.
        self._placed: dict[str, tuple[Any, Any, Any]] = {}
        self.extra: dict[Key, Any] = {}  # other views' states the round changed
        self.reloads = 0  # whole reads from the views (a test looks)
        self._views: MemoryViews | None = None  # one for every round, moved to its head

    # -- kept in step with the log -------------------------------------------------

    def catch_up(self, journal: Journal, head: Checkpoint) -> None:
        held = self.head
        if held is None or held.seq > head.seq or not self._logged(held):
            self._load()
        else:
            self._reread(held, head)
        self.head = head

    def forget(self) -> None:
        self.head = None
        self.unsaved = None
        self.extra.clear()

    def settle(self) -> None:
        self.extra.clear()

    def _logged(self, at: Checkpoint) -> bool:
        from uwf.engine.events import digest

        line = self.journal.log.line(at.seq) if at.seq else None
        return at.seq == 0 or (line is not None and digest(line) == at.digest)

    def _load(self) -> None:
        self.reloads += 1
        self.entries.clear()
        self._placed.clear()
        self.ready.clear()
        self.leased.clear()
        self.extra.clear()
        reader = self.journal.reader()
        for key, entry in reader.scan("queue"):
            self._put(key, entry)
        self.policy = reader.get("sched", POLICY_KEY)

    def _reread(self, held: Checkpoint, head: Checkpoint) -> None:
        """Read again from the views each entity the lines after `held` changed."""
        touched: dict[str, dict[str, None]] = {}
        routes = self.journal.fold.routes
        decode = self.journal.catalog.decode
        for line in self.journal.log.read(held.seq):
            if line.seq > head.seq:
                break
            envelope = decode(line.raw)
            for projection in routes.get(envelope.type, ()):
                if projection.name in HELD:
                    touched.setdefault(projection.name, {})[projection.key(envelope)] = None
        reader = self.journal.reader()
        for key in touched.get("queue", {}):
            self._drop(key)
            entry = reader.get("queue", key)
            if entry is not None:
                self._put(key, entry)
        if "sched" in touched:
            self.policy = reader.get("sched", POLICY_KEY)

    # -- states --------------------------------------------------------------------

    def state(self, key: Key) -> Any:
        view, entity = key
        if view == "queue":
            return self.entries.get(entity)
        if view == "sched":
            return self.policy if entity == POLICY_KEY else None
        return self.extra.get(key, MISSING)

    def change(self, states: Mapping[Key, Any]) -> None:
        for (view, entity), state in states.items():
            if view == "queue":
                self._drop(entity)
                if state is not None:
                    self._put(entity, state)
            elif view == "sched" and entity == POLICY_KEY:
                self.policy = state
            else:
                self.extra[(view, entity)] = state

    def _put(self, key: str, entry: QueueEntry) -> None:
        self.entries[key] = entry
        columns = self._columns(entry)
        pool = columns[_READY_POOL]
        order = None
        if pool is not None:
            order = (entry.priority, entry.enqueued_at, key)
            bisect.insort(self.ready.setdefault(pool, []), order)
        session = _NOT_LEASED
        if columns[_STATUS] == "leased":
            session = columns[_SESSION]
            self.leased.setdefault(session, {})[key] = columns[_EXPIRES]
        self._placed[key] = (pool, order, session)

    def _drop(self, key: str) -> None:
        """`key` out of the entries and out of the indexes `_put` placed it in (as it
        noted them: no column of the entry computed again)."""
        if self.entries.pop(key, None) is None:
            return
        pool, order, session = self._placed.pop(key)
        if pool is not None:
            ready = self.ready[pool]
            del ready[bisect.bisect_left(ready, order)]
            if not ready:
                del self.ready[pool]
        if session is not _NOT_LEASED:
            leases = self.leased[session]
            del leases[key]
            if not leases:
                del self.leased[session]

    def views(self, head: Checkpoint) -> Views:
        views = self._views
        if views is None:
            views = self._views = MemoryViews(self, head)
        views.head = head
        return views

    # -- the reads a lease makes ---------------------------------------------------

    def active(self, now: int, *session: ColumnValue) -> int:
        """Leases expiring after `now` (of the pool of `session` when given, or of all)."""
        pools: Iterable[dict[str, ColumnValue]] = (
            (self.leased.get(session[0], {}),) if session else self.leased.values())
        return sum(1 for leases in pools for expires in leases.values()
                   if isinstance(expires, int) and expires > now)

    def in_order(self, pool: str | None) -> Iterator[tuple[int, str, str]]:
        """Ready entries in queue order: of one pool, or of every pool (None)."""
        if pool is not None:
            return iter(self.ready.get(pool, ()))
        return heapq.merge(*self.ready.values())


_LEASED = ("status", "=", "leased")


class MemoryViews(Views):
    """`Views` over a `QueueMemory`: the reads the served commands make."""

    def __init__(self, memory: QueueMemory, head: Checkpoint) -> None:
        journal = memory.journal
        super().__init__(journal.views, journal.projections, head)
        self._memory = memory

    def get(self, view: str, key: str) -> Any:
        state = self._memory.state((view, key))
        if state is MISSING:
            return super().get(view, key)  # a view the round has not changed
        return state

    def absent(self, view: str, keys: Iterable[str]) -> None:
        return None

    def count(self, query: Query) -> int:
        where = query.where
        if query.view == "queue" and query.text is None and where and where[0] == _LEASED:
            rest = where[1:]
            if len(rest) == 1 and rest[0][:2] == ("lease_expires", ">"):
                return self._memory.active(rest[0][2])
            if (len(rest) == 2 and rest[0][:2] == ("session", "=")
                    and rest[1][:2] == ("lease_expires", ">")):
                return self._memory.active(rest[1][2], rest[0][2])
        raise NotHeld(f"the writer's memory cannot count {query}", "report this as a bug")

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        if view == "queue" and column == "ready_pool":  # the pools with ready entries
            return {pool: len(order) for pool, order in self._memory.ready.items()}
        raise NotHeld(f"the writer's memory keeps no counts of {view}.{column}",
                      "report this as a bug")

    def query(self, query: Query) -> list[Any]:
        where = query.where
        if (query.view == "queue" and query.text is None and query.order == QUEUE_ORDER
                and len(where) == 1 and where[0][1] == "="):
            column, _, value = where[0]
            pool = value if column == "ready_pool" else None if (
                column == "status" and value == "ready") else MISSING
            if pool is not MISSING:
                stop = None if query.limit is None else query.offset + query.limit
                entries = self._memory.entries
                return [entries[key] for _, _, key in itertools.islice(
                    self._memory.in_order(pool), query.offset, stop)]
        raise NotHeld(f"the writer's memory cannot answer {query}", "report this as a bug")

    def scan(self, view: str) -> Iterator[tuple[str, Any]]:
        raise NotHeld(f"the writer's memory does not scan {view}", "report this as a bug")


__all__ = ["DEFAULT_POOL", "HELD", "MemoryViews", "NotHeld", "QueueMemory"]
