"""A view's fields kept as columns beside its stored value (schema 7, issue 31).

A server-side command (uwf/queue/pgcalls.py) changes a few fields of a row: rewriting
the row's stored JSON for them (found by their bytes and edited in place) cost ~276,000
of the server's ~2.28 M instructions a lease+complete cycle (docs/benchmarks.md, the
h9/pg9 section). With an overlay it writes those fields as plain columns of the row
instead, and leaves `value` as the last write in Python left it; a read builds the
row's value from the two (`value_sql`: `value` itself when the overlay is empty). The
ordinary way's writes (`PgViewStore.commit`, the one-call write of
uwf/engine/pgwrite.py) write the whole value and empty the overlay (`resets`).

An overlay may also keep what the server reads parsed, once after each write (the
sched view's policy as `jsonb`: a lease read and parsed its JSON every time, ~56,000
instructions a cycle). Not a generated column: an upsert computes one twice, for the
row proposed and for the row updated (+110,000 instructions a `sched.set_policy`).

What a row's overlay holds and how the value is built from it is the feature's
(the queue's: uwf/queue/pgentry.py); this module is the shape the view store knows:
the columns (all NULL when empty: the first one says whether the overlay is set) and
the SQL of the value. Its columns are made with the view's table, and added to a
schema-6 database's by migration 7 (uwf/engine/pgschema.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Overlay:
    """The columns (name, PostgreSQL type) of a view's overlay, each NULL when it is
    empty, and the SQL of a row's value over its table's columns (a `bytea`)."""

    columns: tuple[tuple[str, str], ...]
    value_sql: str = "value"

    def __post_init__(self) -> None:
        for name, _ in self.columns:
            if not name.startswith("e_") or not name.replace("_", "").isalnum():
                raise ValueError(f"an overlay's column is named e_<word>, not {name!r}")

    def create_sql(self) -> str:
        """The columns as `CREATE TABLE` declares them (after the declared ones)."""
        return "".join(f", {name} {kind}" for name, kind in self.columns)

    def add_sql(self, table: str) -> str:
        """The statement adding the columns to a table made without them."""
        added = ", ".join(f"ADD COLUMN IF NOT EXISTS {name} {kind}"
                          for name, kind in self.columns)
        return f"ALTER TABLE IF EXISTS {table} {added}"

    def resets(self) -> str:
        """The assignments of an upsert's update emptying the overlay."""
        return "".join(f", {name} = NULL" for name, _ in self.columns)


def value_sql(overlay: Overlay | None) -> str:
    """SQL: a row's value, over its table's columns."""
    return "value" if overlay is None else overlay.value_sql


def resets(overlay: Overlay | None) -> str:
    return "" if overlay is None else overlay.resets()
