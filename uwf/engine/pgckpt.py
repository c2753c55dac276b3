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
# SQL: the shared row (a one-row subquery over `uwf_views`, no statement of its own), for a
# procedure with `p_joined` (`joined(signatures)`): its `seq` and `digest`, and `ok`, whether
# the rows joined to it are exactly those views at those signatures. One lookup of the
# shared row and one ordered list of the joined ones, compared as a whole: no aggregate
# (four counted with FILTERs, each set up again on every call: docs/benchmarks.md).
AT_SHARED = """(SELECT v.seq, v.digest, ARRAY(SELECT length(j.name) || ':' || j.name || j.signature
      FROM uwf_views j WHERE j.seq IS NULL AND j.name <> '' ORDER BY j.name COLLATE "C")
      = p_joined AS ok FROM uwf_views v WHERE v.name = '')"""
# SQL: every joined view moved to the new head (`s`, `prev`): the shared row alone.
MOVE = "UPDATE uwf_views SET seq = s, digest = prev WHERE name = ''"


def joined(signatures: Mapping[str, str]) -> list[str]:
    """`p_joined` of `AT_SHARED`: each view (name: signature) as the server lists a joined
    row, in its order (the names' bytes); its name's length first, so no two differ
    only in where the name ends."""
    return [f"{len(name)}:{name}{signature}"
            for name, signature in sorted(signatures.items(), key=lambda item: item[0].encode())]


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
