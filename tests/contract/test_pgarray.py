"""Arrays built in PostgreSQL's binary form in one pass (uwf/engine/pgarray.py, issue 31), sent
to a real server (tests/pgkit.py) and read back: what psycopg's own dumper would send."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from uwf.engine import pgarray
from uwf.engine.pgdb import PgDatabase

pytest.importorskip("psycopg")


@pytest.fixture
def database(pg_url: str) -> Iterator[PgDatabase]:
    opened = PgDatabase(pg_url)
    yield opened
    opened.close()


def test_arrays_read_back_as_sent(database: PgDatabase) -> None:
    got = database.reader.execute(
        "SELECT %b::bytea[], %b::text[], %b::bigint[], %b::text[], %b::bigint[], "
        "%b::bytea[], cardinality(%b::text[])",
        (pgarray.bytea([b"a\x00b", None, b""]), pgarray.text(["x", None, "é", ""]),
         pgarray.int8([1, -2, 2**63 - 1, -(2**63)]), pgarray.text([]), pgarray.int8([]),
         pgarray.bytea([b"\xff" * 70_000]), pgarray.text(["one"]))).fetchone()
    assert got == ([b"a\x00b", None, b""], ["x", None, "é", ""],
                   [1, -2, 2**63 - 1, -(2**63)], [], [], [b"\xff" * 70_000], 1)


def test_a_prepared_statement_takes_them_in_binary(database: PgDatabase) -> None:
    """`PgDatabase.prepared` (libpq directly): the statement prepared on first use, an
    array and a NULL sent as given, the first column read back as text."""
    sql = "SELECT array_to_string($1::text[], ',', '-') || coalesce($2::text, '?')"
    values = [bytes(pgarray.text(["a", None, "c"])), None]
    assert database.prepared("uwf_test_join", sql, values) == b"a,-,c?"
    assert database.prepared("uwf_test_join", sql, values) == b"a,-,c?"
