"""The write protocol and view freshness: the log and the views, kept in step.

Order of a write (SPEC §3), each step before the next:
1. take the writers' lock; 2. truncate an unacknowledged tail (`log.repaired`);
3. catch the views up; 4. let the command decide its events against the views
(rejected: nothing is written); 5. one append, fsync; 6. fold the new events
into the views and move their checkpoint in one transaction; 7. release the
lock. The caller prints its result only after `write` returns.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from uwf.engine.clock import Clock, format_ts
from uwf.engine.events import (
    FORMAT_VERSION,
    Envelope,
    NewEvent,
    StoreCreated,
    decode_line,
    digest,
)
from uwf.engine.log import EMPTY_HEAD, EventLog, Head, Line
from uwf.engine.viewstore import Key, ViewStore
from uwf.errors import Corrupt


class Projection(Protocol):
    """A pure fold of events into entity states (implemented in `uwf.projections`)."""

    name: ClassVar[str]
    version: ClassVar[int]
    event_types: ClassVar[frozenset[str]]

    def key(self, event: Envelope) -> str:
        """The entity an event changes."""
        ...

    def apply(self, state: Any, event: Envelope) -> Any:
        """The entity's next state (None removes it); no I/O, clock or randomness."""
        ...

    def encode(self, state: Any) -> bytes: ...

    def decode(self, raw: bytes) -> Any: ...


Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Freshness:
    """How the persisted views stand against the log."""

    status: str  # valid | stale | absent | mismatch
    checkpoint: int
    log_seq: int
    behind: int


class Journal:
    """The log plus the views folded from it, behind one write protocol."""

    def __init__(
        self,
        log: EventLog,
        views: ViewStore,
        projections: Sequence[Projection],
        *,
        clock: Clock,
    ) -> None:
        self.log = log
        self.views = views
        self.projections = {projection.name: projection for projection in projections}
        self.clock = clock
        self._routes: dict[str, list[Projection]] = {}
        for projection in projections:
            for event_type in projection.event_types:
                self._routes.setdefault(event_type, []).append(projection)

    # -- reads -----------------------------------------------------------

    def get(self, view: str, key: str) -> Any:
        """The typed state of one entity, or None (call `refresh` first)."""
        raw = self.views.load(view, key)
        return None if raw is None else self.projections[view].decode(raw)

    def scan(self, view: str) -> Iterator[tuple[str, Any]]:
        decode = self.projections[view].decode
        for key, raw in self.views.scan(view):
            yield key, decode(raw)

    def refresh(self, progress: Progress | None = None) -> Head:
        """Catch the views up with the log; rebuild them if absent; fail on mismatch."""
        for _attempt in range(100):
            checkpoint = self.views.checkpoint()
            if checkpoint is None:
                if not self.log.segments.names():
                    return EMPTY_HEAD  # nothing to fold and nothing to create on disk
                return self.rebuild(progress)
            self._check_match(checkpoint)
            states: dict[Key, Any] = {}
            lines = self.log.read(checkpoint.segment, checkpoint.end)
            head = self._fold(states, lines, checkpoint, self._load)
            if head.seq == checkpoint.seq:
                return checkpoint
            if self.views.commit(self._encode(states), checkpoint, head):
                return head
            # Another process moved the checkpoint first: start again from it.
        raise Corrupt("the views would not take the caught-up state",
                      "run `uwf registry rebuild`")

    def rebuild(self, progress: Progress | None = None) -> Head:
        """Drop the views and replay the whole log into them."""
        states: dict[Key, Any] = {}
        lines: Iterable[Line] = self.log.read()
        if progress is not None:
            lines = self._with_progress(lines, progress)
        head = self._fold(states, lines, EMPTY_HEAD, None)
        rows = [(view, key, raw) for (view, key), raw in self._encode(states).items()
                if raw is not None]
        try:
            # In place, in one transaction: other processes' open connections stay valid.
            self.views.replace(rows, head)
        except Corrupt:
            self.views.drop()  # the file itself is damaged: start a new one
            self.views.replace(rows, head)
        return head

    def replay(self) -> dict[Key, bytes]:
        """Every view row as a full replay would write it, without touching the views."""
        states: dict[Key, Any] = {}
        self._fold(states, self.log.read(), EMPTY_HEAD, None)
        return {key: raw for key, raw in self._encode(states).items() if raw is not None}

    def freshness(self) -> Freshness:
        """valid | stale (K behind) | absent | mismatch | unreadable, changing nothing."""
        head = self.log.head()
        try:
            checkpoint = self.views.checkpoint()
        except Corrupt:
            return Freshness("unreadable", 0, head.seq, head.seq)
        if checkpoint is None:
            # Nothing logged and nothing folded: the (empty) views are exactly current.
            status = "valid" if head.seq == 0 else "absent"
            return Freshness(status, 0, head.seq, head.seq)
        try:
            self._check_match(checkpoint)
        except Corrupt:
            return Freshness("mismatch", checkpoint.seq, head.seq, 0)
        behind = head.seq - checkpoint.seq
        if behind < 0:
            return Freshness("mismatch", checkpoint.seq, head.seq, 0)
        return Freshness("stale" if behind else "valid", checkpoint.seq, head.seq, behind)

    # -- writes ----------------------------------------------------------

    def write(self, decide: Callable[[Journal], Sequence[NewEvent]]) -> list[Envelope]:
        """Run one command under the write protocol; return the events it appended."""
        with self.log.lock():
            checkpoint = self.views.checkpoint()
            scan = self.log.scan_tail()
            current = checkpoint is not None and scan.head is not None and (
                (checkpoint.seq, checkpoint.digest) == (scan.head.seq, scan.head.digest))
            if checkpoint is not None and not current:
                # Views fold only acknowledged lines; if the log lost one of them, the
                # tail is evidence, not a torn write: refuse before recovery cuts it.
                self._check_match(checkpoint)
            _, repairs = self.log.recover(scan)
            # Views current: the last line itself vouches for them.
            head = checkpoint if checkpoint is not None and current else self.refresh()
            if repairs:
                head, _ = self._append(head, [NewEvent("store", item) for item in repairs])
                self.log.segments.set_pending(None)
            events = list(decide(self))
            if not events:
                return []
            _, written = self._append(head, events)
            return written

    def _append(self, head: Head, events: Sequence[NewEvent]) -> tuple[Head, list[Envelope]]:
        from ulid import ULID  # imported here: only writers pay for it

        if head.seq == 0:  # a store's first line says which format wrote it
            events = [NewEvent("store", StoreCreated(format=FORMAT_VERSION)), *events]
        ms = self.clock()
        ids = [str(ULID.from_timestamp(ms)) for _ in events]
        written = self.log.append(head, events, format_ts(ms), ids)
        last = written[-1][1]
        new_head = Head(written[-1][0].seq, digest(last.raw), last.segment, last.start, last.end)
        envelopes = [envelope for envelope, _ in written]
        # The events are durable now: a view that fails to follow is only stale,
        # and the next read catches it up, so the command still succeeds.
        with contextlib.suppress(Exception):
            states: dict[Key, Any] = {}
            for envelope in envelopes:
                self._apply(states, envelope, self._load)
            if not self.views.commit(self._encode(states), head, new_head):
                self.refresh()
        return new_head, envelopes

    # -- folding ---------------------------------------------------------

    def _fold(
        self,
        states: dict[Key, Any],
        lines: Iterable[Line],
        start: Head,
        load: Callable[[str, str], Any] | None,
    ) -> Head:
        """Fold complete batches after `start`, checking seq and chain; return the new head."""
        prev = start.digest
        seq = start.seq
        pending: list[Envelope] = []
        last_line: Line | None = None
        last_seq = start.seq
        last_digest = start.digest
        apply = self._apply
        sha256 = hashlib.sha256  # `digest`, inlined: this loop is the rebuild's hot path
        for line in lines:
            envelope = decode_line(line.raw)
            if envelope.seq != seq + 1:
                raise Corrupt(
                    f"log seq jumps from {seq} to {envelope.seq} in {line.segment}",
                    "run `uwf log verify`",
                )
            if envelope.prev != prev:
                raise Corrupt(
                    f"log chain broken at seq {envelope.seq} in {line.segment}",
                    "run `uwf log verify`",
                )
            if envelope.type == "store.created" and envelope.data.format > FORMAT_VERSION:
                raise Corrupt(
                    f"store format {envelope.data.format} is newer than this uwf supports "
                    f"({FORMAT_VERSION})",
                    "upgrade uwf",
                )
            prev = sha256(line.raw).hexdigest()[:32]
            seq = envelope.seq
            k, n = envelope.batch
            if k == n == 1 and not pending:
                apply(states, envelope, load)
            else:
                pending.append(envelope)
                if k != n:
                    continue
                for member in pending:
                    apply(states, member, load)
                pending.clear()
            last_line, last_seq, last_digest = line, seq, prev
        if last_line is None:
            return start
        return Head(last_seq, last_digest, last_line.segment, last_line.start, last_line.end)

    def _apply(
        self, states: dict[Key, Any], envelope: Envelope, load: Callable[[str, str], Any] | None
    ) -> None:
        for projection in self._routes.get(envelope.type, ()):
            key = (projection.name, projection.key(envelope))
            if key in states:
                state = states[key]
            elif load is not None:
                state = load(*key)
            else:
                state = None
            states[key] = projection.apply(state, envelope)

    def _load(self, view: str, key: str) -> Any:
        return self.get(view, key)

    def _encode(self, states: dict[Key, Any]) -> dict[Key, bytes | None]:
        return {
            key: None if state is None else self.projections[key[0]].encode(state)
            for key, state in states.items()
        }

    def _check_match(self, checkpoint: Head) -> None:
        if checkpoint.seq == 0:
            return
        line = self.log.line_at(checkpoint.segment, checkpoint.start, checkpoint.end)
        if line is None or digest(line) != checkpoint.digest:
            raise Corrupt(
                f"views do not match the log at seq {checkpoint.seq}",
                "run `uwf registry rebuild`",
            )

    def _with_progress(self, lines: Iterable[Line], progress: Progress) -> Iterator[Line]:
        total = sum(self.log.segments.size(name) for name in self.log.segments.names())
        done = 0
        for count, line in enumerate(lines, 1):
            done += line.end - line.start
            if count % 50_000 == 0:
                progress(done, total)
            yield line
        progress(total, total)
