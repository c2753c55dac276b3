"""The SQL of the PostgreSQL view store (uwf/engine/pgviews.py): each view's table at
its declared shape, and what a view query becomes, its WHERE and ORDER BY (semantics:
uwf/engine/viewspec.py).

Text is compared in byte order (`COLLATE "C"`, UTF-8: code point order, as Python
compares strings); NULL sorts first ascending and last descending, as the indexes are
declared, so an ordered page is an index range. A view's search text is stored ASCII
lowercased, so a search term (lowercased the same way) is a plain, case-sensitive
`LIKE '%term%'`: the trigram index answers it when pg_trgm is there, a scan otherwise.
ILIKE would fold non-ASCII letters too (é and É), which the other backends do not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from uwf.engine.sqlquery import column_sql, partial_sql
from uwf.engine.viewspec import (
    ASCII_LOWER,
    ColumnValue,
    Query,
    ViewSpec,
    order_terms,
    search_terms,
)

_OPS = ("=", "in", "<", "<=", ">", ">=")
PG_TYPES = {"int": "bigint", "text": 'text COLLATE "C"'}
_ARRAYS = {"int": "bigint[]", "text": "text[]"}
_SEARCHABLE: dict[int, str | int | None] = {**ASCII_LOWER, 0: "\ufffd"}


def table(view: str) -> str:
    """The view's table (quoted)."""
    return f'"uwf_v_{view}"'


def signature(spec: ViewSpec) -> str:
    """The view's signature as this store keeps it: the declared one and the column
    types, so a change of either rebuilds the view."""
    return json.dumps([spec.signature, spec.types])


def check_types(spec: ViewSpec) -> None:
    """A view with columns must say their types: a column here has exactly one."""
    if spec.columns and not spec.types:
        raise ValueError(f"view {spec.name} declares no column types (ViewSpec.types); "
                         "the PostgreSQL view store needs one per column")


def column_type(spec: ViewSpec, column: str) -> str:
    return "text" if column == "key" else spec.types[spec.columns.index(column)]


def create_sql(spec: ViewSpec, *, trigram: bool, extra: str = "") -> tuple[str, list[str]]:
    """The statement that creates the view's table (`extra`: more columns, an overlay's:
    uwf/engine/pgoverlay.py), and those that create its declared indexes and, with
    `trigram`, the search text's trigram index (run after a first fill: building an
    index at once is faster than growing it row by row)."""
    name = spec.name
    columns = "".join(f', "c_{column}" {PG_TYPES[kind]}'
                      for column, kind in zip(spec.columns, spec.types, strict=True))
    create = (f'CREATE TABLE {table(name)} (key text COLLATE "C" PRIMARY KEY, '
              f"value bytea NOT NULL{columns}{extra}, text text COLLATE \"C\" NOT NULL DEFAULT '')")
    indexes = []
    for number, index in enumerate(spec.indexes):
        fields = ", ".join(f"{column_sql(spec, column)} NULLS FIRST" for column in index)
        indexes.append(f'CREATE INDEX "uwf_i_{name}_{number}" ON {table(name)} ({fields})'
                       f"{partial_sql(spec, index)}")
    if spec.text and trigram:
        indexes.append(f'CREATE INDEX "uwf_t_{name}" ON {table(name)} '
                       "USING gin (text gin_trgm_ops)")
    return create, indexes


def copy_sql(spec: ViewSpec) -> str:
    """The COPY that fills an empty table (a first fold, a rebuild)."""
    columns = "".join(f', "c_{column}"' for column in spec.columns)
    return f"COPY {table(spec.name)} (key, value{columns}, text) FROM STDIN"


def upsert_sql(spec: ViewSpec, resets: str = "") -> str:
    """One statement writing many rows, each column given as an array (`unnest`);
    `resets`: more assignments of the update (an overlay emptied)."""
    columns = "".join(f', "c_{column}"' for column in spec.columns)
    # Arrays go in binary (%b): psycopg's text form escapes each item in Python.
    arrays = ", ".join(["%b::text[]", "%b::bytea[]",
                        *(f"%b::{_ARRAYS[kind]}" for kind in spec.types), "%b::text[]"])
    updates = "".join(f', "c_{c}" = excluded."c_{c}"' for c in spec.columns)
    return (f"INSERT INTO {table(spec.name)} (key, value{columns}, text) "
            f"SELECT * FROM unnest({arrays}) ON CONFLICT (key) DO UPDATE SET "
            f"value = excluded.value, text = excluded.text{updates}{resets}")


def searchable(text: str) -> str:
    """A search text (or term) as stored: ASCII lowercase, and NUL, which PostgreSQL's
    text cannot hold, as U+FFFD (so a write never fails for it)."""
    return text.translate(_SEARCHABLE)


def typed(spec: ViewSpec, values: Sequence[ColumnValue]) -> list[ColumnValue]:
    """A row's column values as its table holds them (bool is an int); a value of
    another type than its column's is refused."""
    found: list[ColumnValue] = []
    for column, kind, value in zip(spec.columns, spec.types, values, strict=True):
        if value is None or (kind == "text" and type(value) is str):
            found.append(value)
        elif kind == "int" and isinstance(value, int):
            found.append(int(value))
        else:
            raise ValueError(f"view {spec.name}: column {column} is {kind}, not "
                             f"{value!r}")
    return found


def _param(spec: ViewSpec, column: str, kind: str, value: Any) -> ColumnValue:
    """A value a column is compared with, of the column's type (bool is an int): the
    other backends compare across types, which no query of uwf means to do."""
    if kind == "text" and type(value) is str:
        return value
    if kind == "int" and isinstance(value, int):
        return int(value)
    raise ValueError(f"view {spec.name}: column {column} is {kind}, not compared with "
                     f"{value!r}")


def where_sql(spec: ViewSpec, query: Query) -> tuple[str, list[Any]]:
    """` WHERE ...` (or nothing) for the query's filters and search terms, and its
    parameters."""
    conditions: list[str] = []
    params: list[Any] = []
    for column, op, value in query.where:
        name = column_sql(spec, column)
        kind = column_type(spec, column)
        if op == "in":
            conditions.append(f"{name} = ANY(%b::{_ARRAYS[kind]})")
            params.append([_param(spec, column, kind, item) for item in value])
        elif op == "=" and value is None:  # the rows without a value (indexed)
            conditions.append(f"{name} IS NULL")
        elif op in _OPS:
            conditions.append(f"{name} {op} %s")
            params.append(_param(spec, column, kind, value))
        else:
            raise ValueError(f"unknown operator {op!r}")
    for term in search_terms(query.text):
        conditions.append("text LIKE %s")
        escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params.append(f"%{searchable(escaped)}%")
    return (" WHERE " + " AND ".join(conditions)) if conditions else "", params


def order_sql(spec: ViewSpec, order: Sequence[str]) -> str:
    """The ORDER BY terms, ending with the key; NULL first ascending, last descending."""
    return ", ".join(
        f"{column_sql(spec, term.lstrip('-'))} "
        f"{'DESC NULLS LAST' if term.startswith('-') else 'ASC NULLS FIRST'}"
        for term in order_terms(order))
