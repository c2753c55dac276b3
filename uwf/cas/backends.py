"""Where node bytes live: fan-out files `cas/<2 chars>/<hash>.json`, or RAM.

Beside the nodes, one record: the hash rule the store names its nodes by
(`cas/hash-rule`), written when the store's first node is.

A hash is checked against the alphabet before it ever becomes a path, so
`../../x` can never name a file outside the store; and no symbolic link inside
the store is followed out of it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from uwf.cas.hashing import is_hash
from uwf.errors import Corrupt, UsageError
from uwf.folders import fsync_folder, make_folders


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
        """Seconds since the node was written (gc spares young nodes), by the wall clock
        the backend was given (`wall`: `uwf.engine.clock.system_clock` in a store)."""
        ...

    def hash_rule(self) -> str | None:
        """The hash rule recorded for the store, or None (a store made before uwf
        recorded it, or one with no node yet)."""
        ...

    def record_hash_rule(self, rule: str) -> None:
        """Record the hash rule, atomically."""
        ...


class FileBlobs:
    """Nodes as readable JSON files; a temp file in the same folder, then rename.

    Only regular files in real fan-out folders are served: a symbolic link (to a
    node file or in place of a fan-out folder) is refused, never followed, so
    nothing outside the store is read, listed, written or deleted through one.
    """

    def __init__(self, root: Path, durable: bool = True, max_bytes: int | None = None, *,
                 wall: Callable[[], int]) -> None:
        self.root = root
        # The wall clock in ms, for a node's age (its file's mtime is wall time; a fixed
        # --now says nothing of when it was written).
        self.wall = wall
        self.durable = durable
        # A node file longer than this is refused unread (a folder another process
        # wrote, such as an agent's staging folder); None: the store's own, read whole.
        self.max_bytes = max_bytes
        self._root = str(root)
        self._folders: set[str] = set()  # fan-out folders checked to be real directories

    def _path(self, hash_: str) -> str:
        path = node_path(self._root, hash_)
        self._check_folder(os.path.dirname(path))
        return path

    def _check_folder(self, folder: str) -> None:
        """Refuse a fan-out folder that is not a real directory (checked once per process:
        a link planted afterwards is a race this store does not defend against)."""
        if folder in self._folders:
            return
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            return  # no node there yet; `write` creates it
        if not stat.S_ISDIR(mode):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a directory"
            raise Corrupt(f"node folder {folder} is {kind}: not followed out of the store",
                          "replace it with a real directory (restore it from a backup)")
        self._folders.add(folder)

    def read(self, hash_: str) -> bytes | None:
        path = self._path(hash_)
        handle = _open_regular(path, lambda kind: _not_a_file(hash_, path, kind))
        if handle is None:
            return None
        with handle:
            if self.max_bytes is None:
                return handle.read()
            data = handle.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise Corrupt(f"node {hash_} is over {self.max_bytes:,} bytes ({path}): not read",
                          "write a smaller node")
        return data

    def exists(self, hash_: str) -> bool:
        return _is_file(self._path(hash_))

    def write(self, hash_: str, data: bytes) -> bool:
        path = self._path(hash_)
        if _is_file(path):
            return False  # a link in its place is not a node: the rename replaces it
        if os.path.isdir(path) and not os.path.islink(path):  # a rename cannot replace it
            raise _not_a_file(hash_, path, "a folder")
        folder = os.path.dirname(path)
        if folder not in self._folders:
            make_folders(folder, self.durable)
            self._check_folder(folder)
        # A node is written before any event refers to it: the rename must be durable too.
        replace_atomically(folder, path, data, self.durable)
        return True

    def hashes(self) -> Iterator[str]:
        """Every node name in the store. A fan-out folder that is a link fails closed
        (Corrupt); a node file that is a link is listed, so `verify --all` names it
        (reading it is refused, and removing it removes the link alone)."""
        try:
            with os.scandir(self.root) as entries:
                folders = sorted(entry.name for entry in entries
                                 if _FOLDER_RE.fullmatch(entry.name))
        except FileNotFoundError:
            return
        for folder in folders:
            path = os.path.join(self._root, folder)
            self._check_folder(path)
            with os.scandir(path) as entries:
                names = sorted(entry.name for entry in entries
                               if not entry.is_dir(follow_symlinks=False))
            for name in names:
                stem = name.removesuffix(".json")
                if name.endswith(".json") and is_hash(stem) and stem[:2] == folder:
                    yield stem

    def remove(self, hash_: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(hash_))  # a link itself, never what it points to

    def age(self, hash_: str) -> float:
        # Never below 0: the clock in whole ms may read a node written within the same
        # ms as younger than it is (and a file's mtime may be ahead of it).
        return max(0.0, self.wall() / 1000 - os.lstat(self._path(hash_)).st_mtime)

    def hash_rule(self) -> str | None:
        path = os.path.join(self._root, RULE_FILE)
        handle = _open_regular(path, lambda kind: _not_a_record(path, kind))
        if handle is None:
            return None
        with handle:
            return handle.read(256).decode("utf-8", "replace").strip()

    def record_hash_rule(self, rule: str) -> None:
        make_folders(self._root, self.durable)
        replace_atomically(self._root, os.path.join(self._root, RULE_FILE),
                            f"{rule}\n".encode(), self.durable)


def replace_atomically(folder: str, path: str, data: bytes, durable: bool) -> None:
    """`data` at `path` all at once: a temp file in `folder` (the same file system),
    written, then renamed over `path`; with `durable`, the file and then the rename are
    fsynced before it returns. A failure leaves no temp file behind."""
    fd, temp = _create_temp(folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temp, path)
        if durable:
            fsync_folder(folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
RULE_FILE = "hash-rule"  # in the CAS folder, beside the fan-out folders
_FOLDER_RE = re.compile(r"[0-9A-F][0-9A-HJKMNP-TV-Z]")  # the first two characters of a hash


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _create_temp(folder: str) -> tuple[int, str]:
    """A new temp file in `folder`, created as open() creates files: mode 0666 less the
    umask (mkstemp would make it 0600, and a fixed chmod would ignore the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC
    while True:
        temp = os.path.join(folder, f".tmp-{os.urandom(8).hex()}.json")
        try:
            return os.open(temp, flags, 0o666), temp
        except FileExistsError:
            continue


def _open_regular(path: str, refused: Callable[[str], Corrupt]) -> BinaryIO | None:
    """`path` opened for reading when it is a regular file, None when absent; a link
    (never followed) or anything else is `refused(kind)`. O_NONBLOCK: a FIFO planted in
    its place must not hang the reader; the type is checked before fdopen, which
    refuses a folder with IsADirectoryError."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused("a symbolic link") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise refused("not a regular file")
    return os.fdopen(fd, "rb")


def _not_a_file(hash_: str, path: str, kind: str) -> Corrupt:
    return Corrupt(f"node {hash_} is {kind} ({path}): not served",
                   "delete it and put the node again, or restore the file from a backup")


def _not_a_record(path: str, kind: str) -> Corrupt:
    return Corrupt(f"the store's hash rule record {path} is {kind}: not followed",
                   "replace it with the file `json-cas` wrote (docs/json-cas.md#old-stores)")


class MemoryBlobs:
    """The in-memory twin of `FileBlobs`."""

    def __init__(self, *, wall: Callable[[], int]) -> None:
        self.wall = wall  # the wall clock in ms, for a node's age
        self._nodes: dict[str, bytes] = {}
        self._born: dict[str, float] = {}
        self._rule: str | None = None

    def read(self, hash_: str) -> bytes | None:
        return self._nodes.get(check_hash(hash_))

    def exists(self, hash_: str) -> bool:
        return check_hash(hash_) in self._nodes

    def write(self, hash_: str, data: bytes) -> bool:
        if check_hash(hash_) in self._nodes:
            return False
        self._nodes[hash_] = data
        self._born[hash_] = self.wall() / 1000
        return True

    def hashes(self) -> Iterator[str]:
        yield from sorted(self._nodes)

    def remove(self, hash_: str) -> None:
        self._nodes.pop(check_hash(hash_), None)

    def age(self, hash_: str) -> float:
        return self.wall() / 1000 - self._born[check_hash(hash_)]

    def hash_rule(self) -> str | None:
        return self._rule

    def record_hash_rule(self, rule: str) -> None:
        self._rule = rule
