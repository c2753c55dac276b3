"""The queue's kept counts as the server's lease and complete move them (issue 31):
the SQL of uwf/queue/pgcalls.py's procedures that moves the `queue` view's counts, by
status and by ready pool, in its one row of `uwf_counts` (uwf/engine/pgcounts.py),
with the views' shared checkpoint, in one statement.

The statuses come from the transition table (pgcalls' `_from`, `_to`); what each
command's moves are is checked against it here as the SQL is made: a lease's entry
was ready (it had a pool; it has none after), a complete's was not and is not.
"""

from __future__ import annotations

import json

from uwf.engine.pgcounts import TABLE as COUNTS
from uwf.engine.pgcounts import key as count_key
from uwf.engine.pgcounts import merged
from uwf.engine.pgwrite import CHECKPOINTS

__all__ = ["complete_counts", "count_key", "lease_counts", "quote"]


def quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


# The kept counts' moves (by status, by ready pool) of the entries written, with the
# views' checkpoints, in one statement: the queue's one row of counts (uwf/engine/
# pgcounts.py) updated, never an upsert (a write that made an entry ready made it first;
# `INTO STRICT` fails the call if it is not there). A count at 0 leaves the object.
def _counts_one(moves: list[tuple[str, int]]) -> str:
    """The counts' update for one entry: `moves`, each count's key (SQL) and by how much;
    the keys distinct (the generator checks the transition table says so)."""
    assert all(by in (-1, 1) for _, by in moves), moves
    # A count moved down is there (an entry held its value) and may reach 0; one moved
    # up may not be there yet, and does not reach 0.
    pairs = ", ".join(f"{key}, nullif((counts ->> ({key}))::bigint - 1, 0)" if by == -1 else
                      f"{key}, coalesce((counts ->> ({key}))::bigint, 0) + 1"
                      for key, by in moves)
    return f"""
    WITH moved AS ({CHECKPOINTS})
    UPDATE {COUNTS} SET counts = jsonb_strip_nulls(counts || jsonb_build_object({pairs}))
     WHERE view = 'queue' RETURNING '' INTO STRICT done;"""


def _status_key(statuses: list[str], variable: str) -> str:
    """SQL: the status count's key of `variable`, one of `statuses` (a constant when
    there is only one)."""
    if len(statuses) == 1:
        return quote(count_key("status", json.dumps(statuses[0])))
    return f"'status ' || to_json({variable})::text"


def lease_counts(old: list[str], leased: str) -> str:
    """A lease's counts: one entry (its status from one of `old`, the statuses a lease
    may follow, to `leased`, its pool's ready count to none), or several summed by
    count (each to the same status and pool)."""
    assert old == ["ready"], old  # a ready entry has a pool, its count moves to none
    assert leased not in old, old
    one = _counts_one([
        (_status_key(old, "old_status"), -1),
        (quote(count_key("status", json.dumps(leased))), 1),
        ("'ready_pool ' || to_json(old_pool)::text", -1),
        (quote(count_key("ready_pool", "null")), 1)])
    several = merged("counts", f"""(SELECT jsonb_object_agg(m.k, m.n) FROM (
        SELECT m.k, sum(m.n) AS n FROM (
          SELECT 'status ' || to_json(x)::text, -1 FROM unnest(old_statuses) AS x
          UNION ALL SELECT {quote(count_key("status", json.dumps(leased)))}, n
          UNION ALL SELECT 'ready_pool ' || coalesce(to_json(x)::text, 'null'), -1
            FROM unnest(old_pools) AS x
          UNION ALL SELECT {quote(count_key("ready_pool", "null"))}, n
        ) AS m(k, n) GROUP BY m.k) m)""")
    return f"""
  IF n = 1 THEN{one}
  ELSE  -- a lease of several: each to the same status and pool
    WITH moved AS ({CHECKPOINTS})
    UPDATE {COUNTS} SET counts = {several}
     WHERE view = 'queue' RETURNING '' INTO STRICT done;
  END IF;"""


def complete_counts(old: list[str], drained: str) -> str:
    """A complete's counts: its status from one of `old` to `drained`; no pool (an
    entry a complete may follow is not ready, nor one it leaves)."""
    assert "ready" not in old, old
    assert drained != "ready", drained
    assert drained not in old, old
    return _counts_one([(_status_key(old, "old_status"), -1),
                        (quote(count_key("status", json.dumps(drained))), 1)])
