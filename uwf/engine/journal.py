"""The write protocol and view freshness: the log and the views, kept in step.

Order of a write (SPEC §3), each step before the next:
1. enter the log's exclusive section; 2. cut an unacknowledged tail
(`log.repaired`); 3. catch the views up; 4. refuse (`Conflict`) if a subject the
command stated a version for has moved, else let the command decide its events
against a read-only view of the state (rejected: nothing is written); 5. one
append; 6. fold the new events into the views and the stream index and move
their checkpoints in one transaction; 7. leave the section, and wait for the
append's fsync (the file log lets the lock go first: uwf/engine/filelog.py).
`write` returns the command's result only after its events are durable.

Every view, and the stream index (each event's subject and seq: `read_subject`,
uwf/engine/streams.py), has its own checkpoint: catch-up folds each event only
into those that have not seen it, so a new or changed view is built alone. Every
move of a checkpoint is a compare-and-set, so no fold (a reader's catch-up, a
reader's rebuild of absent views) can move a view backwards, and a writer,
which catches up inside the exclusive section, decides on views at the head.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import msgspec

from uwf.engine.bulkfold import PlannedFold
from uwf.engine.clock import Clock, Stamps
from uwf.engine.events import (
    FORMAT_VERSION,
    CasNode,
    Envelope,
    EventCatalog,
    EventData,
    NewEvent,
    StoreCreated,
    digest,
)
from uwf.engine.fold import NOTHING, Folded, Key, Progress, Projection
from uwf.engine.held import STREAK, Held, commit_held, entered, settle, versions
from uwf.engine.log import GENESIS, Checkpoint, EventLog, LogLine, LogSession
from uwf.engine.readviews import Views as Views  # noqa: PLC0414 (re-exported)
from uwf.engine.rounds import Decide, Memory, envelopes, write_round
from uwf.engine.snapshot import Snapshot, Snapshots, usable
from uwf.engine.streams import Streams
from uwf.engine.viewspec import STREAMS, Row, ViewStore
from uwf.errors import Corrupt, StoreUnavailable, UsageError, UwfError
from uwf.redact import Redact, redact_value

if TYPE_CHECKING:
    from uwf.engine.freshness import Freshness
    from uwf.engine.spelled import Speller

T = TypeVar("T")
REOPENS = 10  # tries of a catch-up whose views cannot be opened or written (`refresh`)


class Rebuild(msgspec.Struct, frozen=True):
    """What a rebuild did: the views' new head; the checkpoint of the snapshot it
    restored (then only the log after it was folded), or why it refused the one kept."""

    head: Checkpoint
    restored: Checkpoint | None = None
    refused: str | None = None


class FirstTry(Protocol):
    """A way to run a write before (instead of) the exclusive section: its result in a
    1-tuple, or None to run it the ordinary way (uwf/engine/pgwrite.py)."""

    def write(self, journal: Journal, decide: Callable[[Views, int], Outcome[Any]],
              expected: Mapping[str, int] | None, nodes: Sequence[tuple[str, bytes]], *,
              sync: bool) -> tuple[Any] | None: ...


class Outcome(msgspec.Struct, Generic[T], frozen=True):
    """What a command decided: the events to append and the result to hand back, or
    `then`, which reads the result from the views just after the events are folded
    (still inside the exclusive section: no other write can land in between); `spell`,
    the events' lines and rows as the command made them (uwf/engine/spelled.py)."""

    events: Sequence[NewEvent] = ()
    result: T = None  # type: ignore[assignment]
    then: Callable[[Views], T] | None = None
    spell: Speller | None = None


class Journal:
    """The log plus the views folded from it, behind one write protocol."""

    def __init__(
        self,
        log: EventLog,
        views: ViewStore,
        projections: Sequence[Projection],
        catalog: EventCatalog,
        *,
        clock: Clock,
        redact: Redact | None = None,
        snapshots: Snapshots | None = None,
        first: FirstTry | None = None,
        hold_writes: int = 0,
    ) -> None:
        self.log = log
        self.first = first  # a way a write tries before the exclusive section (PostgreSQL)
        self.views = views
        self.snapshots = snapshots  # None: this view store keeps none (memory, PostgreSQL)
        self.projections = {projection.name: projection for projection in projections}
        self.clock = clock
        self.redact = redact
        # What has a checkpoint: every view, and the stream index beside them.
        self._folded = (*self.projections, STREAMS)
        self._names = set(self.projections)
        self._unfolded = dict.fromkeys(self.projections, 0)  # a write folds into every view
        self.stamps = Stamps()  # the events' `ts`, a second spelled once
        self.fold = PlannedFold(views, self.projections, catalog)
        self._local = threading.local()  # `decide` running in this thread
        self._streams = Streams(log, views, catalog.decode)
        # Writes' folds not committed yet (uwf/engine/held.py): at most `hold_writes`
        # writes, while the log's tail stays this journal's own last write.
        self.hold_writes = hold_writes
        self._held: Held | None = None
        self._held_lock = threading.Lock()

    @property
    def catalog(self) -> EventCatalog:
        """How lines decode (the fold's: one catalogue, which a test may swap)."""
        return self.fold.catalog

    @catalog.setter
    def catalog(self, catalog: EventCatalog) -> None:
        self.fold.catalog = catalog

    # -- reads -----------------------------------------------------------

    def reader(self, head: Checkpoint = GENESIS) -> Views:
        """The persisted views as they are (call `refresh` first to catch them up), with
        the states of this process's held fold over them (held.py: a query, a count or
        a scan commits it first), while it is current (the log and the views as it left
        them; else the views alone)."""
        held = self._held
        if held is not None and not held.current(self.log.head(), self.views.checkpoints(),
                                                 len(self._folded)):
            held = None
        return Views(self.views, self.projections, head, held=held, settle=self.flush)

    def take_held(self) -> Held | None:
        """The held fold, now the caller's (held.py)."""
        with self._held_lock:
            held, self._held = self._held, None
        return held

    def flush(self) -> None:
        """Commit this process's held fold (held.py), if any: the views then hold every
        write this journal made. A fold the views no longer take is let go (they moved:
        whoever reads next folds the log)."""
        held = self.take_held()
        if held is None or (held.writes and not commit_held(self, held)):
            return
        with self._held_lock:  # still this journal's last write, unless one came since
            if self._held is None:
                self._held = held

    def read_subject(self, subject: str, after: int = 0, *, reverse: bool = False
                     ) -> Iterator[Envelope]:
        """`subject`'s events with seq > `after`, oldest first (newest first with
        `reverse`), found through the stream index (uwf/engine/streams.py)."""
        return self._streams.read(self._indexed(), subject, after, reverse=reverse)

    def version(self, subject: str) -> int:
        """The seq of `subject`'s last event (0: none): what a write may expect of it."""
        return self._streams.version(self._indexed(), subject)

    def _indexed(self) -> Checkpoint:
        """The stream index's checkpoint, matched with the log (built first if absent,
        as any read builds absent views)."""
        self.flush()
        checkpoint = self.views.checkpoints().get(STREAMS)
        if checkpoint is None:
            self.refresh()
            checkpoint = self.views.checkpoints().get(STREAMS, GENESIS)
        self._check_match(checkpoint)
        return checkpoint

    def refresh(self, progress: Progress | None = None) -> Checkpoint:
        """Catch every view up with the log (building absent ones); fail on mismatch.

        The views are a cache anyone may delete (`rm -r views/`): one that cannot be
        opened or written (deleted under this process, say) is let go and opened again,
        a few times, before the error is the disk's."""
        self.flush()
        for attempt in range(REOPENS):
            try:
                return self._refresh(progress)
            except StoreUnavailable:
                if attempt == REOPENS - 1:
                    raise
                self.views.let_go()
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def _refresh(self, progress: Progress | None) -> Checkpoint:
        restored = False
        for _attempt in range(100):
            checkpoints = self.views.checkpoints()
            for checkpoint in set(checkpoints.values()):
                self._check_match(checkpoint)
            since = {name: checkpoints[name].seq if name in checkpoints else 0
                     for name in self._folded}
            target = self.log.head()  # folded to here: lines appended since wait their turn
            if target.seq == 0:
                return GENESIS  # nothing logged: nothing to fold, nothing to create
            if not checkpoints and not restored:
                restored = True  # no views file: a snapshot the log holds, then its tail
                snapshot, _refused = usable(self.snapshots, self._check_match)
                if snapshot is not None and self._restore(snapshot, in_place=False):
                    continue
            behind = {name: checkpoints.get(name) for name in self._folded
                      if checkpoints.get(name) != target}
            if not behind:
                return target
            low = min(since.values())
            start = GENESIS if low == 0 else next(
                cp for cp in checkpoints.values() if cp.seq == low)
            lines: Iterable[LogLine] = self.fold.until(self.log.read(low), target.seq)
            if low == 0 and progress is not None:
                lines = self.fold.with_progress(lines, progress, target.seq)
            folded = Folded(start)
            parts = self.fold.parts(iter(lines), since, set(checkpoints), behind, folded)
            changes, streams = next(parts, ({}, []))
            if self.views.commit(changes, behind, folded, streams=streams,
                                 more=parts):
                return folded.head
            # Another process moved a checkpoint first: start again from the new ones.
        raise Corrupt("the views would not take the caught-up state", "run `uwf registry rebuild`")

    def rebuild(self, progress: Progress | None = None) -> Checkpoint:
        """`rebuild_views`' new head."""
        return self.rebuild_views(progress).head

    def rebuild_views(self, progress: Progress | None = None, *,
                      snapshot: bool = True) -> Rebuild:
        """New views, inside the writers' exclusive section (so no write lands between
        the replay and its commit): the kept snapshot restored and the log after it
        folded, when the log still holds its checkpoint (and `snapshot`); else the whole
        log replayed."""
        self._not_deciding("rebuild the views")
        with self.log.exclusive():
            self.take_held()  # its fold starts where the views will no longer be
            found, refused = usable(self.snapshots, self._check_match) if snapshot else (None, None)
            if found is not None and self._restore(found, in_place=True):
                return Rebuild(self.refresh(progress), restored=found.checkpoint)
            return Rebuild(self._replay_all(progress), refused=refused)

    def snapshot(self) -> Snapshot:
        """Catch the views up with the log and keep a snapshot of them (SPEC §11)."""
        if self.snapshots is None:
            raise UsageError("this store's views keep no snapshots (only a folder store's "
                             "SQLite views do)", "nothing to do: its views are rebuilt from "
                             "the log")
        self.refresh()
        return self.snapshots.take()

    def _restore(self, snapshot: Snapshot, *, in_place: bool) -> bool:
        assert self.snapshots is not None
        try:
            return self.snapshots.restore(snapshot, in_place=in_place)
        except Corrupt:
            if not in_place:
                raise
            # The views file itself is damaged: start a new one from the snapshot.
            self.views.drop()
            return self.snapshots.restore(snapshot, in_place=False)

    def _replay_all(self, progress: Progress | None) -> Checkpoint:
        """Replay the whole log into new views (inside the exclusive section)."""
        for _attempt in range(100):
            lines: Iterable[LogLine] = self.log.read()
            if progress is not None:
                lines = self.fold.with_progress(lines, progress, self.log.head().seq)
            folded = Folded(GENESIS)
            parts = self.fold.parts(iter(lines), dict.fromkeys(self._folded, 0), set(),
                                self._folded, folded)
            changes, streams = next(parts, ({}, []))
            try:
                checkpoints = self.views.checkpoints()
                expected = {name: checkpoints.get(name) for name in self._folded}
                if self.views.commit(changes, expected, folded,
                                     reset=True, streams=streams, more=parts):
                    return folded.head
            except Corrupt:
                # The file itself is damaged (never merely busy: that is StoreBusy):
                # start a new one, and commit into it on the next round.
                self.views.drop()
        raise Corrupt("the views would not take the rebuilt state",
                      "check the views folder, then retry")

    def replay(self, progress: Progress | None = None) -> dict[Key, Row]:
        """Every view row as a full replay would write it, without touching the views;
        `progress` is told the events replayed of the log's head."""
        states: dict[Key, Any] = {}
        since = {**dict.fromkeys(self.projections, 0), STREAMS: sys.maxsize}  # rows only
        lines: Iterable[LogLine] = self.log.read()
        if progress is not None:
            lines = self.fold.with_progress(lines, progress, self.log.head().seq)
        self.fold.lines(states, [], lines, GENESIS, since, present=set())
        return {key: self.projections[key[0]].row(state)
                for key, state in states.items() if state is not None}

    def freshness(self) -> Freshness:
        """Each view valid | stale | absent | mismatch | unreadable, changing nothing
        (but for this process's held fold, committed first)."""
        from uwf.engine.freshness import measure  # a read uses none of it
        self.flush()
        return measure(self.log, self.views, list(self.projections), self._check_match)

    # -- writes ----------------------------------------------------------

    def write(self, decide: Callable[[Views], Outcome[T]], *,
              expected: Mapping[str, int] | None = None,
              nodes: Sequence[tuple[str, bytes]] = (), sync: bool = True,
              carry: bool = False) -> T:
        """Run one command under the write protocol; its result once its events are durable.

        `decide` gets read-only views at the log's head; raising rejects the command
        and nothing is written. `expected` gives the version (`version`) of each
        subject the command decided on: when one has moved, nothing is written and
        `Conflict` is raised, before `decide` runs. `nodes`: the CAS nodes the events
        name that the store lacks, as (hash, compact JSON) (`uwf.cas.records.
        PendingBlobs`), gathered before the section: appended as `cas.node` records
        ahead of the events, in the same write, when the command writes any event.
        `sync=False`: not waited for (no fsync of its own): the next durable write
        covers it; only for what acknowledges nothing (a step's start). `carry`: this
        write may decide on a held fold (held.py; a journal that holds writes,
        `hold_writes`, lets every write carry it).
        """
        return self.write_at(lambda views, _now: decide(views), expected=expected,
                             nodes=nodes, sync=sync, carry=carry)

    def write_at(self, decide: Callable[[Views, int], Outcome[T]], *,
                 expected: Mapping[str, int] | None = None,
                 nodes: Sequence[tuple[str, bytes]] = (), sync: bool = True,
                 hold: bool = False, carry: bool = False) -> T:
        """`write`, with `decide` also given the instant (epoch ms) the command happens
        at: the clock read inside the exclusive section, after every earlier write, and
        the `ts` of the events it appends. A command that judges time (a lease's expiry)
        must judge it by this instant: one read before the section may be long past
        when the section is entered (a stalled process), and another writer may have
        acted on the later time in between. `hold`: the fold held (not committed)
        whatever came before, for the next write to commit (uwf/engine/held.py).
        """
        self._not_deciding("write")
        if self.first is not None:
            done = self.first.write(self, decide, expected, nodes, sync=sync)
            if done is not None:
                return done[0]  # type: ignore[no-any-return]
        with self.log.exclusive() as session:
            head, found = entered(self, session)
            held = found if found is not None else Held(head, head)
            if found is not None:  # this journal's last write is the log's tail (held.py)
                held.streak += 1
            if held.writes and not self.hold_writes and (expected or not carry):
                settle(self, held)  # only a step's result rides on its start here
            now = self.clock()
            self._local.deciding = True
            read: dict[Key, Any] = {}  # the states decide read, as of `head`
            try:
                if expected:  # nothing can move now: a version seen here is the log's
                    versions(self, held, expected)
                outcome = decide(Views(self.views, self.projections, head, read, held=held,
                                       settle=lambda: settle(self, held),
                                       remember=self.hold_writes > 0),
                                 now)
            except BaseException:
                self._held = held  # nothing written: still so
                raise
            finally:
                self._local.deciding = False
            folded: dict[Key, Any] | None = None
            kept: Held | None = held
            if outcome.events:
                if not sync:
                    session.defer_sync()
                else:  # the pages sent to the disk as the lines are written (filelog.py)
                    early = getattr(session, "sync_early", None)
                    if early is not None:
                        early()
                events = [*(NewEvent(f"cas/{hash_}", CasNode(hash_, msgspec.Raw(data)))
                            for hash_, data in nodes), *outcome.events] if nodes else \
                    outcome.events
                spelled = (outcome.spell(head, now)
                           if outcome.spell and head.seq and not held.writes else None)
                if spelled is None or nodes:
                    keep = hold or (held.streak >= STREAK
                                    and held.writes + 1 < self.hold_writes)
                    head, folded = self._append(session, head, events, now, read, held=held,
                                                keep=keep)
                else:  # as `_append` would: no states at hand after it
                    head = spelled.append(session, self.views,
                                          dict.fromkeys(self._folded, head), self.refresh)
                    kept = held = Held(head, head)  # the views are at it
                if folded is None:
                    kept = None
                    if outcome.then is not None:
                        head = self.refresh()  # the views did not follow: catch them up
            else:
                folded = read  # nothing moved: what decide read is still so
            self._held = kept
            if outcome.then is not None:
                return outcome.then(Views(self.views, self.projections, head, folded,
                                          held=kept, settle=lambda: settle(self, held)))
            return outcome.result

    def write_round(self, decides: Sequence[Decide], memory: Memory, *,
                    defer: bool = False) -> list[Any]:
        """Many commands' `write_at` as one unit: each one's result or refusal (an
        `UwfError`), their lines in one append, the views in one commit (or, with
        `defer`, a later one: `rounds.flush`), no fsync (the caller's): rounds.py."""
        return write_round(self, decides, memory, defer=defer)

    def _not_deciding(self, what: str) -> None:
        if getattr(self._local, "deciding", False):
            raise RuntimeError(f"a command's decide may not {what}: it is read-only")

    def _append(self, session: LogSession, head: Checkpoint, events: Sequence[NewEvent],
                ms: int, read: Mapping[Key, Any] = NOTHING, *, held: Held | None = None,
                keep: bool = False) -> tuple[Checkpoint, dict[Key, Any] | None]:
        """Append the events durably, stamped `ms`; the new head, and the states the
        views now hold of what was read (`read`: states as of `head`) and folded, or None
        when the views did not follow. `held`: this journal's fold not committed yet, at
        `head` (held.py): the events' fold is added to it, and, unless `keep`, committed
        with it (then it is empty at the new head)."""
        if head.seq == 0:  # a store's first line says which format wrote it
            events = [NewEvent("store", StoreCreated(format=FORMAT_VERSION)), *events]
        envelopes, raws = self.envelopes(head, events, ms)
        new_head = session.append(raws)
        # The events are in the log now (durable once the section ends): a view that
        # fails to follow is only stale, and the next read catches it up, so the
        # command still succeeds.
        if held is None:
            held = Held(head, head)
        try:
            states = self.fold.prefetch(envelopes, read, held.states)
            # What the views hold of each entity the events change, before the fold
            # makes new states of them (a held fold knows its own): none read back.
            before = self.fold.stored(held.unheld(states) if held.writes else states)
            for envelope in envelopes:
                self.fold.apply(states, envelope, self._unfolded, self._names, read)
            held.add(new_head, states, before,
                     [(envelope.subject, envelope.seq) for envelope in envelopes])
            if not keep and not commit_held(self, held):
                self.refresh()
                return new_head, None
        except UwfError:
            return new_head, None
        return new_head, {**read, **states}

    def envelopes(self, head: Checkpoint, events: Sequence[NewEvent], ms: int
                  ) -> tuple[list[Envelope], list[bytes]]:
        """The events as the lines that follow `head`, stamped `ms`: their envelopes
        and their bytes, chained (the last line's digest, the new head's, is not
        computed here: the caller's append or checkpoint does, once)."""
        made, raws, _ = envelopes(self, head, events, ms, last_digest=False)
        return made, raws

    def _redacted(self, data: EventData) -> EventData:
        # A node record is as its hash says: a payload is masked before it is hashed
        # (`Cas.put`), never after.
        if self.redact is None or isinstance(data, CasNode):
            return data
        plain = msgspec.to_builtins(data)
        hidden = redact_value(plain, self.redact)
        return data if hidden == plain else msgspec.convert(hidden, type(data))

    def _check_match(self, checkpoint: Checkpoint) -> None:
        if checkpoint.seq == 0:
            return
        line = self.log.line(checkpoint.seq)
        if line is None or digest(line) != checkpoint.digest:
            raise Corrupt(f"views do not match the log at seq {checkpoint.seq}",
                          "run `uwf registry rebuild`")
