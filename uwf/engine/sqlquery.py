"""The SQL a view query becomes in the SQLite view store: its WHERE (filters and
search terms), its ORDER BY, and the helpers that keep statements within SQLite's
limits and read back what the store wrote (semantics: uwf/engine/viewspec.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from types import EllipsisType
from typing import Any

from uwf.engine.viewspec import ColumnValue, Query, ViewSpec, order_terms, search_terms

_OPS = ("=", "in", "<", "<=", ">", ">=")


def column_sql(spec: ViewSpec, column: str) -> str:
    """A declared column's name in the view's table (`key` is itself)."""
    if column == "key":
        return "key"
    if column not in spec.columns:
        raise ValueError(f"view {spec.name} has no column {column!r}")
    return f'"c_{column}"'


def partial_sql(spec: ViewSpec, index: tuple[str, ...]) -> str:
    """` WHERE ... IS NOT NULL` of an index holding sparse columns (or nothing): the
    same text in SQLite and PostgreSQL."""
    held = spec.index_where(index)
    return (" WHERE " + " AND ".join(f"{column_sql(spec, column)} IS NOT NULL"
                                     for column in held)) if held else ""


def fts_match(text: str | None) -> str | None:
    """The full-text MATCH expression of the search's terms of 3+ characters (the
    trigram index answers those; each a phrase, all of them required), or None."""
    terms = ['"' + term.replace('"', '""') + '"' for term in search_terms(text)
             if len(term) >= 3]
    return " ".join(terms) if terms else None


def where_sql(spec: ViewSpec, query: Query, *, scan: bool = False
              ) -> tuple[str, list[Any]]:
    """` WHERE ...` (or nothing) for the query's filters and search terms, and its
    parameters. Words of 3+ characters are looked up in the full-text index, unless
    `scan`: then every word is tested in each row's text as SQLite walks an index in
    the query's order, stopping at the page's end (the faster plan when the words
    match many rows: no full-text lookup, no sort of every match)."""
    conditions: list[str] = []
    params: list[Any] = []
    for column, op, value in query.where:
        name = column_sql(spec, column)
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
    match = None if scan else fts_match(query.text)
    if match is not None:
        conditions.append(f'rowid IN (SELECT rowid FROM "f_{spec.name}" '
                          f'WHERE "f_{spec.name}" MATCH ?)')
        params.append(match)
    for term in search_terms(query.text):
        if scan or len(term) < 3:  # (shorter than a trigram: always in the row's text)
            conditions.append("instr(text, ?) > 0")
            params.append(term)
    return (" WHERE " + " AND ".join(conditions)) if conditions else "", params


def order_sql(spec: ViewSpec, order: Sequence[str]) -> str:
    """The ORDER BY terms, ending with the key."""
    return ", ".join(
        f"{column_sql(spec, term.lstrip('-'))} {'DESC' if term.startswith('-') else 'ASC'}"
        for term in order_terms(order))


def count_value(value: object) -> ColumnValue | EllipsisType:
    """A kept count's column value (JSON of an int, a string or null); ... if it is not."""
    try:
        decoded = json.loads(value) if isinstance(value, str) else ...
    except ValueError:
        return ...
    return decoded if decoded is None or type(decoded) in (int, str) else ...


def chunks(keys: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    """Keys a few hundred at a time: one statement's parameters stay well under
    SQLite's limit."""
    for start in range(0, len(keys), size):
        yield keys[start:start + size]
