"""Whether any connection has committed to a SQLite file in WAL mode since a moment, by
one `pread`: the WAL-index header in its `-shm` file (sqlite.org/walformat.html, "the
WAL-index header": two 48-byte copies that every commit rewrites, its change counter
and its last frame among them, and a WAL reset its salts).

`PRAGMA data_version` answers the same for a connection, at the cost of a read
transaction (SQLite's shared-memory locks: three `fcntl`s) and a statement; the view
store asks it only when this stamp has moved (uwf/engine/viewstore.py, `_rows`). A
stamp read while a commit rewrites the header reads as moved (never as still): the
caller then asks SQLite.
"""

from __future__ import annotations

import os
from pathlib import Path

HEADER = 96  # both copies of the WAL-index header


class WalStamp:
    """The `-shm` file of one connection's database, opened after the connection."""

    __slots__ = ("_fd", "_path")

    def __init__(self, database: str) -> None:
        self._path = database + "-shm"
        self._fd: int | None = None

    def read(self) -> bytes | None:
        """The header's bytes now; None when there is none to read (no `-shm` file yet,
        or one shorter than the header: a connection is just making it)."""
        fd = self._fd
        if fd is None:
            try:
                fd = self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        try:
            data = os.pread(fd, HEADER, 0)
        except OSError:
            return None
        return data if len(data) == HEADER else None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def identity(path: Path) -> tuple[tuple[int, int] | None, ...]:
    """The views file at `path` and its WAL and shared-memory files, each as (device,
    inode), None for one that is not there."""
    found: list[tuple[int, int] | None] = []
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            stat = os.stat(name)
        except OSError:
            found.append(None)
        else:
            found.append((stat.st_dev, stat.st_ino))
    return tuple(found)
