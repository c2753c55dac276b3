"""The log's table in PostgreSQL, `uwf_events`: its row and the checks on it (issue 31).

A row is a line's seq, its exact bytes and the byte offset past it (uwf/engine/pglog.py).
The table refuses a seq that is not positive and a line holding a newline (the JSONL
form could not hold it), whoever writes it. Since schema 5 the two checks are those of
the columns' types, the domains `uwf_seq` and `uwf_line`, not the table's `CHECK`s:
PostgreSQL 15 parses a table's `CHECK` from its stored text and plans it again on every
statement that writes the table, where a domain's check is kept ready in its type
cache; in a lease+complete cycle (two lines) that was 58,000 of the server's 2.51 M
instructions (docs/benchmarks.md). The refusal is the same (`check_violation`).

Migration 5 (uwf/engine/pgschema.py, `MIGRATE`) moves a table made before: the domains
made without their checks, the columns given them (no rewrite: the same bytes), the
table's checks dropped, then the domains' checks added, which read every row once.
"""

from __future__ import annotations

TABLE = "uwf_events"
# The domains, made if absent (without their checks: `CHECKS` adds them).
TYPES = """DO $types$ BEGIN
  IF to_regtype('uwf_seq') IS NULL THEN CREATE DOMAIN uwf_seq AS bigint; END IF;
  IF to_regtype('uwf_line') IS NULL THEN CREATE DOMAIN uwf_line AS bytea; END IF;
END $types$"""
# Their checks, added if absent (a table using them is read once to check its rows).
CHECKS = """DO $checks$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_constraint WHERE contypid = 'uwf_seq'::regtype) THEN
    ALTER DOMAIN uwf_seq ADD CONSTRAINT uwf_seq_positive CHECK (VALUE > 0);
  END IF;
  IF NOT EXISTS (SELECT FROM pg_constraint WHERE contypid = 'uwf_line'::regtype) THEN
    ALTER DOMAIN uwf_line ADD CONSTRAINT uwf_line_one_line
      CHECK (position('\\x0a'::bytea IN VALUE) = 0);
  END IF;
END $checks$"""
CREATE = (
    TYPES,
    CHECKS,
    f"CREATE TABLE IF NOT EXISTS {TABLE} (seq uwf_seq PRIMARY KEY, line uwf_line NOT NULL, "
    "ends bigint NOT NULL)",
)
# Schema 4's table to schema 5's (when it exists: the tables are made by their
# backends, so a database may not have it yet). Schema 4's checks were named by
# PostgreSQL after the table and column.
MIGRATE = (
    TYPES,
    f"""DO $log$ BEGIN
  IF to_regclass('{TABLE}') IS NOT NULL THEN
    ALTER TABLE {TABLE} DROP CONSTRAINT IF EXISTS {TABLE}_seq_check,
      DROP CONSTRAINT IF EXISTS {TABLE}_line_check,
      ALTER COLUMN seq TYPE uwf_seq, ALTER COLUMN line TYPE uwf_line;
  END IF;
END $log$""",
    CHECKS,
)
