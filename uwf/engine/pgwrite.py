"""A command on PostgreSQL in one round trip: decided in Python, checked and appended in
the server (SPEC §11, issue 31).

`Journal.write` on a PostgreSQL store tries this first. The command's `decide` runs
before any lock, on the views at the head this process last knew (its own last write
here, or one statement's look), the rows it reads kept with that head, so a process
writing again finds them here instead of asking the server. The events' lines are built
in Python, chained from that head, folded in Python into the views' rows and the kept
counts' moves, and sent in one `SELECT` of a function generated from the views' specs,
prepared once a connection and sent through libpq directly (`PgDatabase.prepared`):
under the log's advisory lock it moves the views' shared checkpoint to the new head
only if it is at the head decided on with these views joined (no statement of its own
checks the head: a line appended past that checkpoint makes the line's INSERT fail on
its key, the call rolls back and is taken as moved), appends the lines, writes the
rows, the counts (a row a view: uwf/engine/pgcounts.py) and the stream index,
NOTIFYs, and its transaction commits synchronously: the call returns once durable.
(Unlike the lease's and complete's procedures, uwf/queue/pgcalls.py, a function
cannot commit asynchronously and then flush in a small transaction: a `CALL` is
planned again on every call, 14 % of an append's instructions, where this prepared
`SELECT` is planned once; its lock is held through its flush, so concurrent writers'
flushes do not group: docs/benchmarks.md, issue 31.)

The head only moves forward, so a head unchanged at the call was unchanged through
every read before it: the command was decided on one state, the one it is appended to.
When the head has moved (another writer), the kept rows are forgotten and the command
is decided again on a fresh look; after a second miss it runs the ordinary way
(`Journal.write_at`'s section), which also takes whatever this path leaves: an empty
log, a big write, a `then` that queries, a write inside another section or from a
second thread at once. A refusal decided on kept rows is raised only once a look shows
the head has not moved since; otherwise the command is decided again.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import msgspec

from uwf.engine import pgarray
from uwf.engine.events import CasNode, Envelope, NewEvent, digest
from uwf.engine.journal import Journal, Outcome, Views
from uwf.engine.log import Checkpoint
from uwf.engine.pgckpt import MOVE, joined
from uwf.engine.pgcounts import key as count_key
from uwf.engine.pgwritefn import write_function
from uwf.engine.viewspec import ColumnValue, Query, Row, ViewSpec, ViewStore
from uwf.errors import UwfError

if TYPE_CHECKING:
    from uwf.engine.pglog import PgLog
    from uwf.engine.pgviews import PgViewStore

MOST_LINES = 100  # a bigger write goes the ordinary way (COPY)
MOST_ROWS = 100  # ... as does one writing more rows than this to a view
KEPT = 4096  # rows kept with the head at most: past this they are forgotten
Key = tuple[str, str]

# What the server-side procedures (uwf/queue/pgcalls.py; not the write functions,
# uwf/engine/pgwritefn.py) do last: the checkpoints (`CHECKPOINTS`: the shared row,
# uwf/engine/pgckpt.py; a command may fold into its last statement), then `FINISH`:
# the NOTIFY, the commit that lets the lock go, and the small synchronous commit that
# waits for a WAL flush past it.
# Uses `s` (the new head's seq), `prev` (its digest), `flush`, `done` (text). A call
# whose result is not needed is an assignment to `done`, not a PERFORM: plpgsql
# evaluates an assignment's expression itself, where a PERFORM is a statement the
# executor sets up, runs and ends on every call.
CHECKPOINTS = MOVE
# (Not flushing, the second COMMIT ends an empty transaction: no WAL, no wait; one
# expression fewer than an IF around it, set up again in the transaction it begins.)
FINISH = """
  o_status := 'ok' || pg_notify({channel}, s::text)::text;  -- '' (void): one expression
  COMMIT;
  done := CASE WHEN flush THEN pg_logical_emit_message(true, 'uwf', '')::text END;
  COMMIT;
"""
# What every server-side command does first: `flush` (a durable call flushes after its
# commit), then, in one plpgsql expression (each is set up again on every call; its
# calls are made in order): the lock's timeout, each statement planned once a session
# (`force_generic_plan`: not five times with its arguments first, the server's default,
# where a new worker's first leases took 15-20 ms each), `synchronous_commit` off where
# the small transaction flushes (or nothing is durable), and the log's advisory lock.
LOCK = """
  flush := p_durable AND {can_flush};
  done := set_config('lock_timeout', p_lock_ms || 'ms', true)
    || set_config('plan_cache_mode', 'force_generic_plan', true)
    || CASE WHEN flush OR NOT p_durable
         THEN set_config('synchronous_commit', 'off', true) ELSE '' END
    || pg_advisory_xact_lock({log_lock})::text;
"""
# SQL: whether this session may call pg_logical_emit_message (the flush's small transaction):
# asked of the catalog once a session, then kept in a setting of the session's own.
CAN_FLUSH = """coalesce(nullif(current_setting('uwf.can_flush', true), ''),
    set_config('uwf.can_flush', has_function_privilege(
      'pg_logical_emit_message(boolean,text,text)', 'EXECUTE')::text, false))::boolean"""


class _Moved(Exception):
    """The head is not the one the command was decided on."""


class _NotHere(Exception):
    """This path does not take the command: the ordinary way does."""


@dataclass
class _Known:
    """The head this process last knew, the byte offset past its line, and view rows
    as they are at that head (None: no such row)."""

    head: Checkpoint
    ends: int
    rows: dict[Key, bytes | None] = field(default_factory=dict)


class _Reads:
    """What `decide` reads: a row kept with the head, else the server's (kept then).
    `after`: the reads of a `then`, on the rows the command writes; a query there
    would need the server to hold them already, so it is not taken here."""

    def __init__(self, views: PgViewStore, kept: dict[Key, bytes | None], *,
                 after: bool = False) -> None:
        self._views = views
        self.kept = kept
        self._after = after
        self.asked = 0  # reads made, kept or not

    def load(self, view: str, key: str) -> bytes | None:
        self.asked += 1
        if (view, key) in self.kept:
            return self.kept[(view, key)]
        raw = self._views.load(view, key)
        found = None if raw is None else bytes(raw)
        self.kept[(view, key)] = found
        return found

    def load_many(self, view: str, keys: Sequence[str]) -> None:
        """Keep the rows of `keys` not kept yet, read in one statement."""
        wanted = [key for key in dict.fromkeys(keys) if (view, key) not in self.kept]
        if len(wanted) > 1:
            found = self._views.load_many(view, wanted)
            for key in wanted:
                raw = found.get(key)
                self.kept[(view, key)] = None if raw is None else bytes(raw)

    def _server(self) -> PgViewStore:
        if self._after:
            raise _NotHere
        self.asked += 1
        return self._views

    def query(self, query: Query) -> list[tuple[str, bytes]]:
        return self._server().query(query)

    def count(self, query: Query) -> int:
        return self._server().count(query)

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        return self._server().counts(view, column)

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        return self._server().scan(view)


class OneCall:
    """`Journal.FirstTry` on a PostgreSQL store: one `CALL` a command in steady state."""

    def __init__(self, log: PgLog, views: PgViewStore) -> None:
        self.log = log
        self.views = views
        self._known: _Known | None = None
        self._lock = threading.Lock()  # one command at a time here; a second thread waits not
        # The write function for each view a command may write alone (and one line and
        # one row of it), and for several: uwf/engine/pgwritefn.py.
        self._writes = {(name, single): write_function(views, name, single=single)
                        for name in views.specs for single in (False, True)}
        self._write = write_function(views)

    def write(self, journal: Journal, decide: Callable[[Views, int], Outcome[Any]],
              expected: Mapping[str, int] | None, nodes: Sequence[tuple[str, bytes]], *,
              sync: bool) -> tuple[Any] | None:
        if self.log.db.in_transaction or not self._lock.acquire(blocking=False):
            return None
        try:
            for _attempt in range(2):
                known = self._known or self._look()
                if known is None:
                    break
                try:
                    return self._once(journal, known, decide, expected, nodes, sync=sync)
                except _Moved:
                    self._known = None
                except _NotHere:
                    break
            self._known = None  # the ordinary way moves the head
            return None
        finally:
            self._lock.release()

    def forget(self) -> None:
        """Drop the head and rows kept (another way of writing moved the head)."""
        self._known = None

    def _look(self) -> _Known | None:
        """The head and its line's end, when every view is folded to it (else None:
        the ordinary way catches them up)."""
        signatures = self.views.signatures()
        with self.log.db.reached():
            row = self.log.db.reader.execute(
                "SELECT e.seq, e.line, e.ends, c.views, c.joined, c.seq = e.seq AND c.digest "
                "= left(encode(sha256(e.line), 'hex'), 32) FROM (SELECT * FROM uwf_events "
                "ORDER BY seq DESC LIMIT 1) e, (SELECT count(*) FILTER (WHERE v.seq IS NULL "
                "AND x.sig = v.signature) AS views, count(*) FILTER (WHERE v.seq IS NULL AND "
                "v.name <> '') AS joined, max(v.seq) FILTER (WHERE v.name = '') AS seq, "
                "max(v.digest) FILTER (WHERE v.name = '') AS digest FROM uwf_views v LEFT "
                "JOIN unnest(%b::text[], %b::text[]) AS x(name, sig) ON x.name = v.name) c",
                (list(signatures), list(signatures.values())), binary=True).fetchone()
        # Every view joined to the shared checkpoint at the head (uwf/engine/pgckpt.py),
        # and no other: else the ordinary way writes (and joins them again).
        if row is None or not row[3] == row[4] == len(signatures) or not row[5]:
            return None
        seq, line, ends, _views, _joined, _at = row
        self._known = _Known(Checkpoint(seq, digest(bytes(line))), ends)
        return self._known

    def _still(self, known: _Known) -> bool:
        """Whether the log's head is still the one known."""
        return self.log.head() == known.head

    def _once(self, journal: Journal, known: _Known,
              decide: Callable[[Views, int], Outcome[Any]],
              expected: Mapping[str, int] | None, nodes: Sequence[tuple[str, bytes]], *,
              sync: bool) -> tuple[Any]:
        head = known.head
        reads = _Reads(self.views, dict(known.rows))
        now = journal.clock()
        try:
            if expected:
                journal._streams.check(head, expected)
            journal._local.deciding = True
            try:
                outcome = decide(Views(cast(ViewStore, reads), journal.projections, head), now)
            finally:
                journal._local.deciding = False
        except UwfError:
            if not self._still(known):
                raise _Moved from None
            raise
        if not outcome.events:
            answer = outcome.result if outcome.then is None else outcome.then(
                Views(cast(ViewStore, reads), journal.projections, head))
            # Nothing to append, so no call checks the head: the reads (kept rows, or
            # several of the server's, each its own snapshot) answer only if it held.
            if reads.asked and not self._still(known):
                raise _Moved
            return (answer,)
        events: list[NewEvent] = [
            *(NewEvent(f"cas/{hash_}", CasNode(hash_, msgspec.Raw(data)))
              for hash_, data in nodes), *outcome.events]
        if len(events) > MOST_LINES:
            raise _NotHere
        envelopes, lines = journal.envelopes(head, events, now)
        rows, moves = self._fold(journal, reads, envelopes, head)
        after = {**reads.kept, **{(view, key): None if row is None else row.value
                                  for view, changed in rows.items()
                                  for key, row in changed.items()}}
        new = Checkpoint(envelopes[-1].seq, digest(lines[-1]))  # the head once written
        result = outcome.result
        if outcome.then is not None:
            then_reads = _Reads(self.views, after, after=True)
            result = outcome.then(Views(cast(ViewStore, then_reads), journal.projections, new))
        ends = list(itertools.accumulate((len(raw) + 1 for raw in lines), initial=known.ends))
        write, single = self._write, False
        if len(rows) == 1 and (view := next(iter(rows))) in self.views.specs:
            changed = rows[view]
            single = len(lines) == 1 and len(changed) == 1 and None not in changed.values()
            write = self._writes[(view, single)]
        got = self.log.call(write, self._args(
            known, lines=lines, ends=ends[1:], envelopes=envelopes, rows=rows, moves=moves,
            last=new.digest, durable=self.log.durable and sync, single=single))
        if got is None:
            raise _NotHere
        if got[0] != "ok":
            raise _Moved
        self._known = _Known(new, ends[-1], after if len(after) <= KEPT else {})
        return (result,)

    def _fold(self, journal: Journal, reads: _Reads, envelopes: Sequence[Envelope],
              head: Checkpoint) -> tuple[dict[str, dict[str, Row | None]],
                                         list[tuple[str, str, str, int]]]:
        """The events folded as `Journal._append` folds them: the rows they write, and
        the kept counts' moves (view, column, value as JSON, by how much)."""
        states: dict[Key, Any] = {}
        before: dict[Key, Row | None] = {}
        wanted: dict[str, list[str]] = {}
        for envelope in envelopes:
            for projection in journal.fold.routes.get(envelope.type, ()):
                wanted.setdefault(projection.name, []).append(projection.key(envelope))
        for view, keys in wanted.items():  # a view at a time, as `Journal._prefetch`
            reads.load_many(view, keys)
        for envelope in envelopes:
            for projection in journal.fold.routes.get(envelope.type, ()):
                key = (projection.name, projection.key(envelope))
                if key not in states:
                    raw = reads.load(*key)
                    states[key] = None if raw is None else projection.decode(raw)
                    if self.views.specs[projection.name].counted:  # its counts move
                        before[key] = None if raw is None else projection.row(states[key])
        since = dict.fromkeys(journal.projections, head.seq)
        folded = set(journal.projections)
        for envelope in envelopes:
            journal.fold.apply(states, envelope, since, folded)
        rows = journal.fold.rows(states, journal.projections)
        moves: dict[tuple[str, str, str], int] = {}
        for view, changed in rows.items():
            if len(changed) > MOST_ROWS:
                raise _NotHere
            spec = self.views.specs[view]
            counted = [(column, spec.columns.index(column)) for column in spec.counted]
            for entity, row in changed.items() if counted else ():
                for side, sign in ((before.get((view, entity)), -1), (row, 1)):
                    if side is None:
                        continue
                    values = _typed(spec, side.columns)
                    for column, index in counted:
                        slot = (view, column, json.dumps(values[index]))
                        moves[slot] = moves.get(slot, 0) + sign
        return ({view: changed for view, changed in rows.items() if changed},
                [(*slot, n) for slot, n in moves.items() if n])

    def _args(self, known: _Known, *, lines: list[bytes], ends: list[int],
              envelopes: Sequence[Envelope], rows: Mapping[str, Mapping[str, Row | None]],
              moves: list[tuple[str, str, str, int]], last: str, durable: bool,
              single: bool) -> list[Any]:
        """The write function's arguments (uwf/engine/pgwritefn.py): a single line's and
        row's as values, else arrays."""
        from uwf.engine.pgquery import searchable

        signatures = self.views.signatures()
        flat = [(view, key, row) for view, changed in rows.items()
                for key, row in changed.items()]
        # Each row's column values, as text, one after the other; `at`: where a row's
        # start (less one: the server's arrays count from 1).
        cols: list[str | None] = []
        at: list[int] = []
        for view, _, row in flat:
            at.append(len(cols))
            if row is not None:
                cols.extend(None if value is None else str(value)
                            for value in _typed(self.views.specs[view], row.columns))
        # An empty array the function only loops over or indexes is sent as NULL: not
        # received (`array_recv`) at all.
        head = [durable, max(round(self.log.db.lock_timeout * 1000), 1), known.head.seq,
                known.head.digest, joined(signatures)]
        counts = (pgarray.text([view for view, _, _, _ in moves]),
                  pgarray.text([count_key(column, value) for _, column, value, _ in moves]),
                  pgarray.int8([n for _, _, _, n in moves])) if moves else (None, None, None)
        if single:
            (_, key, row), = flat
            assert row is not None
            return [*head, lines[0], ends[0], envelopes[0].subject, last, key, row.value,
                    pgarray.text(cols) if cols else None, searchable(row.text), *counts]
        return [
            *head, pgarray.bytea(lines), pgarray.int8(ends),
            pgarray.text([envelope.subject for envelope in envelopes]), last,
            pgarray.text([view for view, _, _ in flat]),
            pgarray.text([key for _, key, _ in flat]),
            pgarray.bytea([None if row is None else row.value for _, _, row in flat]),
            pgarray.text(cols) if cols else None, pgarray.int8(at),
            pgarray.text([None if row is None else searchable(row.text)
                          for _, _, row in flat]),
            *counts, pgarray.text(list(rows))]


def _typed(spec: ViewSpec, values: Sequence[ColumnValue]) -> list[ColumnValue]:
    from uwf.engine.pgquery import typed

    return typed(spec, values)
