"""The versions of a store's PostgreSQL schema and the migrations between them (issue 31).

`uwf_schema` holds the version a database is at. Opening a database at an older version
applies each later migration in order, in one transaction under the schema's advisory
lock, so a migration interrupted halfway leaves the database at the version it was
(PostgreSQL's DDL is transactional) and two processes opening it at once migrate it
once. `uwf_migrations` records each one applied: when, and by which uwf. A database
at a newer version than this uwf knows is refused (`OldFormat`), before anything is
read or written: its tables may mean something this uwf does not know.

The tables of the log, the views and the CAS are made by their backends when absent
(`CREATE ... IF NOT EXISTS`, at the newest shape), so a migration's statements must
also hold on a database where some of them were never made (`IF EXISTS`).

To change the schema: add a `Migration` with the next version at the end of
`MIGRATIONS`, change the backend's `CREATE` to the new shape, and add the database at
the old version to tests/contract/test_pgschema.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uwf import __version__
from uwf.engine import pgckpt, pgcounts, pglogrow

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True)
class Migration:
    """The statements that take a database from `version - 1` to `version`."""

    version: int
    what: str
    statements: tuple[str, ...]


FIRST_VERSION = 1  # the schema before any migration: issue 20's tables
MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "a history of the migrations applied: when, and by which uwf", (
        "CREATE TABLE IF NOT EXISTS uwf_migrations (version int PRIMARY KEY, "
        "applied_at timestamptz NOT NULL DEFAULT now(), by_uwf text NOT NULL)",
    )),
    Migration(3, "one checkpoint row shared by the views that move together "
                 "(uwf/engine/pgckpt.py): a view's seq and digest may be NULL (joined)", (
        "ALTER TABLE IF EXISTS uwf_views ALTER COLUMN seq DROP NOT NULL, "
        "ALTER COLUMN digest DROP NOT NULL",
    )),
    Migration(4, "no composite types `uwf_r_<struct>_<digest>`: a lease and a complete "
                 "made them before 6fe8647 (the entry read into a record); none is used since", (
        # A standalone composite type (relkind 'c'), not a table's row type; the entry's
        # type holds the lease's, so each goes with CASCADE, in any order.
        "DO $drop$ DECLARE t text; BEGIN FOR t IN SELECT c.relname FROM pg_class c "
        "WHERE c.relkind = 'c' AND c.relnamespace = current_schema()::regnamespace "
        "AND c.relname LIKE 'uwf\\_r\\_%' LOOP "
        "EXECUTE format('DROP TYPE IF EXISTS %I CASCADE', t); END LOOP; END $drop$",
    )),
    Migration(5, "what a command writes, cheaper (issue 31): the views' kept counts one row a "
                 "view (`uwf_counts`, a jsonb object: uwf/engine/pgcounts.py), folded from "
                 "`uwf_view_counts`' row a value; the log's checks (a positive seq, a line "
                 "without a newline) those of its columns' types, the domains `uwf_seq` and "
                 "`uwf_line` (uwf/engine/pglogrow.py), not the table's",
              (*pgcounts.MIGRATE, *pglogrow.MIGRATE)),
    Migration(6, "which views are joined to the shared checkpoint, kept on its row (issue 31): "
                 "`uwf_views.joined`, a digest of the joined rows' list, written by a trigger "
                 "on the table's inserts and deletes and by the commit that pins views "
                 "(uwf/engine/pgckpt.py), so a command checks it in the one lookup of the "
                 "shared row it makes",
              pgckpt.MIGRATE),
    Migration(7, "a queue entry's fields a server-side lease and complete change kept as "
                 "columns beside its JSON, not written into it (issue 31): `uwf_v_queue`'s "
                 "overlay (uwf/engine/pgoverlay.py, uwf/queue/pgentry.py), empty in every "
                 "row a schema-6 uwf wrote (its JSON is the whole entry); the policy kept "
                 "parsed, `uwf_v_sched.e_policy` (NULL until a lease parses it)", (
        # The overlays as schema 7 made them (`pgentry.overlay().add_sql`, `POLICY`'s: held
        # to them by tests/contract/test_pgschema.py); no table yet: made with them.
        "ALTER TABLE IF EXISTS uwf_v_queue ADD COLUMN IF NOT EXISTS e_at text, "
        "ADD COLUMN IF NOT EXISTS e_lease text, ADD COLUMN IF NOT EXISTS e_run text, "
        "ADD COLUMN IF NOT EXISTS e_events int",
        "ALTER TABLE IF EXISTS uwf_v_sched ADD COLUMN IF NOT EXISTS e_policy jsonb",
    )),
)
SCHEMA_VERSION = MIGRATIONS[-1].version if MIGRATIONS else FIRST_VERSION


def pending(version: int) -> list[Migration]:
    """The migrations a database at `version` still needs, in order."""
    return [migration for migration in MIGRATIONS if migration.version > version]


def migrate(connection: psycopg.Connection[Any], version: int) -> list[int]:
    """Apply every migration after `version` on `connection`, inside its transaction
    (the caller holds the schema's lock); the versions applied."""
    applied = []
    for migration in pending(version):
        for statement in migration.statements:
            connection.execute(statement)
        connection.execute("INSERT INTO uwf_migrations (version, by_uwf) VALUES (%s, %s) "
                           "ON CONFLICT (version) DO NOTHING",
                           (migration.version, f"uwf {__version__}"))
        applied.append(migration.version)
    if applied:
        connection.execute("UPDATE uwf_schema SET version = %s", (applied[-1],))
    return applied
