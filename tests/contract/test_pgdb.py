"""The PostgreSQL database a store lives in (uwf/engine/pgdb.py), on a real server
(tests/pgkit.py): one transaction per writer's section, the schema version, and
errors that name the server and database but never the password."""

from __future__ import annotations

import pytest

from tests.pgkit import Server
from uwf.engine.dburl import is_database_url, shown, where
from uwf.engine.pgdb import SCHEMA_VERSION, PgDatabase
from uwf.errors import OldFormat, StoreUnavailable


def test_a_writers_section_is_one_transaction(pg_url: str) -> None:
    db = PgDatabase(pg_url)
    try:
        with db.transaction() as connection:
            connection.execute("CREATE TABLE t (x int)")
        def refused() -> None:
            with db.transaction() as connection:
                connection.execute("INSERT INTO t VALUES (1)")
                assert db.connection().execute("SELECT count(*) FROM t").fetchone() == (1,)
                assert db.reader.execute("SELECT count(*) FROM t").fetchone() == (0,)
                raise RuntimeError("the command is refused")

        with pytest.raises(RuntimeError):
            refused()
        assert db.reader.execute("SELECT count(*) FROM t").fetchone() == (0,)
        with db.transaction() as connection, db.transaction() as inner:
            assert inner is connection
            connection.execute("INSERT INTO t VALUES (2)")
        assert db.reader.execute("SELECT x FROM t").fetchall() == [(2,)]
    finally:
        db.close()


def test_a_newer_schema_fails_closed(pg_url: str) -> None:
    PgDatabase(pg_url).close()
    db = PgDatabase(pg_url)
    with db.transaction() as connection:
        connection.execute("UPDATE uwf_schema SET version = %s", (SCHEMA_VERSION + 1,))
    db.close()
    with pytest.raises(OldFormat, match="written by a newer uwf"):
        PgDatabase(pg_url)


def test_an_unreachable_database_is_one_line_without_the_password(pg_server: Server) -> None:
    url = pg_server.url("no_such_db").replace("postgres@", "postgres:s3cret@")
    with pytest.raises(StoreUnavailable) as refused:
        PgDatabase(url)
    line = refused.value.line()
    assert "\n" not in line
    assert "s3cret" not in line
    assert line.startswith("PostgreSQL database no_such_db on ")


def test_urls_are_told_apart_and_shown_without_passwords() -> None:
    assert is_database_url("postgresql://u@h/db")
    assert is_database_url("postgres://h/db")
    assert not is_database_url("postgresql:")
    assert not is_database_url("./postgresql")
    assert shown("postgresql://u:pw@h:5433/db?sslmode=require") == \
        "postgresql://u@h:5433/db?sslmode=require"
    assert where("postgresql://u:pw@db.example/uwf") == "database uwf on db.example"
