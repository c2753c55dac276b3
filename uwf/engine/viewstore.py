"""Where view states persist: SQLite in WAL mode, or its in-memory twin (SPEC §5).

A view store holds opaque entity states (JSON bytes) keyed by (view, key) and
one checkpoint: the last log line folded in. States and checkpoint move in one
transaction, guarded by compare-and-set on the checkpoint, so concurrent
catch-ups (readers take no log lock) never fold an event twice.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Protocol

from uwf.engine.log import Head
from uwf.errors import Corrupt

Key = tuple[str, str]


class ViewStore(Protocol):
    """Persisted view states plus their checkpoint."""

    def checkpoint(self) -> Head | None:
        """The last folded line, or None when the views are absent (or outdated)."""
        ...

    def load(self, view: str, key: str) -> bytes | None: ...

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        """Every (key, state) of a view, in key order."""
        ...

    def count(self, view: str) -> int: ...

    def commit(self, changes: Mapping[Key, bytes | None], expected: Head, new: Head) -> bool:
        """Apply `changes` (None deletes) and move the checkpoint expected -> new.

        Returns False, changing nothing, when the checkpoint is no longer `expected`.
        """
        ...

    def replace(self, rows: Iterable[tuple[str, str, bytes]], checkpoint: Head) -> None:
        """Drop every state and write `rows` with `checkpoint`: a rebuild."""
        ...

    def drop(self) -> None:
        """Forget everything, as if the views had been deleted."""
        ...


def _same(a: Head | None, b: Head) -> bool:
    return a is not None and (a.seq, a.digest) == (b.seq, b.digest)


class MemoryViewStore:
    """The in-memory twin of the SQLite view store."""

    def __init__(self, version: str) -> None:
        self.version = version
        self._states: dict[Key, bytes] = {}
        self._checkpoint: Head | None = None

    def checkpoint(self) -> Head | None:
        return self._checkpoint

    def load(self, view: str, key: str) -> bytes | None:
        return self._states.get((view, key))

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        rows = sorted((k, v) for (name, k), v in self._states.items() if name == view)
        yield from rows

    def count(self, view: str) -> int:
        return sum(1 for name, _ in self._states if name == view)

    def commit(self, changes: Mapping[Key, bytes | None], expected: Head, new: Head) -> bool:
        fresh = self._checkpoint is None and expected.seq == 0
        if not (fresh or _same(self._checkpoint, expected)):
            return False
        if fresh:
            self._states.clear()
        for key, value in changes.items():
            if value is None:
                self._states.pop(key, None)
            else:
                self._states[key] = value
        self._checkpoint = new
        return True

    def replace(self, rows: Iterable[tuple[str, str, bytes]], checkpoint: Head) -> None:
        self._states = {(view, key): value for view, key, value in rows}
        self._checkpoint = checkpoint

    def drop(self) -> None:
        self._states.clear()
        self._checkpoint = None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoint (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL, segment TEXT NOT NULL, start INTEGER NOT NULL,
  "end" INTEGER NOT NULL, digest TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS state (
  view TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (view, key)
) WITHOUT ROWID;
"""


class SqliteViewStore:
    """One SQLite file in WAL mode; `synchronous=NORMAL` since views can be replayed."""

    def __init__(self, path: Path, version: str) -> None:
        self.path = path
        self.version = version
        self._db: sqlite3.Connection | None = None

    # -- connection ------------------------------------------------------

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        if not create and not self.path.exists():
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from None
        self._db = db
        return db

    def _corrupt(self, exc: Exception) -> Corrupt:
        return Corrupt(
            f"views are unreadable ({self.path}: {exc})", "run `uwf registry rebuild`"
        )

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            raise self._corrupt(exc) from None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- reads -----------------------------------------------------------

    def checkpoint(self) -> Head | None:
        with self._guard():
            db = self._connect(create=False)
            if db is None:
                return None
            return self._checkpoint(db)

    def _checkpoint(self, db: sqlite3.Connection) -> Head | None:
        row = db.execute(
            'SELECT seq, digest, segment, start, "end" FROM checkpoint '
            "WHERE (SELECT value FROM meta WHERE key = 'version') = ?",
            (self.version,),
        ).fetchone()
        return None if row is None else Head(*row)

    def load(self, view: str, key: str) -> bytes | None:
        with self._guard():
            db = self._connect(create=False)
            if db is None:
                return None
            row = db.execute(
                "SELECT value FROM state WHERE view = ? AND key = ?", (view, key)
            ).fetchone()
            return None if row is None else bytes(row[0])

    def scan(self, view: str) -> Iterator[tuple[str, bytes]]:
        with self._guard():
            db = self._connect(create=False)
            if db is None:
                return
            rows = db.execute(
                "SELECT key, value FROM state WHERE view = ? ORDER BY key", (view,)
            ).fetchall()
        for key, value in rows:
            yield key, bytes(value)

    def count(self, view: str) -> int:
        with self._guard():
            db = self._connect(create=False)
            if db is None:
                return 0
            row = db.execute("SELECT count(*) FROM state WHERE view = ?", (view,)).fetchone()
            return int(row[0])

    # -- writes ----------------------------------------------------------

    def commit(self, changes: Mapping[Key, bytes | None], expected: Head, new: Head) -> bool:
        with self._guard():
            db = self._connect(create=True)
            assert db is not None
            db.execute("BEGIN IMMEDIATE")
            try:
                if expected.seq == 0:  # the first fold into new (or outdated) views
                    current = self._checkpoint(db)
                    if current is not None and not _same(current, expected):
                        db.execute("ROLLBACK")
                        return False
                    if current is None:
                        self._reset(db)
                    self._set_checkpoint(db, new)
                elif not self._move_checkpoint(db, expected, new):
                    db.execute("ROLLBACK")
                    return False
                upserts = [(v, k, val) for (v, k), val in changes.items() if val is not None]
                deletes = [(v, k) for (v, k), val in changes.items() if val is None]
                if upserts:
                    db.executemany("INSERT OR REPLACE INTO state VALUES (?, ?, ?)", upserts)
                if deletes:
                    db.executemany("DELETE FROM state WHERE view = ? AND key = ?", deletes)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            return True

    def replace(self, rows: Iterable[tuple[str, str, bytes]], checkpoint: Head) -> None:
        with self._guard():
            db = self._connect(create=True)
            assert db is not None
            db.execute("BEGIN IMMEDIATE")
            try:
                self._reset(db)
                db.executemany("INSERT INTO state VALUES (?, ?, ?)", rows)
                self._set_checkpoint(db, checkpoint)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def drop(self) -> None:
        """Delete the file (and its WAL): the way out of a corrupt view store."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _reset(self, db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM state")
        db.execute("DELETE FROM checkpoint")
        db.execute(
            "INSERT OR REPLACE INTO meta VALUES ('version', ?)", (self.version,)
        )

    def _move_checkpoint(self, db: sqlite3.Connection, expected: Head, new: Head) -> bool:
        """Compare-and-set in one statement: the checkpoint moves only from `expected`
        (and only in views of this version)."""
        moved = db.execute(
            'UPDATE checkpoint SET seq = ?, segment = ?, start = ?, "end" = ?, digest = ? '
            "WHERE id = 1 AND seq = ? AND digest = ? AND "
            "(SELECT value FROM meta WHERE key = 'version') = ?",
            (new.seq, new.segment, new.start, new.end, new.digest,
             expected.seq, expected.digest, self.version),
        ).rowcount
        return bool(moved == 1)

    def _set_checkpoint(self, db: sqlite3.Connection, head: Head) -> None:
        db.execute(
            'INSERT OR REPLACE INTO checkpoint (id, seq, segment, start, "end", digest) '
            "VALUES (1, ?, ?, ?, ?, ?)",
            (head.seq, head.segment, head.start, head.end, head.digest),
        )
