"""The PostgreSQL schema's versions (uwf/engine/pgschema.py), on a real server
(tests/pgkit.py): a populated database at the schema before the migrations is brought
to this uwf's, once, keeping everything; a migration that fails leaves the database as
it was; a database at a newer version is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import EXAMPLE
from uwf.audit.verify import verify as verify_log
from uwf.engine import pgckpt, pgschema
from uwf.engine.pgdb import PgDatabase
from uwf.engine.pgviews import PgViewStore
from uwf.errors import OldFormat, StoreUnavailable
from uwf.queue import pgcalls, pgentry, sched
from uwf.queue.projection import QueueProjection
from uwf.queue.rules import Policy
from uwf.queue.service import add_batch
from uwf.runs.registry import verify as verify_views
from uwf.store import Store
from uwf.workflows.service import put_workflow

psycopg = pytest.importorskip("psycopg")
ALL = [migration.version for migration in pgschema.MIGRATIONS]


def populated(url: str, tmp_path: Path) -> int:
    """A store with a workflow, queued entries, a policy and a lease; its head's seq."""
    store = Store.open(url)
    try:
        put_workflow(store, EXAMPLE)
        batch = tmp_path / "batch.jsonl"
        batch.write_text("".join(f'{{"workflow": "solve-issue", "prompt": "p{n}", '
                                 f'"repo": "{tmp_path}"}}\n' for n in range(3)))
        add_batch(store, str(batch), store.settings)
        sched.set_policy(store.journal, {"maxConcurrent": 2})
        sched.lease(store, 1)
        return store.log.head().seq
    finally:
        store.close()


def at_first_version(url: str) -> None:
    """The database as issue 20's uwf left it: schema 1, no history of migrations, a
    checkpoint row a view (each with its own seq and digest, never NULL)."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP TABLE uwf_migrations")
        connection.execute("UPDATE uwf_schema SET version = %s", (pgschema.FIRST_VERSION,))
        connection.execute("UPDATE uwf_views v SET seq = s.seq, digest = s.digest FROM "
                           "uwf_views s WHERE s.name = '' AND v.seq IS NULL")
        connection.execute("DELETE FROM uwf_views WHERE name = ''")
        connection.execute("ALTER TABLE uwf_views ALTER COLUMN seq SET NOT NULL, "
                           "ALTER COLUMN digest SET NOT NULL")


def checkpoint_rows(url: str) -> dict[str, tuple[Any, Any]]:
    with psycopg.connect(url, autocommit=True) as connection:
        return {name: (seq, digest) for name, seq, digest in connection.execute(
            "SELECT name, seq, digest FROM uwf_views")}


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
    old_rows = checkpoint_rows(pg_url)
    assert "" not in old_rows
    assert all(seq == head for seq, _ in old_rows.values())
    store = Store.open(pg_url)
    try:
        assert versions(pg_url) == (pgschema.SCHEMA_VERSION, ALL)
        assert store.log.head().seq == head
        assert verify_log(store).ok
        assert verify_views(store).ok
        assert checkpoint_rows(pg_url) == old_rows  # each view holds its own, as it was
        # The server-side command leaves views holding their own rows to the ordinary
        # way, which joins them to one shared row; the next is the server's.
        assert pgcalls.lease(store, 1, None) is None
        leased = sched.lease(store, 1).leases[0]
        joined = checkpoint_rows(pg_url)
        assert joined.pop("")[0] == store.log.head().seq
        assert set(joined) == set(old_rows)
        assert set(joined.values()) == {(None, None)}
        assert pgcalls.complete(store, leased.id, leased.lease_id, None) is not None
        assert verify_log(store).ok
        assert verify_views(store).ok
    finally:
        store.close()
    Store.open(pg_url).close()  # at the newest version: nothing more is applied
    assert versions(pg_url) == (pgschema.SCHEMA_VERSION, ALL)


def composite_types(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as connection:
        return sorted(name for name, in connection.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'c' AND relnamespace = "
            "current_schema()::regnamespace"))


def test_the_composite_types_an_earlier_uwf_made_are_dropped(pg_url: str,
                                                            tmp_path: Path) -> None:
    """Schema 4: the entry's and the lease's records (`uwf_r_<struct>_<digest>`, the
    first holding the second) that a lease made before 6fe8647 go; another type stays."""
    populated(pg_url, tmp_path)
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute("CREATE TYPE uwf_r_lease_0123456789 AS (id text, attempt bigint)")
        connection.execute("CREATE TYPE uwf_r_queueentry_abcdef0123 AS (status text, "
                           "lease uwf_r_lease_0123456789)")
        connection.execute("CREATE TYPE someone_elses AS (x int)")
        connection.execute("DELETE FROM uwf_migrations WHERE version = 4")
        connection.execute("UPDATE uwf_schema SET version = 3")
    assert composite_types(pg_url) == ["someone_elses", "uwf_r_lease_0123456789",
                                       "uwf_r_queueentry_abcdef0123"]
    store = Store.open(pg_url)
    try:
        assert versions(pg_url) == (pgschema.SCHEMA_VERSION, ALL)
        assert composite_types(pg_url) == ["someone_elses"]
        leased = sched.lease(store, 1).leases[0]  # the server's commands, as before
        assert pgcalls.complete(store, leased.id, leased.lease_id, None) is not None
        assert verify_log(store).ok
        assert verify_views(store).ok
    finally:
        store.close()


def at_schema_6(url: str) -> None:
    """The database as schema 6 held it: a queue entry's row its whole JSON (what a
    read builds from an overlay, written into `value`), no overlay's columns, the
    policy not kept parsed."""
    columns = ", ".join(f"DROP COLUMN {name}" for name, _ in pgentry.COLUMNS)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"UPDATE uwf_v_queue SET value = {pgentry.overlay().value_sql} "
                           "WHERE e_at IS NOT NULL")
        connection.execute(f"ALTER TABLE uwf_v_queue {columns}")
        connection.execute("ALTER TABLE uwf_v_sched DROP COLUMN e_policy")
        connection.execute("DELETE FROM uwf_migrations WHERE version = 7")
        connection.execute("UPDATE uwf_schema SET version = 6")


def overlay_columns(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url, autocommit=True) as connection:
        return sorted(connection.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE "
            "table_name IN ('uwf_v_queue', 'uwf_v_sched') AND column_name LIKE 'e\\_%'"))


def test_a_populated_schema_6_database_is_migrated_to_7(pg_url: str, tmp_path: Path) -> None:
    """Schema 7: a populated schema-6 database's queue table gets the overlay's columns,
    empty (each row's JSON is the whole entry): the rows read the same, a lease and a
    complete write the overlay after, and an entry leased before is completed by the
    server from the lease in its JSON."""
    populated(pg_url, tmp_path)
    store = Store.open(pg_url)
    try:
        done = pgcalls.lease(store, 1, None)
        assert done is not None
        assert pgcalls.complete(store, done.leases[0].id, done.leases[0].lease_id,
                                "run-1") is not None
        before = list(store.journal.views.scan("queue"))
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as connection:
        patched = connection.execute("SELECT count(*) FROM uwf_v_queue WHERE e_at IS NOT "
                                     "NULL").fetchone()
    assert patched == (2,)  # the lease of `populated`, and the complete above
    at_schema_6(pg_url)
    assert versions(pg_url) == (6, ALL[:-1])
    assert overlay_columns(pg_url) == []
    with psycopg.connect(pg_url, autocommit=True) as connection:
        rows = connection.execute("SELECT key, value FROM uwf_v_queue ORDER BY key").fetchall()
    assert [(key, bytes(value)) for key, value in rows] == before
    store = Store.open(pg_url)
    try:
        assert versions(pg_url) == (pgschema.SCHEMA_VERSION, ALL)
        assert overlay_columns(pg_url) == sorted([*(("uwf_v_queue", name) for name, _ in
                                                    pgentry.COLUMNS),
                                                  ("uwf_v_sched", "e_policy")])
        policy = "SELECT e_policy FROM uwf_v_sched"
        with psycopg.connect(pg_url, autocommit=True) as connection:
            assert connection.execute(policy).fetchall() == [(None,)]  # not parsed yet
        assert list(store.journal.views.scan("queue")) == before
        assert verify_views(store).ok
        held = [QueueProjection().decode(value) for _, value in before]
        leased = [entry for entry in held if entry.lease is not None]
        assert len(leased) == 1
        assert leased[0].lease is not None
        record = pgcalls.complete(store, leased[0].id, leased[0].lease.id, None)
        assert record is not None  # the server's, its lease read from the JSON
        assert record.status == "drained"
        again = pgcalls.lease(store, 1, None)
        assert again is not None
        with psycopg.connect(pg_url, autocommit=True) as connection:
            assert connection.execute(policy).fetchall() == [
                (msgspec.to_builtins(Policy(max_concurrent=2)),)]
        assert pgcalls.complete(store, again.leases[0].id, again.leases[0].lease_id,
                                None) is not None
        assert verify_log(store).ok
        assert verify_views(store).ok
    finally:
        store.close()


def at_schema_5(url: str) -> None:
    """The database as schema 5 held it: no `joined` on the checkpoints' rows, no
    trigger writing it."""
    at_schema_6(url)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP TRIGGER uwf_views_joined ON uwf_views")
        connection.execute("DROP FUNCTION uwf_views_joined()")
        connection.execute("ALTER TABLE uwf_views DROP COLUMN joined")
        connection.execute("DELETE FROM uwf_migrations WHERE version = 6")
        connection.execute("UPDATE uwf_schema SET version = 5")


def joined_column(url: str) -> tuple[bool, bool]:
    """Whether `uwf_views` has its `joined` column, and its trigger."""
    with psycopg.connect(url, autocommit=True) as connection:
        found = connection.execute(
            "SELECT EXISTS (SELECT FROM information_schema.columns WHERE table_name = "
            "'uwf_views' AND column_name = 'joined'), EXISTS (SELECT FROM pg_trigger WHERE "
            "tgrelid = 'uwf_views'::regclass AND tgname = 'uwf_views_joined')").fetchone()
    assert found is not None
    return found[0], found[1]


def test_a_populated_schema_5_database_is_migrated_to_6(pg_url: str, tmp_path: Path) -> None:
    """Schema 6: the shared checkpoint row of a populated schema-5 database gets the
    digest of its joined views, so the server's commands take one call again at once;
    a view joined or left later changes it (the trigger), the commands then stale."""
    head = populated(pg_url, tmp_path)
    at_schema_5(pg_url)
    assert versions(pg_url) == (5, ALL[:-2])
    assert joined_column(pg_url) == (False, False)
    store = Store.open(pg_url)
    try:
        assert versions(pg_url) == (pgschema.SCHEMA_VERSION, ALL)
        assert joined_column(pg_url) == (True, True)
        assert store.log.head().seq == head
        with psycopg.connect(pg_url, autocommit=True) as connection:
            row = connection.execute("SELECT joined FROM uwf_views WHERE name = ''").fetchone()
        views = store.journal.views
        assert isinstance(views, PgViewStore)
        assert row == (pgckpt.joined(views.signatures()),)
        leased = pgcalls.lease(store, 1, None)  # one call: the checkpoints as migrated
        assert leased is not None
        assert pgcalls.complete(store, leased.leases[0].id, leased.leases[0].lease_id,
                                None) is not None
        with psycopg.connect(pg_url, autocommit=True) as connection:
            connection.execute("INSERT INTO uwf_views VALUES ('other', '[1]', NULL, NULL)")
        assert pgcalls.lease(store, 1, None) is None  # a view it does not know, joined
        assert verify_log(store).ok
        assert verify_views(store).ok
    finally:
        store.close()


def at_schema_4(url: str) -> None:
    """The database as schema 4 held it: the kept counts a row of `uwf_view_counts` a
    (view, column, value), a count at 0 kept (as that uwf's commit left it); the log's
    checks the table's, its columns plain `bigint` and `bytea`."""
    at_schema_5(url)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "ALTER TABLE uwf_events ALTER COLUMN seq TYPE bigint, ALTER COLUMN line TYPE "
            "bytea, ADD CHECK (seq > 0), ADD CHECK (position('\\x0a'::bytea IN line) = 0)")
        connection.execute("DROP DOMAIN uwf_seq, uwf_line")
        connection.execute(
            "CREATE TABLE uwf_view_counts (view text NOT NULL, col text NOT NULL, value text "
            "NOT NULL, n bigint NOT NULL, PRIMARY KEY (view, col, value))")
        connection.execute(
            "INSERT INTO uwf_view_counts SELECT t.view, split_part(c.key, ' ', 1), "
            "substr(c.key, strpos(c.key, ' ') + 1), c.value::bigint FROM uwf_counts t, "
            "jsonb_each_text(t.counts) c")
        connection.execute("INSERT INTO uwf_view_counts VALUES ('queue', 'status', "
                           "'\"failed\"', 0)")
        connection.execute("DROP TABLE uwf_counts")
        connection.execute("DELETE FROM uwf_migrations WHERE version = 5")
        connection.execute("UPDATE uwf_schema SET version = 4")


def log_checks(url: str) -> tuple[list[str], list[str]]:
    """The names of the log table's checks and of its columns' types' checks."""
    with psycopg.connect(url, autocommit=True) as connection:
        table = connection.execute("SELECT conname FROM pg_constraint WHERE conrelid = "
                                   "'uwf_events'::regclass AND contype = 'c' ORDER BY 1")
        table_checks = [name for name, in table]
        types = connection.execute(
            "SELECT c.conname FROM pg_constraint c JOIN pg_attribute a ON a.atttypid = "
            "c.contypid WHERE a.attrelid = 'uwf_events'::regclass ORDER BY 1")
        return table_checks, [name for name, in types]


def test_a_populated_schema_4_database_is_migrated_to_5(pg_url: str, tmp_path: Path) -> None:
    """Schema 5: the counts' rows of a populated schema-4 database become one object a
    view, the same counts (a 0 left out), that the server's commands move after; the
    log's checks become its columns' types', refusing as before."""
    populated(pg_url, tmp_path)
    store = Store.open(pg_url)
    try:
        before = {column: store.journal.views.counts("queue", column)
                  for column in ("status", "ready_pool")}
    finally:
        store.close()
    assert before["status"] == {"ready": 2, "leased": 1}
    at_schema_4(pg_url)
    assert versions(pg_url) == (4, ALL[:-3])
    assert log_checks(pg_url) == (["uwf_events_line_check", "uwf_events_seq_check"], [])
    store = Store.open(pg_url)
    try:
        assert versions(pg_url) == (pgschema.SCHEMA_VERSION, ALL)
        with psycopg.connect(pg_url, autocommit=True) as connection:
            assert connection.execute("SELECT to_regclass('uwf_view_counts')").fetchone() == (
                None,)
            rows = connection.execute("SELECT view, counts FROM uwf_counts").fetchall()
        assert rows == [("queue", {'status "ready"': 2, 'status "leased"': 1,
                                   'ready_pool ""': 2, "ready_pool null": 1})]
        assert {column: store.journal.views.counts("queue", column)
                for column in ("status", "ready_pool")} == before
        assert verify_views(store).ok
        leased = pgcalls.lease(store, 1, None)  # the server's commands, on the new row
        assert leased is not None
        assert pgcalls.complete(store, leased.leases[0].id, leased.leases[0].lease_id,
                                None) is not None
        assert store.journal.views.counts("queue", "status") == {
            "ready": 1, "leased": 1, "drained": 1}
        assert verify_log(store).ok
        assert verify_views(store).ok
        assert log_checks(pg_url) == ([], ["uwf_line_one_line", "uwf_seq_positive"])
        with psycopg.connect(pg_url, autocommit=True) as editor:
            for seq, line in ((0, b"{}"), (store.log.head().seq + 1, b"{\n}")):
                with pytest.raises(psycopg.errors.CheckViolation):
                    editor.execute("INSERT INTO uwf_events VALUES (%s, %s, 0)", (seq, line))
    finally:
        store.close()


def test_a_failed_migration_leaves_the_database_as_it_was(pg_url: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    populated(pg_url, tmp_path)
    at_first_version(pg_url)
    after = pgschema.SCHEMA_VERSION + 1
    broken = pgschema.Migration(after, "a statement the server refuses",
                                ("SELECT * FROM nowhere",))
    monkeypatch.setattr(pgschema, "MIGRATIONS", (*pgschema.MIGRATIONS, broken))
    monkeypatch.setattr(pgschema, "SCHEMA_VERSION", after)
    before = checkpoint_rows(pg_url)
    with pytest.raises((psycopg.Error, StoreUnavailable)):
        PgDatabase(pg_url)
    assert versions(pg_url) == (pgschema.FIRST_VERSION, [])  # the others rolled back too
    with psycopg.connect(pg_url, autocommit=True) as connection:  # NOT NULL still
        nullable = connection.execute(
            "SELECT column_name, is_nullable FROM information_schema.columns WHERE "
            "table_name = 'uwf_views' AND column_name IN ('seq', 'digest')").fetchall()
    assert sorted(nullable) == [("digest", "NO"), ("seq", "NO")]
    assert checkpoint_rows(pg_url) == before


def test_a_newer_schema_is_refused_by_an_older_uwf(pg_url: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A database migrated by a newer uwf (here: this one) is refused by an older one
    (this one with its last migration taken away), which writes nothing."""
    head = populated(pg_url, tmp_path)
    before = checkpoint_rows(pg_url)
    newest, older = pgschema.SCHEMA_VERSION, pgschema.MIGRATIONS[-2].version
    monkeypatch.setattr(pgschema, "MIGRATIONS", pgschema.MIGRATIONS[:-1])
    monkeypatch.setattr(pgschema, "SCHEMA_VERSION", older)
    with pytest.raises(OldFormat, match=rf"written by a newer uwf \(schema "
                                        rf"{newest}, this uwf reads {older}\)"):
        Store.open(pg_url)
    assert checkpoint_rows(pg_url) == before  # the shared row, untouched
    monkeypatch.undo()
    store = Store.open(pg_url)
    try:
        assert store.log.head().seq == head
    finally:
        store.close()
