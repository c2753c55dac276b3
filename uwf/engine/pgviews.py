"""The views in a PostgreSQL database (issue 20): the `ViewStore` of uwf/engine/viewspec.py,
answering as the SQLite one does (uwf/engine/viewstore.py).

Each view is a table `uwf_v_<view>`: its key, its state (`bytea`), its declared columns
typed as the view declares them (`ViewSpec.types`: bigint or text in byte order), its
search text (a pg_trgm GIN index where SQLite has FTS5); `uwf_views` holds every
checkpoint (one row shared by the views that move together: uwf/engine/pgckpt.py),
`uwf_counts` the kept counts (a row a view: uwf/engine/pgcounts.py), `uwf_streams` the
stream index. The SQL
of a query is in `uwf.engine.pgquery`.

A commit is one transaction of the database's writer (`PgDatabase.transaction()`):
inside a writer's section it joins the section's transaction, so the log's append and
the fold commit together or not at all; elsewhere it is a transaction of its own. It
takes the views' advisory lock, then compares and sets every checkpoint, so concurrent
catch-ups (readers take no log lock) never fold an event twice. Inside a section the
commit is a savepoint too: a fold that fails leaves the section's append to commit, and
the views stale (the next read catches them up), as with the other backends. Reads use
`PgDatabase.connection()`: the section's own writes inside it, committed rows elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

import psycopg
from psycopg import errors

from uwf.engine import ckptrows, pgckpt, pgcounts, pgoverlay
from uwf.engine.dburl import where
from uwf.engine.log import Checkpoint
from uwf.engine.pgdb import PgDatabase
from uwf.engine.pgoverlay import Overlay
from uwf.engine.pgquery import (
    check_types,
    copy_sql,
    create_sql,
    order_sql,
    searchable,
    signature,
    table,
    typed,
    upsert_sql,
    where_sql,
)
from uwf.engine.sqlquery import column_sql, count_value
from uwf.engine.viewspec import (
    STREAMS,
    STREAMS_SIGNATURE,
    Changes,
    ColumnValue,
    Part,
    Query,
    Row,
    StreamEntries,
    ViewSpec,
    resolved,
)
from uwf.errors import Corrupt, StoreBusy

Connection = psycopg.Connection[Any]
Rows = list[tuple[Any, ...]]
_META = (
    *pgckpt.CREATE,
    pgcounts.CREATE,
    'CREATE TABLE IF NOT EXISTS uwf_streams (subject text COLLATE "C" NOT NULL, '
    "seq bigint NOT NULL, PRIMARY KEY (subject, seq))",
)
# The views' advisory lock, (uwf, 2) in the two-key space: no lock taken with one
# bigint key (as the log's is) is ever the same lock.
_LOCK = (0x757766, 2)
_CHUNK = 10_000  # rows per statement: a rebuild's arrays stay a few megabytes
_MANY = 100  # more new rows than this are copied (COPY), fewer inserted in one statement
_ANALYZED = 100  # a commit writing more rows than this to a view's table analyzes it
# What a hand edit of the tables looks like to a statement: a damaged view.
# (Values of other types than their columns' are refused before any statement.)
_DAMAGED = (errors.UndefinedTable, errors.UndefinedColumn, errors.DatatypeMismatch,
            errors.UndefinedFunction)


class PgViewStore:
    """The views of a store in its PostgreSQL database; one store serves many threads."""

    def __init__(self, db: PgDatabase, specs: Sequence[ViewSpec],
                 overlays: Mapping[str, Overlay] | None = None) -> None:
        for spec in specs:
            check_types(spec)
        self.db = db
        self.specs = {spec.name: spec for spec in specs}
        # A view's fields that server-side commands write as columns (uwf/engine/
        # pgoverlay.py): its reads build the value from them.
        self.overlays = dict(overlays or {})
        self._values = {name: pgoverlay.value_sql(self.overlays.get(name))
                        for name in self.specs}
        self._signatures = {name: signature(spec) for name, spec in self.specs.items()}
        self._signatures[STREAMS] = STREAMS_SIGNATURE
        self._tables: set[str] = set()  # views whose committed table was seen
        self._tables_lock = threading.Lock()
        self.trigram = self._ready()

    def _ready(self) -> bool:
        """The shared tables made if absent (under the views' lock; a store opened
        beside one that exists takes no lock); whether pg_trgm indexes the search text."""
        with self._guard():
            found = self.db.connection().execute(
                "SELECT to_regclass('uwf_views') IS NOT NULL AND to_regclass('uwf_counts') "
                "IS NOT NULL AND to_regclass('uwf_streams') IS NOT NULL, EXISTS (SELECT FROM "
                "pg_extension WHERE extname = 'pg_trgm')").fetchone()
        if found is not None and found[0]:
            return bool(found[1])
        with self._writing() as connection:
            return self._setup(connection)

    # -- the database, its errors and its lock -------------------------------------

    def _setup(self, connection: Connection) -> bool:
        """The shared tables (if absent); whether pg_trgm indexes the search text."""
        self._lock(connection)
        for statement in _META:
            connection.execute(statement)
        if connection.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'"
                              ).fetchone() is not None:
            return True
        try:
            with connection.transaction():  # a savepoint: a refusal leaves ours usable
                connection.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except psycopg.DatabaseError:
            if connection.broken:
                raise
            # Not installed on the server, or this user may not create it: searches
            # scan the view's text with LIKE instead (the same answers, slower).
            return False
        return True

    def _lock(self, connection: Connection) -> None:
        """The views' lock until the transaction ends, waited for at most the lock
        timeout (then StoreBusy); in a pipeline, no round trip of its own."""
        timeout = max(1, int(self.db.lock_timeout * 1000))
        connection.execute(f"SELECT set_config('lock_timeout', '{timeout}ms', true)")
        connection.execute(f"SELECT pg_advisory_xact_lock{_LOCK}")

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """A lock wait that timed out is StoreBusy; a table or column not as this store
        made it (a hand edit) is a damaged view; a lost server is StoreUnavailable."""
        try:
            yield
        except errors.LockNotAvailable as exc:
            raise StoreBusy(f"the views are busy ({where(self.db.url)}: "
                            f"{_first_line(exc)})", "retry") from None
        except _DAMAGED as exc:
            raise self._corrupt(exc) from None
        except psycopg.OperationalError as exc:
            raise self.db.unavailable(exc) from None

    def _corrupt(self, exc: BaseException) -> Corrupt:
        return Corrupt(f"views are unreadable ({where(self.db.url)}: {_first_line(exc)})",
                       "run `uwf registry rebuild`")

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Connection]:
        """The writer's transaction, joined if this thread is in one (then a savepoint
        of it, so a failure leaves the outer transaction usable)."""
        joined = self.db.in_transaction
        with self.db.transaction() as connection, self._guard():
            if joined:
                with connection.transaction():
                    yield connection
            else:
                yield connection

    def signatures(self) -> dict[str, str]:
        """Each view's signature as its checkpoint row keeps it (and the stream index's):
        what a server-side command checks before it folds (uwf/queue/pgcalls.py)."""
        return dict(self._signatures)

    def close(self) -> None:
        """Forget what was seen; the database is closed by whoever opened it."""
        with self._tables_lock:
            self._tables.clear()

    def let_go(self) -> None:
        self.close()

    # -- reads -------------------------------------------------------------------

    def checkpoints(self) -> dict[str, Checkpoint]:
        with self._guard():
            connection = self.db.connection()
            if connection is self.db.reader:
                rows = connection.execute(pgckpt.SELECT).fetchall()
            else:
                with connection.transaction():  # a damaged table leaves the section usable
                    rows = connection.execute(pgckpt.SELECT).fetchall()
        return self._matching(rows).found

    def _matching(self, rows: Rows) -> ckptrows.Checkpoints:
        """The checkpoints stored at the signature each view (or the index) has now."""
        try:
            return ckptrows.read(rows, self._signatures)
        except ckptrows.Damaged as exc:  # a hand edit
            raise self._corrupt(exc) from None

    def _reader(self, view: str) -> Connection | None:
        """This thread's connection when the view's table exists (it may not, before a
        first fold)."""
        if view not in self.specs:
            raise ValueError(f"unknown view {view!r}")
        connection = self.db.connection()
        if view in self._tables:
            return connection
        # Asked of the reader first, which sees only committed tables: one seen there
        # stays until the views are dropped, so it is asked once per process.
        name = f"uwf_v_{view}"
        found = self.db.reader.execute("SELECT to_regclass(%s)", (name,)).fetchone()
        if found is not None and found[0] is not None:
            with self._tables_lock:
                self._tables.add(view)
            return connection
        if connection is self.db.reader:
            return None
        # Not committed: perhaps made in this section's transaction, not yet committed.
        found = connection.execute("SELECT to_regclass(%s)", (name,)).fetchone()
        return None if found is None or found[0] is None else connection

    def _fetch(self, view: str, sql: str, params: Sequence[Any] = ()) -> Rows | None:
        """The rows of a statement over the view's table; None when there is no table."""
        with self._guard():
            connection = self._reader(view)
            if connection is None:
                return None
            try:
                return connection.execute(sql, params).fetchall()
            except errors.UndefinedTable:
                if connection is not self.db.reader or view not in self._tables:
                    raise
                with self._tables_lock:  # dropped by another process since it was seen
                    self._tables.discard(view)
            connection = self._reader(view)
            return None if connection is None else connection.execute(sql, params).fetchall()

    def _value(self, view: str) -> str:
        """SQL: a row's value (an overlay's view's built from its columns)."""
        return self._values.get(view, "value")

    def load(self, view: str, key: str) -> bytes | None:
        rows = self._fetch(view, f"SELECT {self._value(view)} FROM {table(view)} "
                                 "WHERE key = %s", (key,))
        return rows[0][0] if rows else None

    def load_many(self, view: str, keys: Sequence[str]) -> dict[str, bytes]:
        if not keys:
            return {}
        rows = self._fetch(view, f"SELECT key, {self._value(view)} FROM {table(view)} "
                                 "WHERE key = ANY(%b::text[])", (sorted(set(keys)),))
        return dict(rows or ())

    def query(self, query: Query) -> list[tuple[str, bytes]]:
        spec = self.specs[query.view]
        if query.text is not None and not spec.text:
            raise ValueError(f"view {spec.name} has no search text")
        where_clause, params = where_sql(spec, query)
        sql = (f"SELECT key, {self._value(spec.name)} FROM {table(spec.name)}"
               f"{where_clause} ORDER BY "
               f"{order_sql(spec, query.order)} LIMIT %s OFFSET %s")
        rows = self._fetch(spec.name, sql, [*params, query.limit, query.offset])
        return [(key, value) for key, value in rows or ()]

    def count(self, query: Query) -> int:
        spec = self.specs[query.view]
        where_clause, params = where_sql(spec, query)
        if not where_clause and spec.counted:  # every row: the kept counts add up to it
            return sum(self.counts(spec.name, spec.counted[0]).values())
        rows = self._fetch(spec.name, f"SELECT count(*) FROM {table(spec.name)}"
                                      f"{where_clause}", params)
        return int(rows[0][0]) if rows else 0

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        spec = self.specs[view]
        if column in spec.counted:  # kept up to date by commit: O(distinct values)
            prefix = pgcounts.key(column, "")
            rows = self._fetch(view, pgcounts.SELECT, (prefix, view, prefix))
            return self._counted(view, rows or [])
        name = column_sql(spec, column)
        rows = self._fetch(view, f"SELECT {name}, count(*) FROM {table(view)} GROUP BY {name}")
        return {value: int(n) for value, n in rows or ()}

    def _counted(self, view: str, rows: Rows) -> dict[ColumnValue, int]:
        """The kept counts as written by commit; anything else is a damaged view."""
        found: dict[ColumnValue, int] = {}
        for value, n in rows:
            decoded = count_value(value)
            if decoded is ... or type(n) is not int:
                raise self._corrupt(ValueError(f"a kept count of view {view} is {value!r}: "
                                               f"{n!r}"))
            if n:
                found[decoded] = n
        return found

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        rows = self._fetch(view, f"SELECT key, {self._value(view)} FROM {table(view)} "
                                 "ORDER BY key")
        yield from rows or ()

    def stream(self, subject: str, after: int = 0, *, reverse: bool = False) -> list[int]:
        order = "DESC" if reverse else "ASC"
        with self._guard():
            rows = self.db.connection().execute(
                f"SELECT seq FROM uwf_streams WHERE subject = %s AND seq > %s "
                f"ORDER BY seq {order}", (subject, after)).fetchall()
        return [seq for seq, in rows]

    def version(self, subject: str) -> int:
        with self._guard():
            row = self.db.connection().execute(
                "SELECT max(seq) FROM uwf_streams WHERE subject = %s", (subject,)).fetchone()
        return 0 if row is None or row[0] is None else int(row[0])

    # -- writes ------------------------------------------------------------------

    def commit(self, changes: Changes, expected: Mapping[str, Checkpoint | None],
               new: Checkpoint | Callable[[], Checkpoint], *, reset: bool = False,
               streams: StreamEntries = (), more: Iterable[Part] = ()) -> bool:
        for name in expected:
            if name != STREAMS and name not in self.specs:
                raise ValueError(f"unknown view {name!r}")
        # A command's few rows go in a pipeline: the statements whose answers are not
        # needed are sent together (COPY, a rebuild's, cannot go in one).
        small = (not reset and None not in expected.values() and more == ()
                 and len(streams) <= _MANY and all(len(rows) <= _MANY
                                                   for rows in changes.values()))
        with self._writing() as connection, (
                connection.pipeline() if small else contextlib.nullcontext()):
            self._lock(connection)
            rows = connection.execute(pgckpt.SELECT).fetchall()
            kept = self._matching(rows)
            current = kept.found
            if any(current.get(name) != want for name, want in expected.items()):
                return False
            stored = {name: stored for name, stored, _seq, _digest in rows}
            written: dict[str, int] = {}
            for number, (part, entries) in enumerate(chain([(changes, streams)], more)):
                for name, want in expected.items():
                    # Emptied before the first part; later parts go onto its rows.
                    fresh = (want is None or reset) and number == 0
                    if name == STREAMS:
                        if fresh:
                            connection.execute("DELETE FROM uwf_streams")
                        self._index(connection, entries)
                        continue
                    spec = self.specs[name]
                    indexes = self._empty(connection, spec, stored.get(name)) if fresh else []
                    rows_in = part.get(name, {})
                    self._apply(connection, spec, rows_in, fresh=fresh)
                    written[name] = written.get(name, 0) + len(rows_in)
                    for statement in indexes:
                        connection.execute(statement)
            # A table a bulk write filled (a batch, a first fold, a rebuild) is analyzed at
            # once: planned on no statistics, a first lease sorted every ready entry
            # instead of walking the queue's index (5.6 ms instead of 0.13 on 1,580).
            for name, count in written.items():
                if count > _ANALYZED:
                    connection.execute(f"ANALYZE {table(name)}")
            pgckpt.write(connection, kept, stored,
                         {name: self._signatures[name] for name in expected}, resolved(new))
            return True

    def _index(self, connection: Connection, entries: StreamEntries) -> None:
        """Add events to the stream index (many at once, a rebuild's: by COPY)."""
        if len(entries) > _MANY:
            with connection.cursor().copy("COPY uwf_streams (subject, seq) FROM STDIN") as copy:
                for entry in entries:
                    copy.write_row(entry)
        elif entries:
            connection.execute("INSERT INTO uwf_streams SELECT * FROM unnest(%b::text[], "
                               "%b::bigint[])", ([s for s, _ in entries], [q for _, q in entries]))

    def _empty(self, connection: Connection, spec: ViewSpec, stored: str | None) -> list[str]:
        """The view's table, empty, at its declared shape: emptied in place when it has
        that shape already (readers see the old rows until the commit), else made anew;
        the statements that index a new table once it is filled."""
        name = spec.name
        connection.execute("DELETE FROM uwf_counts WHERE view = %s", (name,))
        found = connection.execute("SELECT to_regclass(%s)", (f"uwf_v_{name}",)).fetchone()
        if stored == self._signatures[name] and found is not None and found[0] is not None:
            connection.execute(f"DELETE FROM {table(name)}")
            return []
        connection.execute(f"DROP TABLE IF EXISTS {table(name)}")
        overlay = self.overlays.get(name)
        create, indexes = create_sql(spec, trigram=self.trigram,
                                     extra="" if overlay is None else overlay.create_sql())
        connection.execute(create)
        return indexes

    def _apply(self, connection: Connection, spec: ViewSpec, rows: Mapping[str, Row | None],
               *, fresh: bool) -> None:
        """Write `rows` into the view's table and move its kept counts; `fresh`: the
        table was just emptied, so there is nothing to look up or delete."""
        if not rows:
            return
        name = spec.name
        delta: dict[tuple[str, str], int] = {}
        counted = [(column, spec.columns.index(column)) for column in spec.counted]
        keys = list(rows)
        if counted and not fresh:
            selected = ", ".join(column_sql(spec, column) for column, _ in counted)
            for old in connection.execute(f"SELECT {selected} FROM {table(name)} WHERE key = "
                                          "ANY(%b::text[])", (keys,)):
                for (column, _), value in zip(counted, old, strict=True):
                    slot = (column, json.dumps(value))
                    delta[slot] = delta.get(slot, 0) - 1
        deletes = [key for key, row in rows.items() if row is None]
        if deletes and not fresh:
            connection.execute(f"DELETE FROM {table(name)} WHERE key = ANY(%b::text[])",
                               (deletes,))
        upserts = [(key, row) for key, row in rows.items() if row is not None]
        copied = fresh and len(upserts) > _MANY
        if copied:  # an empty table, every row new: by COPY
            with connection.cursor().copy(copy_sql(spec)) as copy:
                for key, row in upserts:
                    copy.write_row((key, row.value, *typed(spec, row.columns),
                                    searchable(row.text)))
        sql = upsert_sql(spec, pgoverlay.resets(self.overlays.get(name)))
        for start in range(0, 0 if copied else len(upserts), _CHUNK):
            chunk = upserts[start:start + _CHUNK]
            values = [typed(spec, row.columns) for _, row in chunk]
            connection.execute(sql, [
                [key for key, _ in chunk], [row.value for _, row in chunk],
                *([value[index] for value in values] for index in range(len(spec.columns))),
                [searchable(row.text) for _, row in chunk]])
        for _, row in upserts:
            for column, index in counted:
                slot = (column, json.dumps(row.columns[index]))
                delta[slot] = delta.get(slot, 0) + 1
        moved = {pgcounts.key(column, value): n for (column, value), n in delta.items() if n}
        if moved:
            connection.execute(pgcounts.UPSERT, (name, json.dumps(moved)))

    def drop(self) -> None:
        """Forget everything: every view's table, the checkpoints, the counts and the
        stream index, made anew empty (the way out of damaged views)."""
        with self._writing() as connection:
            self._lock(connection)
            found = connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND "
                "tablename LIKE %s", ("uwf\\_v\\_%",)).fetchall()
            for name, in found:
                quoted = name.replace('"', '""')
                connection.execute(f'DROP TABLE "{quoted}"')
            connection.execute("DROP TABLE IF EXISTS uwf_views, uwf_counts, uwf_streams")
            self._setup(connection)
        with self._tables_lock:
            self._tables.clear()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
