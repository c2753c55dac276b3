"""Where node bytes live: fan-out files `cas/<2 chars>/<hash>.json`, or RAM.

A hash is checked against the alphabet before it ever becomes a path, so
`../../x` can never name a file outside the store.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from uwf.cas.hashing import is_hash
from uwf.errors import UsageError


def check_hash(text: str) -> str:
    """`text` if it is a well-formed hash; otherwise a usage error naming it."""
    if not is_hash(text):
        raise UsageError(
            f"invalid hash {text!r}",
            "a hash is 13 Crockford Base32 characters, such as EYHPV6X8XHTCS",
        )
    return text


def node_path(root: str, hash_: str) -> str:
    """The file of a node: a pure function of a validated hash."""
    check_hash(hash_)
    return f"{root}/{hash_[:2]}/{hash_}.json"


class Blobs(Protocol):
    """Immutable node bytes keyed by hash."""

    def read(self, hash_: str) -> bytes | None: ...

    def write(self, hash_: str, data: bytes) -> bool:
        """Store once, atomically; False if the hash was already there (kept as is)."""
        ...

    def exists(self, hash_: str) -> bool: ...

    def hashes(self) -> Iterator[str]: ...

    def remove(self, hash_: str) -> None: ...

    def age(self, hash_: str) -> float:
        """Seconds since the node was written (gc spares young nodes)."""
        ...


class FileBlobs:
    """Nodes as readable JSON files; a temp file in the same folder, then rename."""

    def __init__(self, root: Path, durable: bool = True) -> None:
        self.root = root
        self.durable = durable
        self._root = str(root)
        self._folders: set[str] = set()  # fan-out folders known to exist

    def _path(self, hash_: str) -> str:
        return node_path(self._root, hash_)

    def read(self, hash_: str) -> bytes | None:
        try:
            with open(self._path(hash_), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def exists(self, hash_: str) -> bool:
        return os.path.exists(self._path(hash_))

    def write(self, hash_: str, data: bytes) -> bool:
        path = self._path(hash_)
        if os.path.exists(path):
            return False
        folder = os.path.dirname(path)
        if folder not in self._folders:
            os.makedirs(folder, exist_ok=True)
            self._folders.add(folder)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if self.durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.chmod(temp, 0o644)
            # A node is written before any event refers to it: the rename must be durable too.
            os.replace(temp, path)
            if self.durable:
                dir_fd = os.open(folder, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
        return True

    def hashes(self) -> Iterator[str]:
        try:
            folders = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return
        for folder in folders:
            if len(folder) != 2:
                continue
            for name in sorted(os.listdir(self.root / folder)):
                stem = name.removesuffix(".json")
                if name.endswith(".json") and is_hash(stem) and stem[:2] == folder:
                    yield stem

    def remove(self, hash_: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(hash_))

    def age(self, hash_: str) -> float:
        import time

        return time.time() - os.stat(self._path(hash_)).st_mtime


class MemoryBlobs:
    """The in-memory twin of `FileBlobs`."""

    def __init__(self) -> None:
        self._nodes: dict[str, bytes] = {}
        self._born: dict[str, float] = {}

    def read(self, hash_: str) -> bytes | None:
        return self._nodes.get(check_hash(hash_))

    def exists(self, hash_: str) -> bool:
        return check_hash(hash_) in self._nodes

    def write(self, hash_: str, data: bytes) -> bool:
        import time

        if check_hash(hash_) in self._nodes:
            return False
        self._nodes[hash_] = data
        self._born[hash_] = time.time()
        return True

    def hashes(self) -> Iterator[str]:
        yield from sorted(self._nodes)

    def remove(self, hash_: str) -> None:
        self._nodes.pop(check_hash(hash_), None)

    def age(self, hash_: str) -> float:
        import time

        return time.time() - self._born[check_hash(hash_)]
