"""SQLite's errors as uwf's, for the views file (uwf/engine/viewstore.py): busy and I/O
errors are transient (never a reason to delete the views); only a damaged file is
Corrupt."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from uwf.errors import Corrupt, StoreBusy, StoreUnavailable

BUSY = ("locked", "busy")
UNAVAILABLE = ("disk i/o", "unable to open", "full", "readonly", "read-only")


class Guard:
    """A `with` block whose SQLite errors are raised as StoreBusy, StoreUnavailable or
    (from `corrupt`) Corrupt. A class, not a generator: every read and commit of the
    views enters one."""

    __slots__ = ("corrupt", "path")

    def __init__(self, path: Path, corrupt: Callable[[Exception], Corrupt]) -> None:
        self.path = path
        self.corrupt = corrupt

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: object) -> None:
        if exc is None or isinstance(exc, sqlite3.ProgrammingError | sqlite3.InterfaceError):
            return  # nothing, or a bug in uwf, not a state of the file
        if isinstance(exc, sqlite3.OperationalError):
            text = str(exc).lower()
            if any(word in text for word in BUSY):
                raise StoreBusy(f"the views are busy ({self.path}: {exc})", "retry") from None
            if any(word in text for word in UNAVAILABLE):
                raise StoreUnavailable(f"cannot use the views ({self.path}: {exc})",
                                       "check the disk and permissions, then retry") from None
            raise self.corrupt(exc) from None
        if isinstance(exc, sqlite3.DatabaseError | UnicodeDecodeError):
            # UnicodeDecodeError: sqlite3 could not decode its own message (the schema's
            # text is damaged).
            raise self.corrupt(exc) from None


def made_apart(db: sqlite3.Connection, table: str, make: Callable[[], None]) -> bool:
    """`make` run in a write transaction of its own, while `table` is there: whether it
    committed. False, changing nothing, when the connection is inside a transaction,
    the file cannot be written (read-only) or a writer holds it past the busy timeout:
    what a read would have made (an index: uwf/engine/readindex.py, fulltext.py) it
    then goes without, and the next read tries again."""
    if db.in_transaction:
        return False
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _cannot_write(exc):
            return False
        raise
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (table,)).fetchone() is None:
            db.execute("ROLLBACK")
            return False
        make()
        db.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        if _cannot_write(exc):
            return False
        raise
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return True


def _cannot_write(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return any(word in text for word in (*BUSY, "readonly", "read-only"))
