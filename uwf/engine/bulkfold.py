"""A full replay's fold (a rebuild, a first read with no views): every view made anew,
folded in memory as plain states, its rows written once, in parts only as memory needs.

Where `Fold.apply` (uwf/engine/fold.py) serves every fold (a command's few events, a
catch-up of some views, a view built alone) and asks per event and per view what to do,
this fold knows: every view starts empty and takes every event. So it plans, once per
event type, the views it goes to with each one's key and fold function (a projection
may give one specialised for the type: `planned`; the `runs` view folds over the
`threads` view's result: `extends`), and per event does only those calls, into one dict
of states per view. No SQL runs per event: the states are written when the fold ends,
as one part per view (its table made without secondary indexes, which the commit makes
after the load: uwf/engine/viewrows.py). Memory stays flat in the log's length: when the
states held pass BOUND, the oldest held (first folded) of each view are written, down
to KEEP, as a part of their own; a state wanted again after it was written is read back
from the views being written (a filter of fixed size says which keys may have been),
and its row is then updated, not inserted.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import attrgetter
from typing import Any

from uwf.engine import fold
from uwf.engine.events import Envelope, EventCatalog
from uwf.engine.fold import CREATED, Fold, Folded, Projection, refuse_next
from uwf.engine.gcpause import paused
from uwf.engine.log import Checkpoint, LogLine
from uwf.engine.projection import StructProjection
from uwf.engine.viewspec import NewRows, Part, Row, Rows, ViewStore, ascii_lower

BOUND = 30_000  # states held, all views together, before the oldest are written ...
KEEP = 10_000  # ... down to this many
CHECK_EVERY = 1_024  # events between two looks at how many states are held
SEEN_BITS = 26  # the filter of keys written: 2 ** 26 bits (8 MiB), two of them a key

Apply = Callable[[Any, Envelope], Any]
Over = Callable[[Any, Envelope, Any], Any]
# What an event of one type does to one view: the view's states, its name, the key
# function (None: the same as the view's before, whose key is taken), its fold, its fold
# over a base's new state (and that base's name), whether it is itself a base, and the
# view's salt of its keys' hashes in `_Written`.
_Step = tuple[dict[str, Any], str, Callable[[Envelope], str] | None, Apply, Over | None,
              str | None, bool, int]
_ABSENT: Any = object()


def planned(projection: Projection, event_type: str) -> Apply:
    """The projection's fold for events of `event_type`: its `planned` one when it gives
    one (specialised for the type, the same states as `apply`), else `apply`."""
    plan = getattr(projection, "planned", None)
    made: Apply | None = None if plan is None else plan(event_type)
    return projection.apply if made is None else made


class _Written:
    """The keys a replay's parts wrote, as a filter of fixed size (memory flat in the
    log's length): two bits of 2 ** SEEN_BITS a key, taken from its hash. A key whose
    bits are not both set was never written, so its state is None without a read of the
    views (every new key but about 1 in 2,000 at 720,000 keys written; a byte a key, as
    `fold.Seen` keeps, wrongly holds 1 in 12, each then read back from the views in
    vain: 28,000 reads at 1.04M events)."""

    __slots__ = ("bits",)

    def __init__(self) -> None:
        self.bits = bytearray(1 << (SEEN_BITS - 3))

    def add(self, hashed: int) -> None:
        bits, mask = self.bits, (1 << SEEN_BITS) - 1
        low, high = hashed & mask, (hashed >> SEEN_BITS) & mask
        bits[low >> 3] |= 1 << (low & 7)
        bits[high >> 3] |= 1 << (high & 7)

    def add_rows(self, rows: Iterable[tuple[Any, ...]], salt: int) -> None:
        """`add` of each row's key (its first field), offset by `salt`."""
        bits, mask, shift = self.bits, (1 << SEEN_BITS) - 1, SEEN_BITS
        for row in rows:
            hashed = hash(row[0]) + salt
            low, high = hashed & mask, (hashed >> shift) & mask
            bits[low >> 3] |= 1 << (low & 7)
            bits[high >> 3] |= 1 << (high & 7)

    def may_hold(self, hashed: int) -> bool:
        """Whether a key (its hash, offset) may have been written (`BulkFold._parts`
        looks the same way, inlined: no call a new key)."""
        bits, mask = self.bits, (1 << SEEN_BITS) - 1
        low, high = hashed & mask, (hashed >> SEEN_BITS) & mask
        return bool(bits[low >> 3] >> (low & 7) & 1 and bits[high >> 3] >> (high & 7) & 1)


def _key_function(projection: Projection) -> object:
    """The function behind a projection's `key`: two views with the same one key an
    event alike."""
    return getattr(projection.key, "__func__", projection.key)


def inserted(projection: Projection) -> Callable[[str, Any], tuple[Any, ...]]:
    """A state's row as the table takes it, (key, value, *columns, text as stored: ASCII
    lowercased): `projection.row`'s parts, spelled into one tuple (not a `Row`, then a
    tuple of it)."""
    if not isinstance(projection, StructProjection) or type(projection).row is not \
            StructProjection.row:
        row = projection.row

        def spelled(key: str, state: Any) -> tuple[Any, ...]:
            made = row(state)
            return (key, made.value, *made.columns, ascii_lower(made.text))
        return spelled

    encode, values, text = projection.encode, projection.column_values, projection.search_text
    lower = ascii_lower
    kind = type(projection)
    columns = projection.spec().columns
    if (kind.search_text is StructProjection.search_text and columns
            and kind.column_values is StructProjection.column_values):
        # No search text ("" stored) and the columns the state's own fields: taken by
        # one C-level getter (most rows of a replay are of such views: the steps').
        get = attrgetter(*columns)
        if len(columns) == 1:
            def one(key: str, state: Any) -> tuple[Any, ...]:
                return (key, encode(state), get(state), "")
            return one

        def plain(key: str, state: Any) -> tuple[Any, ...]:
            return (key, encode(state), *get(state), "")
        return plain

    def fast(key: str, state: Any) -> tuple[Any, ...]:
        return (key, encode(state), *values(state), lower(text(state)))
    return fast


class PlannedFold(Fold):
    """A store's `Fold` whose full replays (every view and the stream index made anew:
    nothing present, nothing folded yet) take `BulkFold`; every other fold is `Fold`'s."""

    def parts(self, lines: Iterator[LogLine], since: Mapping[str, int], present: set[str],
              views: Iterable[str], folded: Folded) -> Iterator[Part]:
        views = list(views)
        if present or any(since.values()) or not set(self.projections) <= set(views):
            return super().parts(lines, since, present, views, folded)
        return BulkFold(self.views, self.projections, self.catalog, self.over,
                        self.routes).parts(lines, folded)


class BulkFold:
    """One full replay of a store's projections (and the stream index) into new views."""

    def __init__(self, views: ViewStore, projections: Mapping[str, Projection],
                 catalog: EventCatalog, over: Mapping[str, tuple[str, Over]],
                 routes: Mapping[str, list[Projection]]) -> None:
        self.views = views
        self.projections = projections
        self.catalog = catalog
        self.states: dict[str, dict[str, Any]] = {name: {} for name in projections}
        bases = {base for base, _ in over.values()}
        self.plans: dict[str, tuple[_Step, ...]] = {}
        for event_type, routed in routes.items():
            steps: list[_Step] = []
            last: object = None
            # A base before the views folded over it; those keyed as one of them are
            # next to it (the key taken once: a run's and its thread's are the same).
            over_keys = {_key_function(p) for p in routed if p.name in over}
            for projection in sorted(routed, key=lambda p: (
                    p.name in over, _key_function(p) in over_keys)):
                name = projection.name
                base, over_fold = over.get(name, (None, None))
                if over_fold is not None:
                    plan_over = getattr(projection, "planned_over", None)
                    over_fold = (plan_over and plan_over(event_type)) or over_fold
                same = _key_function(projection)
                steps.append((self.states[name], name, None if same is last else projection.key,
                              planned(projection, event_type), over_fold, base,
                              name in bases, hash(name)))
                last = same
            self.plans[event_type] = tuple(steps)
        # Rows the views hold for states read back (a part updates them), by view.
        self.stored: dict[str, dict[str, Row | None]] = {name: {} for name in projections}
        # The keys a part wrote, by view: `_Written` over the key's own hash (a `str`
        # keeps it, so the states' dict does not hash it again), offset by the view's.
        self.seen = _Written()
        self.salts = {name: hash(name) for name in projections}
        self.written = False  # whether a part was written (then a key may be read back)
        self.ending = False  # whether the part written is the last

    def parts(self, lines: Iterator[LogLine], folded: Folded, *, streams: bool = True
              ) -> Iterator[Part]:
        """Fold `lines` (the whole log, from its first line) and give the rows as parts:
        the oldest states whenever more than BOUND are held, the rest at the end; each
        with the stream entries folded since the part before (none when not `streams`).
        `folded.head`: the last complete batch's checkpoint, as each part is given.
        The cyclic collector is held off meanwhile (states and rows hold no cycles, and
        its walks over every state held cost as much as making the rows)."""
        with paused():
            yield from self._parts(lines, folded, streams=streams)

    def _parts(self, lines: Iterator[LogLine], folded: Folded, *, streams: bool
               ) -> Iterator[Part]:
        index: list[tuple[str, int]] = []
        add = index.append
        stretch_lines = fold.STRETCH_LINES  # stream entries a part holds at most
        from hashlib import sha256  # OpenSSL's: loaded by a replay, not by every command
        decode = self.catalog.decode
        plans = self.plans
        seq, prev = folded.head
        # `_Written.may_hold`, inlined: whether a key not held may have been written.
        bits, mask, shift = self.seen.bits, (1 << SEEN_BITS) - 1, SEEN_BITS
        written = self.written
        pending: list[Envelope] = []
        done: tuple[int, str] = folded.head
        count = 0
        since_part = 0
        for line in lines:
            raw = line.raw
            envelope = decode(raw)
            if envelope.seq != seq + 1 or envelope.prev != prev or envelope.type == CREATED:
                refuse_next(envelope, seq, prev, line.where)
            prev = sha256(raw).hexdigest()[:32]
            seq = envelope.seq
            k, n = envelope.batch
            batch: list[Envelope] | tuple[Envelope]
            if k == n and not pending:
                batch = (envelope,)
            else:
                pending.append(envelope)
                if k != n:
                    continue
                batch, pending = pending, []
            for event in batch:
                plan = plans.get(event.type)
                if plan is not None:
                    key = ""
                    base_name: str | None = None  # the base folded last, its key, new state
                    base_key = ""
                    base_new: Any = None
                    for states, name, key_of, apply, over, base, is_base, salt in plan:
                        if key_of is not None:
                            key = key_of(event)
                        state = states.get(key, _ABSENT)
                        if state is _ABSENT:
                            state = None
                            if written:
                                low = hash(key) + salt
                                high = (low >> shift) & mask
                                low &= mask
                                if (bits[low >> 3] >> (low & 7) & 1
                                        and bits[high >> 3] >> (high & 7) & 1):
                                    state = self._read_back(name, key)
                        if over is not None and base_name == base and base_key == key:
                            states[key] = over(state, event, base_new)
                            continue
                        states[key] = new = apply(state, event)
                        if is_base:
                            base_name, base_key, base_new = name, key, new
                if streams:
                    add((event.subject, event.seq))
            done = seq, prev  # the last complete batch's end
            count += len(batch)
            if count >= CHECK_EVERY:
                since_part += count
                count = 0
                if (sum(map(len, self.states.values())) > BOUND
                        or since_part >= stretch_lines):
                    since_part = 0
                    folded.head = Checkpoint(*done)
                    yield from self._given(KEEP, index)
                    written = True
                    index = []
                    add = index.append
        if done[0]:
            folded.head = Checkpoint(*done)
            self.ending = True
            yield from self._given(0, index)

    def _given(self, keep: int, index: list[tuple[str, int]]) -> Iterator[Part]:
        """`_part`'s rows as parts: the new rows with the stream entries, then the rows
        of states read back (keys apart from the first's), when there are any."""
        changes, again = self._part(keep)
        yield changes, index
        if any(again.values()):
            yield again, []

    def _read_back(self, name: str, key: str) -> Any:
        """The state of a key not held that a part may have written (`_Written` holds
        it: `_parts` looks, inlined): read back from the views, None when none wrote it."""
        raw = self.views.load(name, key)
        if raw is None:
            return None
        projection = self.projections[name]
        state = projection.decode(raw)
        self.stored[name][key] = projection.row(state)
        return state

    def _part(self, keep: int) -> tuple[dict[str, Rows | NewRows], dict[str, Rows]]:
        """The rows of the oldest states held, all but about `keep` of them (each view
        keeps its share), let go once given: those no part wrote as the tuples the table
        takes (`NewRows`, made once a row), and, apart, those of states read back as
        `Rows` whose `before` is the row the views hold (updated, not inserted)."""
        held = sum(map(len, self.states.values()))
        changes: dict[str, Rows | NewRows] = {}
        again: dict[str, Rows] = {}
        mark, mark_all, salts = self.seen.add, self.seen.add_rows, self.salts
        for name, states in self.states.items():
            if not states:
                changes[name] = Rows({}, {})
                continue
            out = len(states) if keep == 0 else max(0, len(states) - len(states) * keep // held)
            projection = self.projections[name]
            stored = self.stored[name]
            keys = list(itertools.islice(states, out))
            made = inserted(projection)
            pop = states.pop
            if stored and not stored.keys().isdisjoint(keys):
                row = projection.row
                rows: dict[str, Row | None] = {}
                before: dict[str, Row | None] = {}
                for key in [key for key in keys if key in stored]:
                    state = pop(key)
                    rows[key] = None if state is None else row(state)
                    before[key] = stored.pop(key)
                    mark(hash(key) + salts[name])
                again[name] = Rows(rows, before)
                keys = [key for key in keys if key in states]
            new = NewRows([made(key, state) for key in keys
                           if (state := pop(key)) is not None])  # None: never written
            if not self.ending:  # nothing is read back after the last part
                mark_all(new.inserts, salts[name])
            changes[name] = new
        self.written = True
        return changes, again
