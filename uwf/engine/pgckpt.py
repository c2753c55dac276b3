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

Which rows are joined, at which signatures, is kept on the shared row itself (schema 6,
its column `joined`): a digest of the joined rows' list (`JOINED`, the same list
`joined` digests in Python), written whenever that list may change, so a command
checks it by the one lookup of the shared row it makes anyway. Before, each command
listed the joined rows and compared the list: 75,000 of the server's instructions a
call, 6 % of a lease+complete cycle (docs/benchmarks.md). It is written by a statement
trigger on every `INSERT` into the table (a view joined, the shared row made or moved
by the ordinary way: any uwf's, an older one's still running included) and every
`DELETE`, and by `write` after it pins views (an `UPDATE`; a trigger on updates would
fire on every command's `MOVE`, ~36,000 instructions each).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Any

from uwf.engine.ckptrows import Checkpoints
from uwf.engine.log import Checkpoint

# SQL: the shared row's `joined`, written from the rows as they are: the digest (sha256,
# hex) of each joined row's `<length of name>:<name><signature>`, in the names' byte
# order, each prefixed by its own length and a colon (`joined` below, in Python).
JOINED = """UPDATE uwf_views SET joined = (SELECT encode(sha256(convert_to(coalesce(
    string_agg(length(x.item) || ':' || x.item, '' ORDER BY x.name COLLATE "C"), ''),
    'UTF8')), 'hex') FROM (SELECT j.name, length(j.name) || ':' || j.name || j.signature
    AS item FROM uwf_views j WHERE j.seq IS NULL AND j.name <> '') x) WHERE name = ''"""
# The trigger writing it after every INSERT or DELETE (one statement, however many rows).
_FUNCTION = f"""CREATE OR REPLACE FUNCTION uwf_views_joined() RETURNS trigger
LANGUAGE plpgsql AS $joined$
BEGIN
  {JOINED};
  RETURN NULL;
END $joined$"""
_TRIGGER = """DO $trigger$ BEGIN
  IF to_regclass('uwf_views') IS NOT NULL AND NOT EXISTS (SELECT FROM pg_trigger
      WHERE tgrelid = to_regclass('uwf_views') AND tgname = 'uwf_views_joined') THEN
    CREATE TRIGGER uwf_views_joined AFTER INSERT OR DELETE ON uwf_views
      FOR EACH STATEMENT EXECUTE FUNCTION uwf_views_joined();
    EXECUTE $update$ """ + JOINED + """ $update$;
  END IF;
END $trigger$"""
CREATE = (
    "CREATE TABLE IF NOT EXISTS uwf_views (name text PRIMARY KEY, "
    "signature text NOT NULL, seq bigint, digest text, joined text)",
    _FUNCTION,
    _TRIGGER,
)
# Schema 5's table to schema 6's (when it exists: the tables are made by their backends).
MIGRATE = (
    "ALTER TABLE IF EXISTS uwf_views ADD COLUMN IF NOT EXISTS joined text",
    _FUNCTION,
    _TRIGGER,
)
SELECT = "SELECT name, signature, seq, digest FROM uwf_views"
# SQL: the shared row (a one-row subquery over `uwf_views`, no statement of its own), for a
# procedure with `p_joined` (`joined(signatures)`): its `seq` and `digest`, and `ok`, whether
# the rows joined to it are exactly those views at those signatures: its `joined` is the
# digest of that list (NULL, not yet written: not ok).
AT_SHARED = """(SELECT v.seq, v.digest, v.joined IS NOT DISTINCT FROM p_joined AS ok
      FROM uwf_views v WHERE v.name = '')"""
# SQL: every joined view moved to the new head (`s`, `prev`): the shared row alone.
MOVE = "UPDATE uwf_views SET seq = s, digest = prev WHERE name = ''"


def joined(signatures: Mapping[str, str]) -> str:
    """`p_joined` of `AT_SHARED`: the digest `JOINED` writes when exactly these views
    (name: signature) are joined. Each as `<length of name>:<name><signature>` (no two
    differ only in where the name ends), in the names' byte order, each prefixed by its
    own length and a colon (no two lists differ only in where an item ends)."""
    return _joined(tuple(signatures.items()))


@functools.cache
def _joined(signatures: tuple[tuple[str, str], ...]) -> str:
    items = [f"{len(name)}:{name}{signature}"
             for name, signature in sorted(signatures, key=lambda item: item[0].encode())]
    return hashlib.sha256("".join(f"{len(item)}:{item}" for item in items).encode()).hexdigest()


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
        connection.execute(JOINED)  # an UPDATE: no trigger writes it
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
