"""An archive folder's files, written so nothing lands outside it.

Every file and subfolder is reached through the descriptor of the folder that
holds it and opened with O_NOFOLLOW (folders with O_DIRECTORY too), so a symbolic
link anywhere below the archive root (`runs`, `runs/<id>`, a file, a temporary
file) is refused instead of followed: the archive never writes through one. The
root itself is the folder the user named, a link to a folder included. Hard
links are refused too: a file is appended to only while it has one name (and,
given the inode the last sync recorded, only while it is that file), and a
temporary file is always made anew (O_EXCL), never truncated in place.

Three ways to write, as the archive seed allows: `append` (O_WRONLY | O_APPEND |
O_CREAT, then fsync; a file never shrinks), `write_once` (a temporary file,
fsync, rename, fsync of the folder; never over an existing file) and `replace`
(the same, over the old file: index.json and the checkpoint).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from uwf.errors import Corrupt, NotFound, StoreBusy, UsageError
from uwf.folders import make_folders

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # O_NONBLOCK: a FIFO never hangs us
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def check_root(directory: str | Path, *, create: bool,
               where: Callable[[str | Path], Path]) -> Path:
    """The archive root `directory` made absolute by `where` (the command's
    `Settings.path`: its HOME and working folder), refused before anything is written:
    an empty name (what an unset shell variable gives, which would mean the working
    folder), a name the system cannot use (too long) and a file where the folder should
    be are usage errors; a missing folder is created later only if `create` and its
    parent exists (else not found)."""
    if isinstance(directory, str) and not directory:
        raise UsageError("the archive folder is an empty name (an unset shell variable?), "
                         "which would mean the working folder",
                         "give the archive's folder, for example ./archive")
    path = where(directory)
    try:
        if path.exists():
            if not path.is_dir():
                raise UsageError(f"{path} is not a folder", "give the archive's folder")
            return path
        parent_is_folder = path.parent.is_dir()
    except OSError as exc:  # a name too long for the system (ENAMETOOLONG), ...
        shown = str(path) if len(str(path)) <= 80 else str(path)[:77] + "..."
        raise UsageError(f"cannot use {shown} as the archive folder: "
                         f"{exc.strerror or exc}", "give a shorter path") from None
    if not create:
        raise NotFound(f"no archive at {path}: the folder does not exist",
                       "give the folder `uwf archive sync` wrote")
    if not parent_is_folder:
        raise NotFound(f"the parent of {path} does not exist", "create it first, or give "
                       "another folder")
    return path


def _refused(where: str, exc: OSError) -> Corrupt:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return Corrupt(f"{where} is a symbolic link or not a folder: the archive never "
                       "writes through one", f"remove {where}, then retry")
    return Corrupt(f"cannot use {where}: {exc.strerror}", "check the archive folder")


class Folder:
    """One folder of the archive, held open; `where` names it for messages (relative
    to the archive root)."""

    def __init__(self, fd: int, where: str, durable: bool) -> None:
        self.fd = fd
        self.where = where
        self.durable = durable

    @classmethod
    def root(cls, path: Path, durable: bool, *, create: bool) -> Folder:
        if create:
            make_folders(str(path), durable)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise Corrupt(f"cannot open {path}: {exc.strerror}", "check the folder") from None
        return cls(fd, "", durable)

    def close(self) -> None:
        os.close(self.fd)

    def name(self, child: str) -> str:
        return f"{self.where}/{child}" if self.where else child

    def folder(self, child: str, *, create: bool) -> Folder | None:
        """A subfolder (created when `create`), or None when absent and not created."""
        if create:
            try:
                os.mkdir(child, 0o777, dir_fd=self.fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise _refused(self.name(child), exc) from None
            else:
                if self.durable:  # the new folder's name, before anything is put in it
                    os.fsync(self.fd)
        try:
            fd = os.open(child, _FOLDER, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refused(self.name(child), exc) from None
        return Folder(fd, self.name(child), self.durable)

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))

    def kind(self, child: str) -> str | None:
        """`file`, `folder`, `link` or `other`; None when absent (links not followed)."""
        try:
            mode = os.stat(child, dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(mode):
            return "link"
        return "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else "other"

    def size(self, child: str) -> int | None:
        """A file's size in bytes, or None when absent (links not followed)."""
        found = self.stat(child)
        return None if found is None else found.st_size

    def stat(self, child: str) -> os.stat_result | None:
        """A child's stat (links not followed), or None when absent."""
        try:
            return os.stat(child, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def check_own(self, child: str, info: os.stat_result,
                  inode: tuple[int, int] | None = None) -> None:
        """Refuse a file the archive must not write through: one with other names (a
        hard link: its other name may be outside the archive) or, given `inode` (device,
        inode), one that is not that file any more (it was replaced since)."""
        where = self.name(child)
        if info.st_nlink > 1:
            raise Corrupt(f"{where} has {info.st_nlink} links (a hard link, perhaps to a "
                          "file outside the archive): the archive never writes through one",
                          f"replace {where} with a copy of its own (cp, then mv over it), "
                          "then run `uwf archive verify DIR`")
        if inode is not None and (info.st_dev, info.st_ino) != inode:
            raise Corrupt(f"{where} is not the file the archive last synced (its inode "
                          "changed since the checkpoint): it was replaced behind its back",
                          "run `uwf archive verify DIR`; if you copied or restored the "
                          'archive folder on purpose, delete the "inodes" entry of '
                          ".uwf-archive.json, then retry")

    def open_file(self, child: str) -> BinaryIO | None:
        """A regular file opened for buffered reading (line by line), or None when
        absent; a link or a non-file is refused (Corrupt)."""
        try:
            fd = os.open(child, _READ, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refused(self.name(child), exc) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Corrupt(f"{self.name(child)} is not a regular file",
                              f"remove {self.name(child)}, then retry")
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def read(self, child: str) -> bytes | None:
        """A regular file's bytes, or None when absent; a link or a non-file is refused."""
        handle = self.open_file(child)
        if handle is None:
            return None
        with handle:
            return handle.read()

    def append(self, child: str, data: bytes, expected_size: int,
               inode: tuple[int, int] | None = None) -> tuple[int, tuple[int, int]]:
        """Append `data` to `child` (created if absent) in one write, then fsync; the new
        size and the file's (device, inode). The file must still be `expected_size` bytes
        (what the caller read) and, given `inode`, that very file: a file that shrank,
        grew or was replaced behind the archive's back is refused, never extended; so is
        a file with more than one link (a hard link may lead outside the archive)."""
        try:
            fd = os.open(child, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                         0o666, dir_fd=self.fd)
        except OSError as exc:
            raise _refused(self.name(child), exc) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise Corrupt(f"{self.name(child)} is not a regular file",
                              f"remove {self.name(child)}, then retry")
            self.check_own(child, info, inode)
            if info.st_size != expected_size:
                raise Corrupt(f"{self.name(child)} is {info.st_size} bytes, not the "
                              f"{expected_size} the archive read: it changed behind its back",
                              "run `uwf archive verify DIR`")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if self.durable:
                os.fsync(fd)
            return expected_size + len(data), (info.st_dev, info.st_ino)
        finally:
            os.close(fd)

    def cut(self, child: str, size: int, expected_size: int,
            inode: tuple[int, int] | None) -> None:
        """Cut `child` back to `size` bytes: a partial last line a sync stopped in the
        middle of its append left (the kernel may end a write killed part way at a page
        boundary). As `append`: only that very file, at the size the caller read, with
        one name; then fsync."""
        try:
            fd = os.open(child, os.O_WRONLY | os.O_NOFOLLOW, dir_fd=self.fd)
        except OSError as exc:
            raise _refused(self.name(child), exc) from None
        try:
            info = os.fstat(fd)
            self.check_own(child, info, inode)
            if not stat.S_ISREG(info.st_mode) or info.st_size != expected_size:
                raise Corrupt(f"{self.name(child)} changed behind the archive's back",
                              "run `uwf archive verify DIR`")
            os.ftruncate(fd, size)
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    def write_once(self, child: str, data: bytes) -> bool:
        """Write `child` unless it exists (then leave it: a second write is a bug the
        seed forbids); True when written."""
        found = self.kind(child)
        if found == "link":
            raise _refused(self.name(child), OSError(errno.ELOOP, "symbolic link"))
        if found is not None:
            return False
        self.replace(child, data)
        return True

    def replace(self, child: str, data: bytes) -> None:
        """Atomically put `data` at `child`: temporary file, fsync, rename, fsync the
        folder. The temporary name is fixed: a crash's leftover is overwritten next time
        (writers hold the archive's lock)."""
        temporary = f".{child}.tmp"
        # A leftover is removed, then the file made anew (O_EXCL): truncating a leftover
        # in place would write through it were it a hard link to a file elsewhere.
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            os.unlink(temporary, dir_fd=self.fd)
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o666, dir_fd=self.fd)
        except OSError as exc:
            raise _refused(self.name(temporary), exc) from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if self.kind(child) in ("folder", "other"):
            raise Corrupt(f"{self.name(child)} is not a regular file",
                          f"remove {self.name(child)}, then retry")
        os.replace(temporary, child, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        if self.durable:
            os.fsync(self.fd)

    @contextlib.contextmanager
    def lock(self, child: str, timeout: float, *, shared: bool = False) -> Iterator[None]:
        """Hold the archive's lock file `child` (exclusive for a sync, shared for a
        verify) within `timeout` seconds, else StoreBusy. A shared lock on an archive
        that has no lock file yet takes nothing (and creates nothing)."""
        import portalocker  # imported here: only archive commands pay for it

        flags = os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT
        try:
            fd = os.open(child, flags | os.O_NOFOLLOW, 0o666, dir_fd=self.fd)
        except FileNotFoundError:
            yield
            return
        except OSError as exc:
            raise _refused(self.name(child), exc) from None
        mode = portalocker.LockFlags.SHARED if shared else portalocker.LockFlags.EXCLUSIVE
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    portalocker.lock(fd, mode | portalocker.LockFlags.NON_BLOCKING)
                    break
                except portalocker.exceptions.LockException:
                    if time.monotonic() >= deadline:
                        raise StoreBusy("the archive is busy: another `uwf archive sync` "
                                        "holds its lock", "retry") from None
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)  # closing the file lets the lock go
