"""The views' kept counts in PostgreSQL: one row a view (schema 5, issue 31).

`uwf_counts` holds, for each view with counted columns, one `jsonb` object: a key for
each counted column and value, `<column> <value as JSON>` (`status "ready"`,
`ready_pool null`), and how many of the view's rows hold it. A count that falls to 0
leaves the object (`jsonb_strip_nulls` of a `nullif(..., 0)`), so the object holds
only the values some row holds now, whatever values were ever seen.

Before schema 5 the counts were rows of `uwf_view_counts`, one a (view, column, value):
a lease moved four of them and a complete two, each by an `INSERT ... ON CONFLICT DO
UPDATE`, 12 % of the server's instructions a cycle (docs/benchmarks.md). A command now
moves one row of its view by one `UPDATE` (HOT: the row's only index is its key).
Migration 5 (uwf/engine/pgschema.py, `MIGRATE`) folds the old rows into the new ones.
"""

from __future__ import annotations

TABLE = "uwf_counts"
CREATE = f"CREATE TABLE IF NOT EXISTS {TABLE} (view text PRIMARY KEY, counts jsonb NOT NULL)"
# Schema 4's table, folded into `TABLE` by migration 5 (when it exists: the tables are
# made by their backends, so a database may never have had it).
OLD_TABLE = "uwf_view_counts"
MIGRATE = (
    CREATE,
    f"""DO $counts$ BEGIN
  IF to_regclass('{OLD_TABLE}') IS NOT NULL THEN
    INSERT INTO {TABLE} (view, counts)
    SELECT view, coalesce(jsonb_object_agg(col || ' ' || value, n) FILTER (WHERE n <> 0),
                          '{{}}')
      FROM {OLD_TABLE} GROUP BY view
    ON CONFLICT (view) DO NOTHING;
    DROP TABLE {OLD_TABLE};
  END IF;
END $counts$""",
)


def key(column: str, value_json: str) -> str:
    """A count's key in its view's object."""
    return f"{column} {value_json}"


# SQL: the object `counts` (the row's, in an UPDATE of it) with the moves `moves` (an
# object of key: by how much, or a subquery's) added: a count at 0 leaves.
def merged(counts: str, moves: str) -> str:
    return (f"jsonb_strip_nulls({counts} || (SELECT jsonb_object_agg(d.key, nullif("
            f"coalesce(({counts} ->> d.key)::bigint, 0) + d.value::bigint, 0)) "
            f"FROM jsonb_each_text({moves}) d))")


# SQL: the upsert moving one view's counts by the object of `%s` (view, then moves as
# jsonb text), as the ordinary way's commit writes them.
UPSERT = (f"INSERT INTO {TABLE} (view, counts) VALUES (%s, %s::jsonb) ON CONFLICT (view) "
          f"DO UPDATE SET counts = {merged(f'{TABLE}.counts', 'excluded.counts')}")
# SQL: one view's counts of one column, `%s` the view and the column's key prefix
# (`key(column, '')`): each value (as JSON) and its count.
SELECT = (f"SELECT substr(c.key, length(%s) + 1), c.value FROM {TABLE} t, "
          "jsonb_each(t.counts) c WHERE t.view = %s AND starts_with(c.key, %s)")
