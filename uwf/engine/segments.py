"""The file backend's bytes: segment files `events/<first-seq>.jsonl` and the lock.

Private to `uwf.engine.filelog`: nothing above the log interface knows that
segments, offsets or the pending-repair note exist.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from pathlib import Path

from uwf.errors import Corrupt, StoreBusy
from uwf.folders import fsync_folder, make_folders

SEGMENT_SUFFIX = ".jsonl"
# Written before a torn tail is truncated, removed once `log.repaired` is in the log.
PENDING_NOTE = "repair.pending"


def segment_name(first_seq: int) -> str:
    """A segment is named by the seq of its first line, 20 digits."""
    return f"{first_seq:020d}{SEGMENT_SUFFIX}"


def is_segment_name(name: str) -> bool:
    stem = name.removesuffix(SEGMENT_SUFFIX)
    return name.endswith(SEGMENT_SUFFIX) and len(stem) == 20 and stem.isdigit()


class FileSegments:
    """Segments as files `events/<first-seq>.jsonl`, the lock as `<store>/lock`.

    Paths are plain strings and the lock file stays open: a durable append is
    dominated by fsync, and everything around it should cost as little as it can.
    """

    def __init__(self, events_dir: Path, lock_path: Path) -> None:
        self.events_dir = events_dir
        self.lock_path = lock_path
        self._dir = str(events_dir)
        # Append descriptors, kept across sections with the file (device, inode) each
        # was opened on: a writer that found the segment still that file (`stat`, under
        # the lock) writes through the one it has, else opens it again.
        self._fds: dict[str, tuple[int, tuple[int, int]]] = {}
        # Descriptors kept for reading, each with the file (device, inode) it was opened
        # on: a read checks the name still names that file (a segment cut away whole and
        # made again, or renamed, is opened anew), then preads.
        self._readers: dict[str, tuple[int, tuple[int, int]]] = {}
        self._lock_fd: int | None = None
        self._held = False

    def _path(self, name: str) -> str:
        return f"{self._dir}/{name}"

    def pending(self) -> bytes | None:
        path = self._path(PENDING_NOTE)
        if not os.access(path, os.F_OK):  # the usual answer, without an exception's cost
            return None
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise Corrupt(f"{path} is a folder, not uwf's repair note",
                          "move it out of the events folder, then retry") from None

    def set_pending(self, note: bytes | None) -> None:
        path = self._path(PENDING_NOTE)
        if note is None:
            if os.path.exists(path):
                os.unlink(path)
                fsync_folder(self._dir)
            return
        temp = path + ".tmp"
        with open(temp, "wb") as handle:
            handle.write(note)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
        fsync_folder(self._dir)

    def names(self) -> list[str]:
        try:
            with os.scandir(self._dir) as entries:
                found = [entry for entry in entries if is_segment_name(entry.name)]
        except FileNotFoundError:
            return []
        for entry in found:
            if not entry.is_file(follow_symlinks=False):
                raise Corrupt(f"{self._path(entry.name)} is named as a segment but is not a "
                              "file", "move it out of the events folder, then run `uwf log "
                              "verify`")
        return sorted(entry.name for entry in found)

    def size(self, name: str) -> int:
        try:
            return os.stat(self._path(name)).st_size
        except FileNotFoundError:
            return 0

    def stat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(self._path(name))
        except FileNotFoundError:
            return None

    def identity(self, name: str) -> tuple[int, int] | None:
        """The (device, inode) of the file the kept append descriptor of `name` writes."""
        kept = self._fds.get(name)
        return None if kept is None else kept[1]

    def exists(self, name: str) -> bool:
        return os.access(self._path(name), os.F_OK)

    def read(self, name: str, start: int, end: int | None = None) -> bytes:
        path = self._path(name)
        try:
            found = os.stat(path)
        except FileNotFoundError:
            return b""
        file = (found.st_dev, found.st_ino)
        kept = self._readers.get(name)
        if kept is None or kept[1] != file:
            if kept is not None:
                del self._readers[name]
                os.close(kept[0])
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return b""
            if len(self._readers) >= 16:  # a reader of many segments keeps a few open
                self._close_readers()
            kept = fd, file
            self._readers[name] = kept
        fd = kept[0]
        size = found.st_size if end is None else end - start
        chunks: list[bytes] = []
        while size > 0:  # pread may return less than asked (never past the end: b"")
            chunk = os.pread(fd, size, start)
            if not chunk:
                break
            chunks.append(chunk)
            start += len(chunk)
            size -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def append(self, name: str, data: bytes, durable: bool, *, defer: bool = False,
               file: tuple[int, int] | None = None) -> int | None:
        """Write `data` at the end of segment `name` with one write(2); with `durable`,
        fsync it, or with `defer` too, leave the fsync to the caller: the file's
        descriptor is returned (the caller's to fsync and close), so the lock can be
        let go first (`FileLog.exclusive`). `file`: the (device, inode) the caller found
        `name` to be in this section: a kept descriptor of that file is written through;
        without it, the segment is opened again."""
        kept = self._fds.get(name)
        if kept is not None and (file is None or kept[1] != file):
            self._close(name)
            kept = None
        fd = self._open(name, durable) if kept is None else kept[0]
        view = memoryview(data)
        while view:  # one write(2) in practice; the loop only guards a short write
            written = os.write(fd, view)
            view = view[written:]
        if not durable:
            return None
        if defer:
            return os.dup(fd)
        os.fsync(fd)
        return None

    def _open(self, name: str, durable: bool) -> int:
        """Segment `name`'s descriptor for appending, kept open; with `durable`, a new
        segment's name is made durable (its folder fsynced) before anything is in it."""
        for other in list(self._fds):  # only the last segment is appended to
            self._close(other)
        path = self._path(name)
        try:  # the segment is there, but for a command's first line in a new one
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            created = False
        except FileNotFoundError:
            make_folders(self._dir, durable)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            created = True
        found = os.fstat(fd)
        self._fds[name] = fd, (found.st_dev, found.st_ino)
        if created and durable:
            fsync_folder(self._dir)
        return fd

    def sync(self, name: str) -> None:
        """fsync segment `name` (a whole segment before the next one is started)."""
        fd = os.open(self._path(name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate(self, name: str, size: int) -> None:
        self._close(name)
        with open(self._path(name), "r+b") as handle:
            handle.truncate(size)
            handle.flush()
            os.fsync(handle.fileno())

    def remove(self, name: str) -> None:
        self._close(name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(name))
        fsync_folder(self._dir)

    def take(self, timeout: float) -> int | None:
        """Take the store's exclusive lock (callers serialise their own threads first),
        for `let_go` to give back with what this returns.

        A free lock is taken at once; a held one is waited for in the kernel (a
        blocking flock in a helper thread), so a waiter wakes the moment the holder
        lets go instead of sleeping through a backoff.
        """
        if self._held:
            raise RuntimeError("the store's lock is not re-entrant")
        fd = self._lock_file()
        # The free lock through flock itself: portalocker's wrapper of it (what the
        # wait below uses; flock on POSIX too, so the two exclude each other) costs
        # 13 µs a take and release, a tenth of a lease's own work.
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = None
        except OSError:  # held (EWOULDBLOCK), or not now: waited for, as portalocker did
            waited = self._wait_for_lock(timeout)
        self._held = True
        return waited

    def let_go(self, waited: int | None) -> None:
        """Give back the lock `take` took (`waited`: what it returned)."""
        # Append descriptors stay open: the next section writes through one only
        # when its segment is still the file it was opened on (`append`'s `file`).
        self._held = False
        if waited is None:
            assert self._lock_fd is not None
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        else:
            os.close(waited)  # closing its own open file lets the lock go

    def _lock_file(self) -> int:
        if self._lock_fd is None:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = self._open_lock()
        return self._lock_fd

    def _open_lock(self) -> int:
        try:
            # Never through a symlink: the lock must be this store's own file.
            return os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise Corrupt(f"the lock file {self.lock_path} is a symbolic link",
                          "remove it (uwf creates its own) and retry") from None

    def _wait_for_lock(self, timeout: float) -> int:
        """An open file of the lock holding it, taken within `timeout` seconds.

        flock has no timeout, so a daemon thread blocks in it on a file of its own
        while this thread waits for it with one. A waiter given up on (timeout,
        Ctrl-C) closes its file, and so drops the lock, as soon as it gets it.
        """
        import portalocker

        fd = self._open_lock()
        guard = threading.Lock()
        taken = threading.Event()
        abandoned = False
        errors: list[BaseException] = []

        def wait() -> None:
            try:
                portalocker.lock(fd, portalocker.LockFlags.EXCLUSIVE)
            except BaseException as exc:  # handed to the waiting thread
                errors.append(exc)
            with guard:
                if abandoned:
                    os.close(fd)
                    return
                taken.set()

        threading.Thread(target=wait, name="uwf-lock-wait", daemon=True).start()
        try:
            taken.wait(max(timeout, 0.0))
        except BaseException:
            with guard:
                abandoned = True
                if taken.is_set():  # interrupted just as it came: let it go
                    os.close(fd)
            raise
        with guard:
            got = taken.is_set()
            abandoned = not got
        if not got:
            raise StoreBusy(
                f"store is busy: another writer held {self.lock_path} for {timeout:g}s",
                "retry, or raise UWF_LOCK_TIMEOUT",
            )
        if errors:
            os.close(fd)
            raise StoreBusy(f"cannot lock {self.lock_path}: {errors[0]}", "retry")
        return fd

    def _close_readers(self) -> None:
        readers, self._readers = self._readers, {}
        for fd, _ in readers.values():
            os.close(fd)

    def close(self) -> None:
        self._close_readers()
        for name in list(self._fds):
            self._close(name)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _close(self, name: str) -> None:
        kept = self._fds.pop(name, None)
        if kept is not None:
            os.close(kept[0])

