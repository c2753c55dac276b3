"""The views' checkpoints in PostgreSQL: one shared row for the views that move together,
as the folder store keeps them (uwf/engine/ckptrows.py, whose `read` reads these rows
too), so a command moves one row of `uwf_views`, not one a view (issue 31).

`uwf_views` holds a row per view (and one for the stream index) with its signature,
and the shared row, named `''` (signature `''`). A view's row with a NULL seq and
digest is *joined*: its checkpoint is the shared row's. A view moved alone (built or
caught up alone) holds its own seq and digest. A commit moving some views joins them
and moves the shared row; a joined view it does not move is first given the shared
row's old checkpoint (pinned), so no view ever moves without being folded: a view
this uwf does not know (another version's) included. Schema 3 made `seq` and `digest`
nullable (uwf/engine/pgschema.py).

The server-side commands (uwf/engine/pgwrite.py, uwf/queue/pgcalls.py) take only the
common case: every view they fold joined, no other row joined, the shared row at the
head. They move the shared row alone (`MOVE`); anything else is stale to them, and
the ordinary way (`PgViewStore.commit`) writes it and joins the views again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uwf.engine.ckptrows import Checkpoints
from uwf.engine.log import Checkpoint

CREATE = ("CREATE TABLE IF NOT EXISTS uwf_views (name text PRIMARY KEY, "
          "signature text NOT NULL, seq bigint, digest text)")
SELECT = "SELECT name, signature, seq, digest FROM uwf_views"
# SQL: a one-row subquery over `uwf_views` (no statement of its own), for a procedure
# with `p_names`, `p_signatures`: `views`, how many of those views are joined at their
# signature; `joined`, how many rows are joined in all; `seq`, `digest`: the shared row's.
# The views are at the shared row's checkpoint when views = joined = cardinality(p_names).
AT_SHARED = """(SELECT count(*) FILTER (WHERE v.seq IS NULL AND v.name = ANY(p_names)
      AND v.signature = p_signatures[array_position(p_names, v.name)]) AS views,
    count(*) FILTER (WHERE v.seq IS NULL AND v.name <> '') AS joined,
    max(v.seq) FILTER (WHERE v.name = '') AS seq,
    max(v.digest) FILTER (WHERE v.name = '') AS digest FROM uwf_views v)"""
# SQL: every joined view moved to the new head (`s`, `prev`): the shared row alone.
MOVE = "UPDATE uwf_views SET seq = s, digest = prev WHERE name = ''"


def write(connection: Any, kept: Checkpoints, stored: Mapping[str, str],
          moved: Mapping[str, str], new: Checkpoint) -> None:
    """Move the views `moved` (name: signature) to `new`, inside the caller's
    transaction; `kept`: the rows as read under the views' lock, `stored`: each row's
    signature then. In the common case (every joined view moves, each joined already at
    its signature) one statement: the shared row's."""
    pinned = sorted(kept.joined - set(moved))
    if pinned and kept.shared is not None:  # they stay where they are: their own rows
        connection.execute("UPDATE uwf_views SET seq = %s, digest = %s WHERE name = "
                           "ANY(%s::text[])", (kept.shared.seq, kept.shared.digest, pinned))
    if kept.shared != new:
        connection.execute("INSERT INTO uwf_views VALUES ('', '', %s, %s) ON CONFLICT (name) "
                           "DO UPDATE SET seq = excluded.seq, digest = excluded.digest",
                           (new.seq, new.digest))
    joining = [name for name, signature in moved.items()
               if name not in kept.joined or stored.get(name) != signature]
    if joining:
        connection.execute(
            "INSERT INTO uwf_views SELECT x.name, x.signature, NULL, NULL FROM "
            "unnest(%b::text[], %b::text[]) AS x(name, signature) ON CONFLICT (name) DO "
            "UPDATE SET signature = excluded.signature, seq = NULL, digest = NULL",
            (joining, [moved[name] for name in joining]))
