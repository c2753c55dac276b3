"""Folding log lines into the views' states: each event into the state of every view
that routes its type and has not folded it, checking the log's seq and chain on the
way; a long fold a stretch at a time, each stretch's rows written before the next is
held (memory flat in the log's length); and the rows a commit writes."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import msgspec

from uwf.engine.events import FORMAT_VERSION, Envelope, EventCatalog
from uwf.engine.log import Checkpoint, LogLine
from uwf.engine.viewspec import STREAMS, Part, Row, Rows, ViewSpec, ViewStore
from uwf.errors import Corrupt

# How much a long fold (a rebuild, a first read) takes before it writes its states and
# lets them go: memory stays flat in the log's length.
WINDOW = 20_000  # states a stretch holds at most (to a batch's end) ...
STRETCH_LINES = 200_000  # ... or lines it folds (its stream entries)
KNOWN = 20_000  # states a long fold keeps from one stretch to the next
NOTHING: Mapping[Any, Any] = {}


class Seen:
    """The keys a long fold has written into the views it makes anew, as a filter of
    fixed size (memory flat in the log's length): a key it does not hold was never
    written, so its state is None without a read of the views (a new run's first event,
    in every stretch after the first). A key it holds may have been (two keys can share
    a slot): that one is read."""

    __slots__ = ("_bits", "_mask", "views")

    def __init__(self, views: Iterable[str], size: int = 1 << 23) -> None:
        self.views = frozenset(views)
        self._bits = bytearray(size)
        self._mask = size - 1

    def add(self, keys: Iterable[Key]) -> None:
        bits, mask, views = self._bits, self._mask, self.views
        for key in keys:
            if key[0] in views:
                bits[hash(key) & mask] = 1

    def may_hold(self, key: Key) -> bool:
        return key[0] not in self.views or self._bits[hash(key) & self._mask] == 1


# What `Fold.apply` does for a view an event type routes to (`Fold._steps`): its name,
# its projection, its base's name and `apply_over` (or None), whether it is a base.
_Step = tuple[str, "Projection", str | None, Callable[[Any, Envelope, Any], Any] | None,
              bool]
_ABSENT: Any = object()  # a state not at hand (None is a state: the entity is gone)


class Folded(msgspec.Struct):
    """How far a fold written in parts has got: its commit's new checkpoint, known once
    the last part is written (called then)."""

    head: Checkpoint

    def __call__(self) -> Checkpoint:
        return self.head


Key = tuple[str, str]
Progress = Callable[[int, int], None]
# A long fold tells its progress (events folded of the head's seq) every this many lines.
PROGRESS_EVERY = 10_000


CREATED = "store.created"


def refuse_next(envelope: Envelope, seq: int, prev: str, where: str) -> None:
    """Refuse the line a replay reads after (`seq`, `prev`) when it does not follow them
    in the chain, or is a store's creation in a format newer than this uwf's (a replay's
    loop calls this only for a line its own inline test says may be refused)."""
    if envelope.seq != seq + 1:
        raise Corrupt(f"log seq jumps from {seq} to {envelope.seq} in {where}",
                      "run `uwf log verify`")
    if envelope.prev != prev:
        raise Corrupt(f"log chain broken at seq {envelope.seq} in {where}",
                      "run `uwf log verify`")
    if envelope.type == CREATED and envelope.data.format > FORMAT_VERSION:
        raise Corrupt(f"store format {envelope.data.format} is newer than this uwf supports "
                      f"({FORMAT_VERSION})", "upgrade uwf")


class Projection(Protocol):
    """A pure fold of events into entity states (each feature's `projection.py`)."""

    name: ClassVar[str]
    event_types: ClassVar[frozenset[str]]

    def spec(self) -> ViewSpec: ...

    def key(self, event: Envelope) -> str:
        """The entity an event changes."""
        ...

    def apply(self, state: Any, event: Envelope) -> Any:
        """The entity's next state (None removes it); no I/O, clock or randomness."""
        ...

    def row(self, state: Any) -> Row:
        """The stored form: encoded state, column values, search text."""
        ...

    def decode(self, raw: bytes) -> Any: ...


class Fold:
    """The fold of one store's projections into its view store (read back from it where
    a state is not at hand)."""

    def __init__(self, views: ViewStore, projections: Mapping[str, Projection],
                 catalog: EventCatalog) -> None:
        self.views = views
        self.projections = projections
        self.catalog = catalog
        # A projection whose state holds another's (`extends` names it, `apply_over`
        # takes that one's new state for the same key and event): folded after it, from
        # its result, so the state they share is folded once per event.
        self.over: dict[str, tuple[str, Callable[[Any, Envelope, Any], Any]]] = {}
        for projection in projections.values():
            base = getattr(projection, "extends", None)
            if isinstance(base, str) and base in self.projections and base != projection.name:
                self.over[projection.name] = (base, projection.apply_over)  # type: ignore[attr-defined]
        self.bases = {base for base, _ in self.over.values()}
        self.routes: dict[str, list[Projection]] = {}
        for projection in sorted(projections.values(), key=lambda p: p.name in self.over):
            for event_type in projection.event_types:
                self.routes.setdefault(event_type, []).append(projection)
        # The same, as what `apply` does per event type: each view's name, projection,
        # its base's name and `apply_over` (or None), and whether another folds over it.
        self._steps: dict[str, tuple[_Step, ...]] = {
            event_type: tuple(
                (p.name, p, *self.over.get(p.name, (None, None)), p.name in self.bases)
                for p in routed)
            for event_type, routed in self.routes.items()}

    def lines(
        self,
        states: dict[Key, Any],
        streams: list[tuple[str, int]],
        lines: Iterable[LogLine],
        start: Checkpoint,
        since: Mapping[str, int],
        *,
        present: set[str],
        known: Mapping[Key, Any] = NOTHING,
        stretch: int | None = None,
        seen: Seen | None = None,
    ) -> Checkpoint:
        """Fold complete batches after `start` into the views that have not seen them,
        and add their events to `streams` when the stream index has not seen them,
        checking seq and chain; return the new head. `known`: states to take before
        reading a view's; `seen`: the keys written so far to views made anew (one it
        does not hold is not read). With `stretch`, stop at the end of the first batch
        after which `stretch` states are held, or STRETCH_LINES lines were folded (the
        rest of `lines`, an iterator, is left for the next call)."""
        indexed = since[STREAMS]
        index = streams.append
        prev = start.digest
        seq = start.seq
        pending: list[Envelope] = []
        last = start
        apply = self.apply
        decode = self.catalog.decode
        from hashlib import sha256  # `digest`, inlined: this loop is the rebuild's hot path
        for line in lines:
            envelope = decode(line.raw)
            if envelope.seq != seq + 1 or envelope.prev != prev or envelope.type == CREATED:
                refuse_next(envelope, seq, prev, line.where)
            prev = sha256(line.raw).hexdigest()[:32]
            seq = envelope.seq
            k, n = envelope.batch
            if k == n == 1 and not pending:
                apply(states, envelope, since, present, known, seen=seen)
                if seq > indexed:
                    index((envelope.subject, seq))
            else:
                pending.append(envelope)
                if k != n:
                    continue
                for member in pending:
                    apply(states, member, since, present, known, seen=seen)
                    if member.seq > indexed:
                        index((member.subject, member.seq))
                pending.clear()
            last = Checkpoint(seq, prev)
            if stretch is not None and (len(states) >= stretch
                                        or seq - start.seq >= STRETCH_LINES):
                break
        return last

    def parts(self, lines: Iterator[LogLine], since: Mapping[str, int], present: set[str],
               views: Iterable[str], folded: Folded) -> Iterator[Part]:
        """`lines` folded a stretch at a time (WINDOW states, or STRETCH_LINES lines):
        each stretch's rows (of `views`) and stream entries, its states then let go, so
        a fold of any length holds one stretch in memory. A state a later stretch needs
        is taken from the recent ones kept, else read back from the views being written
        (their commit's transaction). `folded.head`: the head so far (the first stretch
        starts after it)."""
        views = list(views)
        # Recent states, written already: most are wanted again soon (a run's events
        # are near each other). At most KNOWN of them, the oldest let go first.
        known: dict[Key, Any] = {}
        # The views made anew by this fold hold only what its stretches wrote.
        seen = Seen(set(self.projections) - present)
        while True:
            states: dict[Key, Any] = {}
            streams: list[tuple[str, int]] = []
            head = self.lines(states, streams, lines, folded.head, since, present=present,
                              known=known, stretch=WINDOW, seen=seen)
            if head == folded.head:
                return
            folded.head = head
            yield self.rows(states, views), streams
            seen.add(states)
            present = set(self.projections)  # every view's table holds the stretches so far
            for key in states:  # the newest at the end
                known.pop(key, None)
            known.update(states)
            for key in list(itertools.islice(known, max(0, len(known) - KNOWN))):
                del known[key]

    @staticmethod
    def until(lines: Iterable[LogLine], seq: int) -> Iterator[LogLine]:
        """`lines` up to the one at `seq`: a line out of order is still given, for the
        fold to name (a segment renamed, say), never skipped."""
        for line in lines:
            yield line
            if line.seq >= seq:
                return

    def apply(self, states: dict[Key, Any], envelope: Envelope, since: Mapping[str, int],
               present: set[str], known: Mapping[Key, Any] = NOTHING, *,
               seen: Seen | None = None) -> None:
        steps = self._steps.get(envelope.type)
        if steps is None:
            return
        seq = envelope.seq
        folded: dict[str | None, tuple[str, Any]] | None = None  # a base's (key, new state)
        for name, projection, over, over_fold, is_base in steps:
            if seq <= since[name]:
                continue  # this view folded it already
            entity = projection.key(envelope)
            key = (name, entity)
            state = states.get(key, _ABSENT)
            if state is _ABSENT:
                state = known.get(key, _ABSENT)  # the stretch before's, already written
                if state is _ABSENT:
                    if name in present and (seen is None or seen.may_hold(key)):
                        raw = self.views.load(name, entity)
                        state = None if raw is None else projection.decode(raw)
                    else:
                        state = None
            if over_fold is not None and folded is not None:
                base = folded.get(over)
                if base is not None and base[0] == entity:
                    states[key] = over_fold(state, envelope, base[1])
                    continue
            states[key] = new = projection.apply(state, envelope)
            if is_base:
                if folded is None:
                    folded = {}
                folded[name] = (entity, new)

    def prefetch(self, envelopes: Sequence[Envelope], read: Mapping[Key, Any] = NOTHING,
                 held: Mapping[Key, Any] = NOTHING) -> dict[Key, Any]:
        """The current states of every entity the events change: those in `read` (read
        already, by the command's decide) or else in `held` (a fold not committed yet:
        uwf/engine/held.py) as they are there, the others read a view at a time (a batch
        of 50,000 new entries is one read per few hundred keys, not 50,000)."""
        keys: dict[str, dict[str, None]] = {}
        states: dict[Key, Any] = {}
        for envelope in envelopes:
            for projection in self.routes.get(envelope.type, ()):
                touched = (projection.name, projection.key(envelope))
                if touched in read:
                    states[touched] = read[touched]
                elif touched in held:
                    states[touched] = held[touched]
                else:
                    keys.setdefault(touched[0], {})[touched[1]] = None
        for view, wanted in keys.items():
            decode = self.projections[view].decode
            if len(wanted) == 1:
                (one,) = wanted
                raw = self.views.load(view, one)
                states[(view, one)] = None if raw is None else decode(raw)
                continue
            found = self.views.load_many(view, list(wanted))
            for key in wanted:
                raw = found.get(key)
                states[(view, key)] = None if raw is None else decode(raw)
        return states

    def stored(self, states: Mapping[Key, Any]) -> dict[Key, Row | None]:
        """The rows the views hold for `states` (the states they hold: `prefetch`'s), so
        a commit need not read them back (`rows`' `before`)."""
        projections = self.projections
        return {key: None if state is None else projections[key[0]].row(state)
                for key, state in states.items()}

    def rows(self, states: Mapping[Key, Any], views: Iterable[str],
             before: Mapping[Key, Row | None] = NOTHING) -> dict[str, dict[str, Row | None]]:
        """The rows of `states` (of `views`), by view; `before`: the rows the views hold
        for some of them (`stored`), handed to the commit."""
        rows: dict[str, dict[str, Row | None]] = {name: {} for name in views
                                                  if name in self.projections}
        for (view, key), state in states.items():
            if view in rows:
                rows[view][key] = None if state is None else self.projections[view].row(state)
        if before:
            known: dict[str, dict[str, Row | None]] = {}
            for (view, key), row in before.items():
                known.setdefault(view, {})[key] = row
            for view, found in known.items():
                if rows.get(view):
                    rows[view] = Rows(rows[view], found)
        return rows

    @staticmethod
    def with_progress(lines: Iterable[LogLine], progress: Progress,
                       total: int) -> Iterator[LogLine]:
        """`lines`, telling `progress` the events folded of the `total` (the head's seq)
        every PROGRESS_EVERY lines and once at the end."""
        seq = 0
        for count, line in enumerate(lines, 1):
            seq = line.seq
            if count % PROGRESS_EVERY == 0:
                progress(seq, total)
            yield line
        progress(max(seq, total), max(seq, total))
