"""A view's secondary indexes in the SQLite view store made by the first reads that
may be planned on them (a listing, a count with a filter), not by the commit that
loads the view anew, for the views that say so (`ViewSpec.on_read`: the `runs` and
`threads` views, whose indexes serve listings, and the `steps` view, whose index
serves a rerun's and a fork's lookup by StepNode, each read before its write). A full
replay then loads their rows and stops (making those 12 indexes was ~1.2 CPU-s of a
1.04M-event replay), and a snapshot holds their rows without them (~125 MiB of the
run mix's 609): a read after a rebuild or a restore makes the indexes it may be
planned on (`serving`), in a write transaction of its own.

While they are absent every commit has fewer index entries to write, and a read that
cannot make them (a views file this process may not write, or a writer holds past the
busy timeout; a read inside a write transaction) goes by the table: the same rows,
found more slowly. Once made, SQLite
keeps them in every commit. Their statistics (`PRAGMA optimize`) are refreshed when
the connection closes, as every table's (`optimize`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from uwf.engine.sqliteguard import made_apart
from uwf.engine.sqlquery import column_sql, partial_sql
from uwf.engine.viewspec import Query, ViewSpec, order_terms


def statements(spec: ViewSpec, numbers: Iterable[int] | None = None) -> list[str]:
    """The view's secondary indexes (those `numbers`, or all), one CREATE INDEX each (IF
    NOT EXISTS)."""
    name = spec.name
    chosen = range(len(spec.indexes)) if numbers is None else numbers
    return [f'CREATE INDEX IF NOT EXISTS "i_{name}_{number}" ON "v_{name}" '
            f'({", ".join(column_sql(spec, column) for column in spec.indexes[number])})'
            f"{partial_sql(spec, spec.indexes[number])}" for number in chosen]


def serving(spec: ViewSpec, query: Query) -> list[int]:
    """The indexes a query may be planned on: those led by a column it filters by, and
    those whose columns begin its order (`run list` alone: `(created_at, key)`). The
    others could serve it no better than its table (SQLite reads an index from its first
    column), so a read makes only these: the first `run list` one index, not seven."""
    filtered = {column for column, _, _ in query.where}
    order = tuple(term.lstrip("-") for term in order_terms(query.order))
    return [number for number, index in enumerate(spec.indexes)
            if index[0] in filtered or order[:len(index)] == index]


def present(db: sqlite3.Connection, spec: ViewSpec) -> set[str]:
    """The names of the view's secondary indexes there now."""
    return {name for name, in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND "
        "name LIKE 'i\\_%' ESCAPE '\\'", (f"v_{spec.name}",))}


def ensure(db: sqlite3.Connection, spec: ViewSpec, query: Query,
           known: dict[str, tuple[int, set[str]]]) -> None:
    """Make the indexes `query` may be planned on (`serving`) that are absent, when the
    view makes its indexes on its first reads (`ViewSpec.on_read`). `known`: by view,
    the schema version and the indexes there at it (this connection's), so a read looks
    at `sqlite_master` only when the schema changed (a rebuild, a restore, an index
    made); a read that cannot make them (read-only, busy past the timeout, inside a
    transaction) goes by the table, and the next one tries again."""
    if not spec.on_read or not spec.indexes:
        return
    wanted = serving(spec, query)
    if not wanted:
        return
    version = int(db.execute("PRAGMA schema_version").fetchone()[0])
    seen = known.get(spec.name)
    if seen is None or seen[0] != version:
        seen = known[spec.name] = (version, present(db, spec))
    absent = [number for number in wanted if f"i_{spec.name}_{number}" not in seen[1]]
    if absent and _make(db, spec, absent):
        known[spec.name] = (int(db.execute("PRAGMA schema_version").fetchone()[0]),
                            present(db, spec))


def _make(db: sqlite3.Connection, spec: ViewSpec, numbers: list[int]) -> bool:
    """Those indexes of the view made, in a write transaction of their own; whether they
    are there now (False, changing nothing, when they cannot be made now: `made_apart`)."""
    def make() -> None:
        for statement in statements(spec, numbers):
            db.execute(statement)

    return made_apart(db, f"v_{spec.name}", make)


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
