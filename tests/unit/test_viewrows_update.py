"""`viewrows.write_rows` updates a stored row in the columns whose value or type changed
only (compared inline, a column at a time): an equal value of another type (True for
the 1 stored) is a change too, so a row never keeps a stale type."""

from __future__ import annotations

import sqlite3

import pytest

from uwf.engine.viewrows import create_table, write_rows
from uwf.engine.viewspec import Row, Rows, ViewSpec

SPEC = ViewSpec("t", 1, ("a", "b", "c"))


@pytest.fixture
def db() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE counts (view TEXT, col TEXT, value TEXT, n INTEGER, "
               "PRIMARY KEY (view, col, value))")
    create_table(db, SPEC)
    return db


def stored(db: sqlite3.Connection) -> tuple[object, ...]:
    found: tuple[object, ...] = db.execute(
        'SELECT value, c_a, typeof(c_a), c_b, typeof(c_b), c_c FROM "v_t"').fetchone()
    return found


@pytest.mark.parametrize("known", [False, True])  # read back, or the writer's `before`
def test_a_row_is_updated_where_a_value_or_its_type_changed(db: sqlite3.Connection,
                                                            known: bool) -> None:
    first = Row(b"1", (1, "x", None))
    write_rows(db, SPEC, {"k": first})
    updates: list[str] = []
    db.set_trace_callback(updates.append)
    second = Row(b"2", (True, "x", 5))  # a: an equal value of another type; c: a new one
    write_rows(db, SPEC, Rows({"k": second}, {"k": first}) if known else {"k": second})
    assert stored(db) == (b"2", 1, "integer", "x", "text", 5)
    (update,) = [sql for sql in updates if sql.startswith("UPDATE")]
    assert '"c_a" = ' in update
    assert '"c_b"' not in update  # unchanged: its index entry left alone
    assert '"c_c" = ' in update


def test_an_unchanged_row_sets_no_column(db: sqlite3.Connection) -> None:
    row = Row(b"1", (1, "x", None))
    write_rows(db, SPEC, {"k": row})
    updates: list[str] = []
    db.set_trace_callback(updates.append)
    write_rows(db, SPEC, Rows({"k": Row(b"2", (1, "x", None))}, {"k": row}))
    (update,) = [sql for sql in updates if sql.startswith("UPDATE")]
    assert '"c_' not in update
    assert stored(db)[0] == b"2"
