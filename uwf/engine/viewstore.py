"""Where view states persist, and how they are queried: SQLite in WAL mode, or its
in-memory twin (SPEC §5).

Each view is a table of entity states (JSON bytes) keyed by a string, plus the
columns its projection declares (filtered and ordered by, with indexes) and an
optional search text (FTS5 trigram in SQLite). Each view has its own
checkpoint, the (seq, digest) of the last log line folded into it, and its own
signature (version and declared columns): a new or changed view is built alone
while the others stay. Rows and checkpoints move in one transaction, guarded by
compare-and-set on each checkpoint, so concurrent catch-ups (readers take no
log lock) never fold an event twice and a rebuild never moves a view backwards.

Query semantics, identical in both backends: `where` terms are ANDed (`=`,
`in`, `<`, `<=`, `>`, `>=`; a NULL column matches none of them, but `= None`
matches exactly the NULL ones); `text` keeps
rows whose search text contains every whitespace-separated term, ASCII
case-insensitively; `order` names columns (`-col` descending; NULL sorts first
ascending, last descending) and always ends with the key; then offset, limit.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import Any, NamedTuple, Protocol

from uwf.engine.log import Checkpoint
from uwf.errors import Corrupt, StoreBusy, StoreUnavailable

ColumnValue = int | str | None
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_OPS = ("=", "in", "<", "<=", ">", ">=")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class ViewSpec:
    """What a projection declares about its view's storage."""

    name: str
    version: int
    columns: tuple[str, ...] = ()
    indexes: tuple[tuple[str, ...], ...] = ()
    counted: tuple[str, ...] = ()  # columns whose per-value counts are kept up to date
    text: bool = False

    def __post_init__(self) -> None:
        for name in (self.name, *self.columns):
            if not _NAME.fullmatch(name) or name in ("key", "value", "text"):
                raise ValueError(f"invalid view or column name {name!r}")
        for column in (*(c for index in self.indexes for c in index), *self.counted):
            if column != "key" and column not in self.columns:
                raise ValueError(f"view {self.name}: {column!r} is not a declared column")

    @functools.cached_property
    def signature(self) -> str:
        """Changes whenever the stored shape or the fold changes: such views are rebuilt."""
        return json.dumps([self.version, self.columns, self.indexes, self.counted, self.text])


class Row(NamedTuple):
    """One entity as stored: its state, its column values (in declared order), its text."""

    value: bytes
    columns: tuple[ColumnValue, ...] = ()
    text: str = ""


Changes = Mapping[str, Mapping[str, Row | None]]  # view -> key -> row (None deletes)


@dataclass(frozen=True)
class Query:
    """A read of one view: filter, search, order, page."""

    view: str
    where: tuple[tuple[str, str, Any], ...] = ()
    text: str | None = None
    order: tuple[str, ...] = ()
    limit: int | None = None
    offset: int = 0


def search_terms(text: str | None) -> list[str]:
    return [] if not text else text.translate(_ASCII_LOWER).split()


class ViewStore(Protocol):
    """Persisted view rows, their checkpoints, and queries over them."""

    def checkpoints(self) -> dict[str, Checkpoint]:
        """The checkpoint of every view present at its declared signature."""
        ...

    def load(self, view: str, key: str) -> bytes | None: ...

    def load_many(self, view: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The states of those of `keys` that have a row (one read, not one per key)."""
        ...

    def query(self, query: Query) -> list[tuple[str, bytes]]:
        """(key, state) of the rows the query selects, in its order."""
        ...

    def count(self, query: Query) -> int:
        """How many rows the query's filter and text select (order and paging ignored)."""
        ...

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        """Rows per value of `column` (values with no rows are absent)."""
        ...

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        """Every (key, state) of a view, in key order."""
        ...

    def commit(self, changes: Changes, expected: Mapping[str, Checkpoint | None],
               new: Checkpoint, *, reset: bool = False) -> bool:
        """Move each view of `expected` from its expected checkpoint to `new` and apply
        its changes, all in one transaction. `None` expects the view absent (or of
        another signature): it is emptied first, as is every view with `reset` (a
        rebuild, in place, so other processes' connections stay valid). Returns
        False, changing nothing, when any checkpoint is not as expected."""
        ...

    def drop(self) -> None:
        """Forget everything, as if the views had been deleted."""
        ...

    def close(self) -> None: ...


# -- the in-memory twin ------------------------------------------------------------

class MemoryViewStore:
    """The in-memory twin of the SQLite view store: the same answers, by brute force."""

    def __init__(self, specs: Sequence[ViewSpec]) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self._rows: dict[str, dict[str, Row]] = {}
        self._checkpoints: dict[str, tuple[str, Checkpoint]] = {}
        self._lock = threading.Lock()

    def checkpoints(self) -> dict[str, Checkpoint]:
        return {name: checkpoint for name, (signature, checkpoint) in self._checkpoints.items()
                if name in self.specs and self.specs[name].signature == signature}

    def load(self, view: str, key: str) -> bytes | None:
        row = self._rows.get(view, {}).get(key)
        return None if row is None else row.value

    def load_many(self, view: str, keys: Sequence[str]) -> dict[str, bytes]:
        rows = self._rows.get(view, {})
        return {key: rows[key].value for key in keys if key in rows}

    def _select(self, query: Query) -> list[tuple[str, Row]]:
        spec = self.specs[query.view]
        rows = list(self._rows.get(query.view, {}).items())
        for column, op, value in query.where:
            get = _getter(spec, column)
            rows = [(k, r) for k, r in rows if _compare(get(k, r), op, value)]
        for term in search_terms(query.text):
            rows = [(k, r) for k, r in rows if term in r.text]
        return rows

    def query(self, query: Query) -> list[tuple[str, bytes]]:
        spec = self.specs[query.view]
        rows = self._select(query)
        rows.sort(key=lambda item: item[0])
        for term in reversed(_order_terms(query.order)):
            descending = term.startswith("-")
            get = _getter(spec, term.lstrip("-"))
            rows.sort(key=lambda item, g=get: _null_first(g(*item)),  # type: ignore[misc]
                      reverse=descending)
        end = None if query.limit is None else query.offset + query.limit
        return [(key, row.value) for key, row in rows[query.offset:end]]

    def count(self, query: Query) -> int:
        return len(self._select(query))

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        get = _getter(self.specs[view], column)
        found: dict[ColumnValue, int] = {}
        for key, row in self._rows.get(view, {}).items():
            value = get(key, row)
            found[value] = found.get(value, 0) + 1
        return found

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        rows = sorted(self._rows.get(view, {}).items())
        for key, row in rows:
            yield key, row.value

    def commit(self, changes: Changes, expected: Mapping[str, Checkpoint | None],
               new: Checkpoint, *, reset: bool = False) -> bool:
        with self._lock:
            current = self.checkpoints()
            if any(current.get(name) != want for name, want in expected.items()):
                return False
            for name, want in expected.items():
                if want is None or reset:
                    self._rows[name] = {}
                rows = self._rows.setdefault(name, {})
                for key, row in changes.get(name, {}).items():
                    if row is None:
                        rows.pop(key, None)
                    else:
                        rows[key] = row._replace(text=row.text.translate(_ASCII_LOWER))
                self._checkpoints[name] = (self.specs[name].signature, new)
            return True

    def drop(self) -> None:
        self._rows.clear()
        self._checkpoints.clear()

    def close(self) -> None:
        pass


def _order_terms(order: Sequence[str]) -> list[str]:
    terms = list(order)
    if not any(term.lstrip("-") == "key" for term in terms):
        terms.append("key")
    return terms


def _getter(spec: ViewSpec, column: str) -> Any:
    if column == "key":
        return lambda key, row: key
    try:
        index = spec.columns.index(column)
    except ValueError:
        raise ValueError(f"view {spec.name} has no column {column!r}") from None
    return lambda key, row: row.columns[index]


def _null_first(value: ColumnValue) -> tuple[bool, Any]:
    return (value is not None, value if value is not None else 0)


def _compare(have: ColumnValue, op: str, want: Any) -> bool:
    if want is None and op == "=":  # `= None` asks for the rows without a value
        return have is None
    if have is None:
        return False
    if op == "=":
        return bool(have == want)
    if op == "in":
        return have in want
    if op == "<":
        return bool(have < want)
    if op == "<=":
        return bool(have <= want)
    if op == ">":
        return bool(have > want)
    if op == ">=":
        return bool(have >= want)
    raise ValueError(f"unknown operator {op!r}")


# -- SQLite --------------------------------------------------------------------------

_META = """
CREATE TABLE IF NOT EXISTS views (
  name TEXT PRIMARY KEY, signature TEXT NOT NULL, seq INTEGER NOT NULL, digest TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counts (
  view TEXT NOT NULL, col TEXT NOT NULL, value TEXT NOT NULL, n INTEGER NOT NULL,
  PRIMARY KEY (view, col, value)
) WITHOUT ROWID;
"""
_BUSY = ("locked", "busy")
_UNAVAILABLE = ("disk i/o", "unable to open", "full", "readonly", "read-only")


class SqliteViewStore:
    """One SQLite file in WAL mode; `synchronous=NORMAL` since views can be replayed.

    Each thread gets its own connection, so one store serves many threads.
    """

    def __init__(self, path: Path, specs: Sequence[ViewSpec], *, busy_timeout: float = 30.0
                 ) -> None:
        self.path = path
        self.specs = {spec.name: spec for spec in specs}
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()

    # -- connection and errors -------------------------------------------------

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None:
            return db
        if not create and not self.path.exists():
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._guard():
            db = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout,
                                 check_same_thread=False)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                tables = {row[0] for row in db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "state" in tables or "checkpoint" in tables:
                    # Views of the earlier single-checkpoint format: rebuilt from the log.
                    db.executescript("DROP TABLE IF EXISTS state; DROP TABLE IF EXISTS "
                                     "checkpoint; DROP TABLE IF EXISTS meta;")
                db.executescript(_META)
            except BaseException:
                db.close()
                raise
        self._local.db = db
        self._local.tables = set()
        with self._all_lock:
            self._all.append(db)
        return db

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Classify SQLite's errors: busy and I/O errors are transient (never a reason
        to delete the views); only a damaged file is Corrupt."""
        try:
            yield
        except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise  # a bug in uwf, not a state of the file
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if any(word in text for word in _BUSY):
                raise StoreBusy(f"the views are busy ({self.path}: {exc})", "retry") from None
            if any(word in text for word in _UNAVAILABLE):
                raise StoreUnavailable(f"cannot use the views ({self.path}: {exc})",
                                       "check the disk and permissions, then retry") from None
            raise self._corrupt(exc) from None
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from None
        except UnicodeDecodeError as exc:  # sqlite3 could not decode its own message:
            raise self._corrupt(exc) from None  # the schema's text is damaged

    def _blob(self, value: object) -> bytes:
        """A stored state; anything but a BLOB (a hand-edited row) is a damaged view."""
        if not isinstance(value, bytes):
            raise self._corrupt(ValueError(f"a state stored as {type(value).__name__}"))
        return value

    def _key(self, key: object) -> str:
        """A stored key; anything but TEXT (a hand-edited row) is a damaged view."""
        if not isinstance(key, str):
            raise self._corrupt(ValueError(f"a key stored as {type(key).__name__}"))
        return key

    def _corrupt(self, exc: Exception) -> Corrupt:
        return Corrupt(f"views are unreadable ({self.path}: {exc})", "run `uwf registry rebuild`")

    def close(self) -> None:
        with self._all_lock:
            for db in self._all:
                db.close()
            self._all.clear()
        self._local = threading.local()

    # -- reads -------------------------------------------------------------------

    def checkpoints(self) -> dict[str, Checkpoint]:
        with self._guard():
            db = self._connect(create=False)
            if db is None:
                return {}
            return self._checkpoints(db)

    def _checkpoints(self, db: sqlite3.Connection) -> dict[str, Checkpoint]:
        found = {}
        for name, signature, seq, digest in db.execute(
                "SELECT name, signature, seq, digest FROM views"):
            spec = self.specs.get(name)
            if spec is not None and spec.signature == signature:
                if type(seq) is not int or not isinstance(digest, str):  # a hand edit
                    raise self._corrupt(ValueError(f"view {name}'s checkpoint is not a seq "
                                                   "and a digest"))
                found[name] = Checkpoint(seq, digest)
        return found

    def _reader(self, view: str) -> sqlite3.Connection | None:
        """A connection when the view's table exists (it may not, before a first fold)."""
        db = self._connect(create=False)
        if db is None:
            return None
        if view not in self.specs:
            raise ValueError(f"unknown view {view!r}")
        known: set[str] = self._local.tables
        if view in known:  # tables are only ever replaced within one transaction
            return db
        row = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                         (f"v_{view}",)).fetchone()
        if row is None:
            return None
        known.add(view)
        return db

    def load(self, view: str, key: str) -> bytes | None:
        with self._guard():
            db = self._reader(view)
            if db is None:
                return None
            row = db.execute(f'SELECT value FROM "v_{view}" WHERE key = ?', (key,)).fetchone()
            return None if row is None else self._blob(row[0])

    def load_many(self, view: str, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        with self._guard():
            db = self._reader(view)
            if db is None:
                return found
            for chunk in _chunks(sorted(set(keys))):
                found.update(db.execute(
                    f'SELECT key, value FROM "v_{view}" WHERE key IN '
                    f"({', '.join('?' * len(chunk))})", chunk).fetchall())
        return {key: self._blob(value) for key, value in found.items()}

    def _filter(self, query: Query) -> tuple[str, list[Any]]:
        spec = self.specs[query.view]
        conditions: list[str] = []
        params: list[Any] = []
        for column, op, value in query.where:
            name = _column_sql(spec, column)
            if op == "in":
                values = list(value)
                conditions.append(f"{name} IN ({', '.join('?' * len(values))})"
                                  if values else "0")
                params.extend(values)
            elif op == "=" and value is None:  # the rows without a value (indexed)
                conditions.append(f"{name} IS NULL")
            elif op in _OPS:
                conditions.append(f"{name} {op} ?")
                params.append(value)
            else:
                raise ValueError(f"unknown operator {op!r}")
        for term in search_terms(query.text):
            if len(term) >= 3:  # the trigram index answers terms of 3+ characters
                conditions.append(f'rowid IN (SELECT rowid FROM "f_{spec.name}" '
                                  f'WHERE "f_{spec.name}" MATCH ?)')
                params.append('"' + term.replace('"', '""') + '"')
            else:
                conditions.append("instr(text, ?) > 0")
                params.append(term)
        return (" WHERE " + " AND ".join(conditions)) if conditions else "", params

    def query(self, query: Query) -> list[tuple[str, bytes]]:
        spec = self.specs[query.view]
        if query.text is not None and not spec.text:
            raise ValueError(f"view {spec.name} has no search text")
        where, params = self._filter(query)
        order = ", ".join(
            f"{_column_sql(spec, term.lstrip('-'))} {'DESC' if term.startswith('-') else 'ASC'}"
            for term in _order_terms(query.order))
        sql = (f'SELECT key, value FROM "v_{spec.name}"{where} ORDER BY {order} '
               "LIMIT ? OFFSET ?")
        with self._guard():
            db = self._reader(spec.name)
            if db is None:
                return []
            rows = db.execute(sql, [*params, -1 if query.limit is None else query.limit,
                                    query.offset]).fetchall()
        return [(self._key(key), self._blob(value)) for key, value in rows]

    def count(self, query: Query) -> int:
        where, params = self._filter(query)
        counted = self.specs[query.view].counted
        with self._guard():
            db = self._reader(query.view)
            if db is None:
                return 0
            if not where and counted:  # every row: the kept counts add up to it
                row = db.execute("SELECT coalesce(sum(n), 0) FROM counts WHERE view = ? AND "
                                 "col = ?", (query.view, counted[0])).fetchone()
                return int(row[0])
            row = db.execute(f'SELECT count(*) FROM "v_{query.view}"{where}', params).fetchone()
            return int(row[0])

    def counts(self, view: str, column: str) -> dict[ColumnValue, int]:
        spec = self.specs[view]
        with self._guard():
            db = self._reader(view)
            if db is None:
                return {}
            if column in spec.counted:  # kept up to date by commit: O(distinct values)
                rows = db.execute("SELECT value, n FROM counts WHERE view = ? AND col = ?",
                                  (view, column)).fetchall()
                return self._counted(view, rows)
            name = _column_sql(spec, column)
            rows = db.execute(f'SELECT {name}, count(*) FROM "v_{view}" GROUP BY {name}'
                              ).fetchall()
            return {value: int(n) for value, n in rows}

    def _counted(self, view: str, rows: list[tuple[Any, Any]]) -> dict[ColumnValue, int]:
        """The kept counts as written by commit; anything else is a damaged view."""
        found: dict[ColumnValue, int] = {}
        for value, n in rows:
            decoded = _count_value(value)
            if decoded is ... or type(n) is not int:
                raise self._corrupt(ValueError(f"a kept count of view {view} is {value!r}: "
                                               f"{n!r}"))
            if n:
                found[decoded] = n
        return found

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        with self._guard():
            db = self._reader(view)
            if db is None:
                return
            rows = db.execute(f'SELECT key, value FROM "v_{view}" ORDER BY key').fetchall()
        for key, value in rows:
            yield self._key(key), self._blob(value)

    # -- writes ------------------------------------------------------------------

    def commit(self, changes: Changes, expected: Mapping[str, Checkpoint | None],
               new: Checkpoint, *, reset: bool = False) -> bool:
        with self._guard():
            db = self._connect(create=True)
            assert db is not None
            db.execute("BEGIN IMMEDIATE")
            try:
                current = self._checkpoints(db)
                if any(current.get(name) != want for name, want in expected.items()):
                    db.execute("ROLLBACK")
                    return False
                for name, want in expected.items():
                    spec = self.specs[name]
                    fresh = want is None or reset
                    if fresh:
                        self._create(db, spec)
                    self._apply(db, spec, changes.get(name, {}), fresh=fresh)
                created = [name for name, want in expected.items() if want is None or reset]
                if created:
                    db.executemany("INSERT OR REPLACE INTO views VALUES (?, ?, ?, ?)",
                                   [(name, self.specs[name].signature, new.seq, new.digest)
                                    for name in created])
                moved = [name for name in expected if name not in created]
                if moved:  # their rows are there, at this signature: one UPDATE moves all
                    db.execute(f"UPDATE views SET seq = ?, digest = ? WHERE name IN "
                               f"({', '.join('?' * len(moved))})",
                               (new.seq, new.digest, *moved))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            return True

    def _create(self, db: sqlite3.Connection, spec: ViewSpec) -> None:
        """An empty table for the view at its declared shape (dropping any earlier one)."""
        name = spec.name
        db.execute(f'DROP TABLE IF EXISTS "v_{name}"')
        db.execute(f'DROP TABLE IF EXISTS "f_{name}"')
        db.execute("DELETE FROM counts WHERE view = ?", (name,))
        columns = "".join(f', "c_{column}"' for column in spec.columns)
        db.execute(f'CREATE TABLE "v_{name}" (key TEXT NOT NULL UNIQUE, value BLOB NOT NULL'
                   f"{columns}, text TEXT NOT NULL DEFAULT '')")
        for number, index in enumerate(spec.indexes):
            fields = ", ".join(_column_sql(spec, column) for column in index)
            db.execute(f'CREATE INDEX "i_{name}_{number}" ON "v_{name}" ({fields})')
        if spec.text:
            db.execute(f'CREATE VIRTUAL TABLE "f_{name}" USING fts5(text, '
                       "tokenize='trigram case_sensitive 1')")

    def _apply(self, db: sqlite3.Connection, spec: ViewSpec, rows: Mapping[str, Row | None],
               *, fresh: bool = False) -> None:
        """Write `rows` into the view's table; `fresh`: the table was just created, so
        there is nothing to look up or delete, and the search index is filled in bulk."""
        if not rows:
            return
        name = spec.name
        delta: dict[tuple[str, str], int] = {}
        counted = [(column, spec.columns.index(column)) for column in spec.counted]
        if counted and not fresh:
            selected = ", ".join(f'"c_{column}"' for column, _ in counted)
            for chunk in _chunks(list(rows)):
                for old in db.execute(f'SELECT {selected} FROM "v_{name}" WHERE key IN '
                                      f"({', '.join('?' * len(chunk))})", chunk):
                    for (column, _), value in zip(counted, old, strict=True):
                        slot = (column, json.dumps(value))
                        delta[slot] = delta.get(slot, 0) - 1
        deletes = [(key,) for key, row in rows.items() if row is None]
        upserts = [(key, row.value, *row.columns, row.text.translate(_ASCII_LOWER))
                   for key, row in rows.items() if row is not None]
        if spec.text and not fresh:
            db.executemany(f'DELETE FROM "f_{name}" WHERE rowid = '
                           f'(SELECT rowid FROM "v_{name}" WHERE key = ?)', [(k,) for k in rows])
        if deletes:
            db.executemany(f'DELETE FROM "v_{name}" WHERE key = ?', deletes)
        if upserts:
            columns = "".join(f', "c_{column}"' for column in spec.columns)
            marks = ", ".join("?" * (len(spec.columns) + 3))
            updates = ", ".join(f'"c_{c}" = excluded."c_{c}"' for c in spec.columns)
            db.executemany(
                f'INSERT INTO "v_{name}" (key, value{columns}, text) VALUES ({marks}) '
                f"ON CONFLICT(key) DO UPDATE SET value = excluded.value, text = excluded.text"
                + (f", {updates}" if updates else ""), upserts)
            if spec.text and fresh:
                db.execute(f'INSERT INTO "f_{name}" (rowid, text) SELECT rowid, text '
                           f'FROM "v_{name}"')
            elif spec.text:
                db.executemany(f'INSERT INTO "f_{name}" (rowid, text) SELECT rowid, text '
                               f'FROM "v_{name}" WHERE key = ?', [(u[0],) for u in upserts])
        for row in rows.values():
            if row is not None:
                for column, index in counted:
                    slot = (column, json.dumps(row.columns[index]))
                    delta[slot] = delta.get(slot, 0) + 1
        # A count that falls to 0 keeps its row (readers skip it): one statement, not two.
        moved = [(name, column, value, n) for (column, value), n in delta.items() if n]
        if moved:
            db.executemany("INSERT INTO counts VALUES (?, ?, ?, ?) ON CONFLICT (view, col, "
                           "value) DO UPDATE SET n = n + excluded.n", moved)

    def drop(self) -> None:
        """Delete the file (and its WAL): the way out of a corrupt view store."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")


def _count_value(value: object) -> ColumnValue | EllipsisType:
    """A kept count's column value (JSON of an int, a string or null); ... if it is not."""
    try:
        decoded = json.loads(value) if isinstance(value, str) else ...
    except ValueError:
        return ...
    return decoded if decoded is None or type(decoded) in (int, str) else ...


def _chunks(keys: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    """Keys a few hundred at a time: one statement's parameters stay well under
    SQLite's limit."""
    for start in range(0, len(keys), size):
        yield keys[start:start + size]


def _column_sql(spec: ViewSpec, column: str) -> str:
    if column == "key":
        return "key"
    if column not in spec.columns:
        raise ValueError(f"view {spec.name} has no column {column!r}")
    return f'"c_{column}"'
