"""How a commit writes view rows into SQLite (uwf/engine/viewstore.py): a new view's
table, loaded first and indexed after; rows inserted, or updated in the columns that
changed; the kept counts; the stream index."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections import Counter
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from uwf.engine import fulltext
from uwf.engine.sqlquery import chunks, column_sql, partial_sql
from uwf.engine.viewspec import NewRows, Row, StreamEntries, ViewSpec, ascii_lower


def add_streams(db: sqlite3.Connection, entries: StreamEntries, *, fresh: bool,
                ordered: bool = False) -> None:
    """Add events to the stream index; `fresh`: start a new, empty one first.
    `ordered`: insert in key order (a rebuild adds every event of the log)."""
    if fresh:
        db.execute("DROP TABLE IF EXISTS streams")
        db.execute("CREATE TABLE streams (subject TEXT NOT NULL, seq INTEGER NOT NULL, "
                   "PRIMARY KEY (subject, seq)) WITHOUT ROWID")
    if fresh or ordered:
        entries = sorted(entries, key=itemgetter(0))  # (subject, seq): seqs come in order
    if entries:
        db.executemany("INSERT INTO streams VALUES (?, ?)", entries)


def unjournalled(db: sqlite3.Connection) -> bool:
    """Turn the views file's journal off for a full replay into views that hold nothing,
    when no other connection has it open (SQLite leaves WAL mode only then): its pages are
    written once, into the file, not into the WAL and again at the checkpoint (about a
    quarter of the replay's SQL CPU, docs/benchmarks.md). No checkpoint is written until
    the replay's last statement, so a replay cut short leaves views that hold none (a
    damaged file is Corrupt, and replaced): never a part taken for the whole. Whether it
    did (else the replay goes through the WAL, as every commit)."""
    busy = db.execute("PRAGMA busy_timeout").fetchone()[0]
    db.execute("PRAGMA busy_timeout = 0")
    try:
        mode = db.execute("PRAGMA journal_mode=OFF").fetchone()[0]
    except sqlite3.OperationalError:  # another connection is open: it must stay valid
        mode = "wal"
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(busy)}")
    if str(mode).lower() != "off":
        return False
    # Held from the first write to `journalled`: no connection comes between the rows'
    # commit and the checkpoints' (`settled`).
    db.execute("PRAGMA locking_mode=EXCLUSIVE")
    return True


def settled(db: sqlite3.Connection) -> None:
    """Commit the rows of a replay without a journal before its checkpoints are written,
    in a transaction of their own: with no journal, a commit writes its dirty pages in
    the file's order, the checkpoints' (near its start) before the last rows'; a kill
    in that write could leave checkpoints that claim rows not yet on disk. Committed
    first, every row's page is written (kill -9 cannot take back a finished write) before
    the checkpoints' page is touched; a kill between the two leaves views that claim
    none. The exclusive lock (`unjournalled`) keeps every other connection out meanwhile."""
    db.execute("COMMIT")
    db.execute("BEGIN IMMEDIATE")


def journalled(db: sqlite3.Connection) -> None:
    """The views file back in WAL mode, and its lock shared again, after `unjournalled`
    (best effort: a file dropped meanwhile has nothing to turn back; the next connection
    turns it to WAL anyway)."""
    with contextlib.suppress(sqlite3.Error):  # (closed by a drop: an Error too)
        if not db.in_transaction:
            db.execute("PRAGMA locking_mode=NORMAL")
            db.execute("PRAGMA journal_mode=WAL")


def create_table(db: sqlite3.Connection, spec: ViewSpec) -> None:
    """An empty table for the view (dropping any earlier one), without its indexes: the
    commit that loads it makes them at its end (`index_table`)."""
    name = spec.name
    db.execute(f'DROP TABLE IF EXISTS "v_{name}"')
    fulltext.drop(db, name)
    db.execute("DELETE FROM counts WHERE view = ?", (name,))
    columns = "".join(f', "c_{column}"' for column in spec.columns)
    db.execute(f'CREATE TABLE "v_{name}" (key TEXT NOT NULL UNIQUE, value BLOB NOT NULL'
               f"{columns}, text TEXT NOT NULL DEFAULT '')")


def index_table(db: sqlite3.Connection, spec: ViewSpec) -> None:
    """A new table's indexes, made once its rows are loaded: building an index from a
    full table (one sort) costs less than keeping it row by row. Its full-text index is
    made on the first text search (uwf/engine/fulltext.py); a view whose indexes are
    made on its first read (`ViewSpec.on_read`) gets none here (uwf/engine/readindex.py)."""
    if spec.on_read:
        return
    name = spec.name
    for number, index in enumerate(spec.indexes):
        fields = ", ".join(column_sql(spec, column) for column in index)
        db.execute(f'CREATE INDEX "i_{name}_{number}" ON "v_{name}" ({fields})'
                   f"{partial_sql(spec, index)}")

def write_rows(db: sqlite3.Connection, spec: ViewSpec, rows: Mapping[str, Row | None], *,
               fresh: bool = False, searched: bool = True) -> None:
    """Write `rows` into the view's table; `fresh`: the table was just created, so
    there is nothing to look up or delete. `searched`: keep its search index row by
    row, when the view has one (else it is made, filled, on the first text search).

    A row already stored is updated in the columns that changed only: SQLite
    rewrites an index entry for each column set, so a lease (3 of the queue's 9
    columns) leaves the other indexes alone, and a row whose text is unchanged
    keeps its search index row (a trigram index is costly to rewrite)."""
    if not rows:
        return
    if isinstance(rows, NewRows) and not (spec.text and searched):
        _insert_tuples(db, spec, rows.inserts)  # spelled by the command, none stored
        return
    known_rows: Mapping[str, Row | None] | None = getattr(rows, "before", None)
    if fresh or (known_rows is not None and len(known_rows) == len(rows)
                 and not any(known_rows.values())):
        _insert_new(db, spec, rows, searched=searched)  # none of them stored
        return
    name = spec.name
    columns = spec.columns
    width = len(columns)
    delta: dict[tuple[str, str], int] = {}
    counted = [(column, columns.index(column)) for column in spec.counted]
    spelled = _Spelled()  # a counted value's JSON, made once a value (a batch has few)
    # key -> (text, column values) as stored
    old: dict[str, tuple[Any, ...]] = {}
    if not fresh:
        # The rows the writer knows are stored (`Rows.before`) are not read back.
        known: Mapping[str, Row | None] = getattr(rows, "before", {})
        for key, was in known.items():
            if was is not None:
                old[key] = (ascii_lower(was.text), *was.columns)
        selected = "".join(f', "c_{column}"' for column in columns)
        unknown = [key for key in rows if key not in known] if known else list(rows)
        for chunk in chunks(unknown):
            for found in db.execute(f'SELECT key, text{selected} FROM "v_{name}" WHERE '
                                    f"key IN ({', '.join('?' * len(chunk))})", chunk):
                old[found[0]] = found[1:]
        for before in old.values():
            for column, position in counted:
                slot = (column, spelled(before[1 + position]))
                delta[slot] = delta.get(slot, 0) - 1
    search = spec.text and searched and fulltext.exists(db, name)
    deletes: list[tuple[str]] = []
    inserts: list[tuple[Any, ...]] = []
    updates: dict[tuple[tuple[int, ...], bool], list[tuple[Any, ...]]] = {}
    unindex: list[tuple[str]] = []  # search rows to remove first
    reindex: list[tuple[str]] = []  # search rows to add last
    for key, row in rows.items():
        stored = old.get(key)
        if row is None:
            if stored is not None:
                deletes.append((key,))
            continue
        text = ascii_lower(row.text)
        values = row.columns
        for column, position in counted:
            slot = (column, spelled(values[position]))
            delta[slot] = delta.get(slot, 0) + 1
        if stored is None:
            inserts.append((key, row.value, *values, text))
            reindex.append((key,))
            continue
        # The columns whose value or type changed (an int read back for a float written
        # is a change, so an update never keeps a stale type): compared inline, no call
        # a column.
        changed = tuple(position for position, (was, value)
                        in enumerate(zip(stored[1:], values, strict=True))
                        if was != value or type(was) is not type(value))
        retext = stored[0] != text
        updates.setdefault((changed, retext), []).append(
            (row.value, *(values[position] for position in changed),
             *((text,) if retext else ()), key))
        if retext:
            unindex.append((key,))
            reindex.append((key,))
    if search and (unindex or deletes):
        db.executemany(f'DELETE FROM "f_{name}" WHERE rowid = '
                       f'(SELECT rowid FROM "v_{name}" WHERE key = ?)', [*unindex, *deletes])
    if deletes:
        db.executemany(f'DELETE FROM "v_{name}" WHERE key = ?', deletes)
    if inserts:
        names = "".join(f', "c_{column}"' for column in columns)
        marks = ", ".join("?" * (width + 3))
        db.executemany(f'INSERT INTO "v_{name}" (key, value{names}, text) VALUES ({marks})',
                       inserts)
    for (changed, retext), params in updates.items():
        sets = "".join(f', "c_{columns[position]}" = ?' for position in changed)
        db.executemany(f'UPDATE "v_{name}" SET value = ?{sets}'
                       f'{", text = ?" if retext else ""} WHERE key = ?', params)
    if search and reindex:
        db.executemany(f'INSERT INTO "f_{name}" (rowid, text) SELECT rowid, text '
                       f'FROM "v_{name}" WHERE key = ?', reindex)
    # A count that falls to 0 keeps its row (readers skip it): one statement, not two.
    moved = [(name, column, value, n) for (column, value), n in delta.items() if n]
    if moved:
        db.executemany("INSERT INTO counts VALUES (?, ?, ?, ?) ON CONFLICT (view, col, "
                       "value) DO UPDATE SET n = n + excluded.n", moved)


def _insert_new(db: sqlite3.Connection, spec: ViewSpec, rows: Mapping[str, Row | None], *,
                searched: bool) -> None:
    """`write_rows` of rows none of which is stored (a new table's, a full replay's part,
    entities a command makes): inserted, and counted, a column at a time."""
    lower = ascii_lower
    inserts = [(key, row.value, *row.columns, lower(row.text))
               for key, row in rows.items() if row is not None]
    if not inserts:
        return
    _insert_tuples(db, spec, inserts)
    if spec.text and searched and fulltext.exists(db, spec.name):
        db.executemany(f'INSERT INTO "f_{spec.name}" (rowid, text) SELECT rowid, text '
                       f'FROM "v_{spec.name}" WHERE key = ?', [(row[0],) for row in inserts])


def _insert_tuples(db: sqlite3.Connection, spec: ViewSpec,
                   inserts: Sequence[tuple[Any, ...]]) -> None:
    """Rows no view holds, as the tuples the table takes (key, value, columns, text):
    inserted as they come, and counted; nothing read, updated or deleted."""
    names = "".join(f', "c_{column}"' for column in spec.columns)
    marks = ", ".join("?" * (len(spec.columns) + 3))
    db.executemany(f'INSERT INTO "v_{spec.name}" (key, value{names}, text) VALUES ({marks})',
                   inserts)
    spelled = _Spelled()
    moved: list[tuple[str, str, str, int]] = []
    for column in spec.counted:
        values = list(map(itemgetter(2 + spec.columns.index(column)), inserts))
        # By type and value, as `_Spelled` (1 and True are one key, not one JSON).
        tally = Counter(zip(map(type, values), values, strict=True))
        moved.extend((spec.name, column, spelled(value), n) for (_, value), n in tally.items())
    if moved:
        db.executemany("INSERT INTO counts VALUES (?, ?, ?, ?) ON CONFLICT (view, col, "
                       "value) DO UPDATE SET n = n + excluded.n", moved)


class _Spelled(dict[tuple[type, Any], str]):
    """A counted column's value as the kept counts spell it (its JSON), kept by value and
    type (1 and True are equal keys, not equal JSON)."""

    def __call__(self, value: Any) -> str:
        key = (type(value), value)
        found = self.get(key)
        if found is None:
            found = self[key] = json.dumps(value)
        return found

