"""Node bytes in a PostgreSQL table: `uwf_nodes` (hash, data, when it was written),
beside one record, the hash rule the store names its nodes by (`uwf_hash_rule`).

Every statement runs on `PgDatabase.connection()`: inside a writer's section that is
the section's transaction, so a node written there commits (or is rolled back) with
the events that refer to it; anywhere else it is the autocommit reader's, so a node
is committed before `write` returns, as it must be, since nodes are written before
the events that refer to them. Hashes sort in byte order (`COLLATE "C"`), as the
file backend lists them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from uwf.cas.backends import check_hash

if TYPE_CHECKING:
    import psycopg

NODES = "uwf_nodes"
RULE = "uwf_hash_rule"
LISTED = 1000  # hashes per round trip while listing
MANY_BYTES = 8 << 20  # node bytes per statement when many are written at once

_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {NODES} (hash text COLLATE \"C\" PRIMARY KEY, "
    "data bytea NOT NULL, created timestamptz NOT NULL DEFAULT clock_timestamp())",
    f"CREATE TABLE IF NOT EXISTS {RULE} (id int PRIMARY KEY CHECK (id = 1), rule text NOT NULL)",
)


class Database(Protocol):
    """What the nodes need of the store's database (`uwf.engine.pgdb.PgDatabase`, which
    the CAS, a layer below the engine, does not import)."""

    def connection(self) -> psycopg.Connection[Any]:
        """The writer's connection inside this thread's section, else the reader's."""
        ...

    def create(self, table: str, *statements: str) -> None:
        """Run `statements` unless `table` exists."""
        ...

    def reached(self) -> contextlib.AbstractContextManager[None]:
        """Server failures in the block as one-line `StoreUnavailable` errors."""
        ...


class PgBlobs:
    """The CAS's nodes in a store's PostgreSQL database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._known: frozenset[str] = frozenset()  # `known`'s, while its block runs
        with db.reached():
            db.create(NODES, _CREATE[0])
            db.create(RULE, _CREATE[1])

    def _connection(self) -> psycopg.Connection[Any]:
        return self.db.connection()

    def read(self, hash_: str) -> bytes | None:
        check_hash(hash_)
        with self.db.reached():
            row = self._connection().execute(f"SELECT data FROM {NODES} WHERE hash = %s",
                                             (hash_,), binary=True).fetchone()
        return None if row is None else bytes(row[0])

    def write(self, hash_: str, data: bytes) -> bool:
        check_hash(hash_)
        with self.db.reached():
            cursor = self._connection().execute(
                f"INSERT INTO {NODES} (hash, data) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (hash_, data))
        return cursor.rowcount == 1

    def write_many(self, nodes: Iterable[tuple[str, bytes]]) -> int:
        """Many nodes (a store's copy) in few statements, each up to MANY_BYTES of them;
        how many were new."""
        added = 0
        chunk: list[tuple[str, bytes]] = []
        size = 0
        for hash_, data in nodes:
            chunk.append((check_hash(hash_), data))
            size += len(data)
            if size >= MANY_BYTES:
                added += self._insert(chunk)
                chunk, size = [], 0
        return added + (self._insert(chunk) if chunk else 0)

    def _insert(self, chunk: list[tuple[str, bytes]]) -> int:
        with self.db.reached():
            cursor = self._connection().execute(
                f"INSERT INTO {NODES} (hash, data) SELECT * FROM unnest(%b::text[], "
                "%b::bytea[]) ON CONFLICT DO NOTHING",
                ([hash_ for hash_, _ in chunk], [data for _, data in chunk]))
        return cursor.rowcount

    def missing(self, hashes: Iterable[str]) -> list[str]:
        """Those of `hashes` that are not stored, asked LISTED at a time."""
        wanted = [check_hash(hash_) for hash_ in hashes]
        found: list[str] = []
        for start in range(0, len(wanted), LISTED):
            with self.db.reached():
                rows = self._connection().execute(
                    f"SELECT h FROM unnest(%b::text[]) AS h WHERE NOT EXISTS (SELECT FROM "
                    f"{NODES} n WHERE n.hash = h)", (wanted[start:start + LISTED],)
                ).fetchall()
            found += [hash_ for hash_, in rows]
        return found

    @contextlib.contextmanager
    def known(self, hashes: Iterable[str]) -> Iterator[None]:
        """While the block runs, `exists` answers yes for `hashes` without asking the
        server: nodes just found there (`missing`), checked again by a verify that asks
        of each reference (a store's copy). Nothing else is taken on trust."""
        self._known = frozenset(hashes)
        try:
            yield
        finally:
            self._known = frozenset()

    def exists(self, hash_: str) -> bool:
        check_hash(hash_)
        if hash_ in self._known:
            return True
        with self.db.reached():
            row = self._connection().execute(f"SELECT 1 FROM {NODES} WHERE hash = %s",
                                             (hash_,)).fetchone()
        return row is not None

    def hashes(self) -> Iterator[str]:
        after = ""
        while True:
            with self.db.reached():
                rows = self._connection().execute(
                    f"SELECT hash FROM {NODES} WHERE hash > %s ORDER BY hash LIMIT %s",
                    (after, LISTED)).fetchall()
            for (hash_,) in rows:
                yield hash_
            if len(rows) < LISTED:
                return
            after = rows[-1][0]

    def remove(self, hash_: str) -> None:
        check_hash(hash_)
        with self.db.reached():
            self._connection().execute(f"DELETE FROM {NODES} WHERE hash = %s", (hash_,))

    def age(self, hash_: str) -> float:
        """Seconds since the node was written, by the server's clock alone (a client's
        clock may be set apart from it). An absent node is a KeyError, as in memory."""
        check_hash(hash_)
        with self.db.reached():
            row = self._connection().execute(
                f"SELECT extract(epoch FROM clock_timestamp() - created)::float8 FROM {NODES} "
                "WHERE hash = %s", (hash_,)).fetchone()
        if row is None:
            raise KeyError(hash_)
        return float(row[0])

    def hash_rule(self) -> str | None:
        with self.db.reached():
            row = self._connection().execute(f"SELECT rule FROM {RULE}").fetchone()
        return None if row is None else str(row[0])

    def record_hash_rule(self, rule: str) -> None:
        with self.db.reached():
            self._connection().execute(
                f"INSERT INTO {RULE} VALUES (1, %s) ON CONFLICT (id) DO UPDATE SET rule = %s",
                (rule, rule))
