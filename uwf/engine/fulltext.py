"""A view's full-text index in the SQLite view store (`f_<view>`, FTS5 trigram over the
rows' search text): made on the first text search, not by the commit that loads a
view anew. A rebuild or a restored snapshot then pays nothing for it (filling a
trigram index was a fifth of a replay's CPU), and a text search before it is made,
or where it cannot be made (a views file this process may not write), tests each
row's text instead: the same rows, found more slowly.

While the index exists, every commit keeps it row by row (uwf/engine/viewrows.py),
in the same transaction as the rows; while it does not, commits skip it. Whether it
exists is read inside each commit's transaction, so the index, once made, never
misses a row."""

from __future__ import annotations

import sqlite3

from uwf.engine.sqliteguard import made_apart

TOKENIZER = "tokenize='trigram case_sensitive 1'"


def exists(db: sqlite3.Connection, view: str) -> bool:
    """Whether the view's full-text index is there."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (f"f_{view}",)).fetchone() is not None


def drop(db: sqlite3.Connection, view: str) -> None:
    """Let the view's full-text index go (a view loaded anew: it is made again on the
    first text search)."""
    db.execute(f'DROP TABLE IF EXISTS "f_{view}"')


def make(db: sqlite3.Connection, view: str) -> bool:
    """The view's full-text index, filled from its rows, made when absent, in a write
    transaction of its own (so no commit lands between the fill and the index being
    seen); whether it is there now. False, changing nothing, when this connection is
    inside a transaction or the file cannot be written (read-only, say): the search
    then tests each row's text."""
    if db.in_transaction:
        return exists(db, view)

    def fill() -> None:
        if not exists(db, view):
            db.execute(f'CREATE VIRTUAL TABLE "f_{view}" USING fts5(text, {TOKENIZER})')
            db.execute(f'INSERT INTO "f_{view}" (rowid, text) SELECT rowid, text FROM '
                       f'"v_{view}"')

    return made_apart(db, f"v_{view}", fill)
