"""The PostgreSQL schema's versions (uwf/engine/pgschema.py), on a real server
(tests/pgkit.py): a populated database at the schema before the migrations is brought
to this uwf's, once, keeping everything; a migration that fails leaves the database as
it was; a database at a newer version is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import EXAMPLE
from uwf.audit.verify import verify as verify_log
from uwf.engine import pgschema
from uwf.engine.pgdb import PgDatabase
from uwf.errors import OldFormat, StoreUnavailable
from uwf.queue import sched
from uwf.queue.service import add_batch
from uwf.runs.registry import verify as verify_views
from uwf.store import Store
from uwf.workflows.service import put_workflow

psycopg = pytest.importorskip("psycopg")


def populated(url: str, tmp_path: Path) -> int:
    """A store with a workflow, queued entries, a policy and a lease; its head's seq."""
    store = Store.open(url)
    try:
        put_workflow(store, EXAMPLE)
        batch = tmp_path / "batch.jsonl"
        batch.write_text("".join(f'{{"workflow": "solve-issue", "prompt": "p{n}", '
                                 f'"repo": "{tmp_path}"}}\n' for n in range(3)))
        add_batch(store, str(batch))
        sched.set_policy(store, {"maxConcurrent": 2})
        sched.lease(store, 1)
        return store.log.head().seq
    finally:
        store.close()


def at_first_version(url: str) -> None:
    """The database as issue 20's uwf left it: schema 1, no history of migrations."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP TABLE uwf_migrations")
        connection.execute("UPDATE uwf_schema SET version = %s", (pgschema.FIRST_VERSION,))


def versions(url: str) -> tuple[int, list[int]]:
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT version FROM uwf_schema").fetchone()
        assert row is not None
        found = connection.execute("SELECT to_regclass('uwf_migrations')").fetchone()
        if found is None or found[0] is None:
            return row[0], []
        applied = connection.execute("SELECT version FROM uwf_migrations ORDER BY version"
                                     ).fetchall()
        return row[0], [version for version, in applied]


def test_a_new_database_is_at_the_newest_version(pg_url: str) -> None:
    PgDatabase(pg_url).close()
    assert versions(pg_url) == (pgschema.SCHEMA_VERSION,
                                [migration.version for migration in pgschema.MIGRATIONS])


def test_a_populated_database_is_migrated_once_keeping_everything(pg_url: str,
                                                                  tmp_path: Path) -> None:
    head = populated(pg_url, tmp_path)
    at_first_version(pg_url)
    assert versions(pg_url) == (pgschema.FIRST_VERSION, [])
    store = Store.open(pg_url)
    try:
        assert versions(pg_url) == (pgschema.SCHEMA_VERSION, [2])
        assert store.log.head().seq == head
        assert verify_log(store).ok
        assert verify_views(store).ok
        leased = sched.lease(store, 1).leases[0]
        sched.complete(store, leased.id, leased.lease_id)
        assert verify_views(store).ok
    finally:
        store.close()
    Store.open(pg_url).close()  # at the newest version: nothing more is applied
    assert versions(pg_url) == (pgschema.SCHEMA_VERSION, [2])


def test_a_failed_migration_leaves_the_database_as_it_was(pg_url: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    populated(pg_url, tmp_path)
    at_first_version(pg_url)
    broken = pgschema.Migration(3, "a statement the server refuses", ("SELECT * FROM nowhere",))
    monkeypatch.setattr(pgschema, "MIGRATIONS", (*pgschema.MIGRATIONS, broken))
    monkeypatch.setattr(pgschema, "SCHEMA_VERSION", 3)
    with pytest.raises((psycopg.Error, StoreUnavailable)):
        PgDatabase(pg_url)
    assert versions(pg_url) == (pgschema.FIRST_VERSION, [])  # migration 2 rolled back too


def test_a_newer_schema_is_refused_by_an_older_uwf(pg_url: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A database migrated by a newer uwf (here: this one) is refused by an older one
    (this one with its last migration taken away), which writes nothing."""
    head = populated(pg_url, tmp_path)
    monkeypatch.setattr(pgschema, "MIGRATIONS", pgschema.MIGRATIONS[:-1])
    monkeypatch.setattr(pgschema, "SCHEMA_VERSION", pgschema.FIRST_VERSION)
    with pytest.raises(OldFormat, match=r"written by a newer uwf \(schema 2, this uwf reads 1\)"):
        Store.open(pg_url)
    monkeypatch.undo()
    store = Store.open(pg_url)
    try:
        assert store.log.head().seq == head
    finally:
        store.close()
