"""A view's secondary indexes in the SQLite view store made on its first read by a
column (a listing, a count), not by the commit that loads the view anew, for the views
that say so (`ViewSpec.on_read`: the `runs` and `threads` views, whose indexes serve
listings only). A full replay then loads their rows and stops (making the runs' and
the threads' 11 indexes was ~0.8 CPU-s of a 1.04M-event replay), and a snapshot holds
their rows without them (~100 MiB of the run mix's 609): the first listing after a
rebuild or a restore makes them, in a write transaction of its own.

While they are absent every commit has fewer index entries to write, and a read that
cannot make them (a views file this process may not write, a read inside a write
transaction) goes by the table: the same rows, found more slowly. Once made, SQLite
keeps them in every commit. Their statistics (`PRAGMA optimize`) are refreshed when
the connection closes, as every table's (`optimize`)."""

from __future__ import annotations

import sqlite3

from uwf.engine.sqlquery import column_sql, partial_sql
from uwf.engine.viewspec import ViewSpec


def statements(spec: ViewSpec) -> list[str]:
    """The view's secondary indexes, one CREATE INDEX each (IF NOT EXISTS)."""
    name = spec.name
    return [f'CREATE INDEX IF NOT EXISTS "i_{name}_{number}" ON "v_{name}" '
            f'({", ".join(column_sql(spec, column) for column in index)})'
            f"{partial_sql(spec, index)}" for number, index in enumerate(spec.indexes)]


def missing(db: sqlite3.Connection, spec: ViewSpec) -> bool:
    """Whether any of the view's secondary indexes is absent."""
    row = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                     "tbl_name = ? AND name LIKE 'i\\_%' ESCAPE '\\'",
                     (f"v_{spec.name}",)).fetchone()
    return int(row[0]) < len(spec.indexes)


def ensure(db: sqlite3.Connection, spec: ViewSpec, known: dict[str, int]) -> None:
    """Make the view's indexes when it makes them on its first read and one is absent.
    `known`: the schema version at which each view was last found indexed (this
    connection's), so a read looks at `sqlite_master` only when the schema changed (a
    rebuild, a restore); a read that cannot make them (read-only, inside a
    transaction) looks again next time."""
    if not spec.on_read or not spec.indexes:
        return
    version = int(db.execute("PRAGMA schema_version").fetchone()[0])
    if known.get(spec.name) == version:
        return
    if missing(db, spec) and not _make(db, spec):
        return
    known[spec.name] = int(db.execute("PRAGMA schema_version").fetchone()[0])


def _make(db: sqlite3.Connection, spec: ViewSpec) -> bool:
    """The view's indexes made, in a write transaction of their own; whether they are
    there now (False, changing nothing, inside a transaction or on a file this process
    cannot write)."""
    if db.in_transaction:
        return False
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _read_only(exc):
            return False
        raise
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (f"v_{spec.name}",)).fetchone() is None:
            db.execute("ROLLBACK")
            return False
        for statement in statements(spec):
            db.execute(statement)
        db.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        if _read_only(exc):
            return False
        raise
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return True


def _read_only(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text


def optimize(db: sqlite3.Connection) -> None:
    """Let SQLite refresh its statistics of the tables this connection queried when they
    have none or have grown much since (`PRAGMA optimize`, a sampled ANALYZE: ~25 ms at
    100,000 runs, nothing most times). Without them it guesses, and picks, say, the
    (derived, deadline) range for `run list --status running` and sorts 15,000 runs
    instead of walking (derived, created_at) to the page's end. Best effort, never
    waiting for a writer: a busy or read-only file keeps the statistics it has."""
    try:
        if db.in_transaction:
            return
        db.execute("PRAGMA busy_timeout = 0")
        db.execute("PRAGMA analysis_limit = 1000")
        db.execute("PRAGMA optimize")
    except sqlite3.Error:
        pass
