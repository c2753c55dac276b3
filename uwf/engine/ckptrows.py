"""The views' checkpoints as SQLite rows (uwf/engine/viewstore.py; snapshots read them
too, uwf/engine/snapshot.py): one shared row for the views that move together, so a
write moves one row, not one per view.

The table `checkpoints` holds a row per view (and one for the stream index), with its
signature, and one shared row, named `''`. A view's row with a NULL seq and digest is
*joined*: its checkpoint is the shared row's. A view whose checkpoint differs from the
others' (built alone, caught up alone) holds its own seq and digest. A commit moving
some views to a new checkpoint moves the shared row and joins them; a joined view it
does not move is first given the shared row's old checkpoint as its own (pinned), so
it never moves without being folded: a view this uwf does not know (written by
another version) included.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

import msgspec

from uwf.engine.log import Checkpoint

LAYOUT = """
CREATE TABLE IF NOT EXISTS checkpoints (
  name TEXT PRIMARY KEY, signature TEXT NOT NULL, seq INTEGER, digest TEXT
);
CREATE TABLE IF NOT EXISTS counts (
  view TEXT NOT NULL, col TEXT NOT NULL, value TEXT NOT NULL, n INTEGER NOT NULL,
  PRIMARY KEY (view, col, value)
) WITHOUT ROWID;
"""
SELECT = "SELECT name, signature, seq, digest FROM checkpoints"
SHARED = ""  # the shared row's name (no view is named so)
# The checkpoints of the earlier layout (a row per view, each with its own seq and
# digest): a file holding it is rebuilt from the log (`ViewStore._open`).
EARLIER = "views"


class Damaged(ValueError):
    """A checkpoint row no commit writes (a hand edit)."""


class Checkpoints(msgspec.Struct, frozen=True):
    """The rows as read: each view's checkpoint at the signature this uwf wants (None
    for a view at another), the shared row, and the views joined to it."""

    found: dict[str, Checkpoint]
    shared: Checkpoint | None
    joined: frozenset[str]


def read(rows: Iterable[tuple[object, ...]], signatures: Mapping[str, str]) -> Checkpoints:
    """The rows of `checkpoints`; `signatures`: what this uwf wants of each name (a name
    missing from it, or at another signature, has no checkpoint here). Raises `Damaged`
    for a row of a wanted view that no commit writes."""
    shared: Checkpoint | None = None
    own: dict[str, Checkpoint] = {}
    joined: set[str] = set()
    wanted: list[str] = []
    for name, signature, seq, digest in rows:
        if name == SHARED:
            if type(seq) is not int or not isinstance(digest, str):
                raise Damaged("the shared checkpoint is not a seq and a digest")
            shared = Checkpoint(seq, digest)
            continue
        if not isinstance(name, str):
            continue
        want = signatures.get(name)
        if seq is None and digest is None:
            joined.add(name)
        elif want is not None and signature == want and (
                type(seq) is not int or not isinstance(digest, str)):
            raise Damaged(f"view {name}'s checkpoint is not a seq and a digest")
        elif type(seq) is int and isinstance(digest, str):
            own[name] = Checkpoint(seq, digest)
        if want is not None and signature == want:
            wanted.append(name)
    found: dict[str, Checkpoint] = {}
    for name in wanted:
        if name in joined:
            if shared is None:
                raise Damaged(f"view {name} is joined to a shared checkpoint that is missing")
            found[name] = shared
        else:
            found[name] = own[name]
    return Checkpoints(found, shared, frozenset(joined))


def write(db: sqlite3.Connection, kept: Checkpoints, moved: Iterable[str],
          created: Mapping[str, str], new: Checkpoint) -> Checkpoints:
    """Move the views `moved` to `new` (inside the caller's transaction); `created`: the
    ones among them made anew, with their signatures (their rows written whole). The
    rows as they are after. In the common case (every joined view moves, none is new)
    one statement: the shared row's UPDATE."""
    names = set(moved)
    pinned = sorted(kept.joined - names)
    if pinned and kept.shared is not None:  # they stay where they are: their own rows
        db.execute(f"UPDATE checkpoints SET seq = ?, digest = ? WHERE name IN "
                   f"({', '.join('?' * len(pinned))})",
                   (kept.shared.seq, kept.shared.digest, *pinned))
    if kept.shared is None:
        db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?, '', ?, ?)",
                   (SHARED, new.seq, new.digest))
    elif kept.shared != new:
        db.execute("UPDATE checkpoints SET seq = ?, digest = ? WHERE name = ?",
                   (new.seq, new.digest, SHARED))
    if created:
        db.executemany("INSERT OR REPLACE INTO checkpoints VALUES (?, ?, NULL, NULL)",
                       list(created.items()))
    joining = sorted(names - kept.joined - set(created))
    if joining:
        db.execute(f"UPDATE checkpoints SET seq = NULL, digest = NULL WHERE name IN "
                   f"({', '.join('?' * len(joining))})", joining)
    return Checkpoints({**kept.found, **dict.fromkeys(names, new)}, new, frozenset(names))
