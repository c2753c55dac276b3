"""Snapshots of the views (SPEC §11): the views file as one commit left it, kept beside
it as `views/snapshot-<seq>.sqlite3`, so `uwf registry rebuild` and a fresh reader
restore it and fold only the log's tail.

A snapshot is a page-for-page copy of the views file made with SQLite's backup API in
one read transaction (every view, the kept counts and the stream index as a commit left
them, rowids included; the full-text indexes left out, made again on the first text
search, and the runs', the threads' and the steps' secondary indexes, made again by
the first read that may use each: uwf/engine/readindex.py), written under a temporary name,
fsynced, renamed into place and its folder fsynced: it is whole or absent. `<seq>` is
its lowest view checkpoint; only the newest is kept. Before one is used, the journal
checks each checkpoint it holds against the log (the line at seq has the digest): a
snapshot of a log since cut or rewritten is refused, and the whole log is replayed.

Only the SQLite view store keeps snapshots: the in-memory twin has nothing to keep
between processes, and a PostgreSQL store's views live in the database beside its log
(the database's own backup copies both).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import msgspec

from uwf.engine import ckptrows
from uwf.engine.log import Checkpoint
from uwf.engine.viewspec import STREAMS, STREAMS_SIGNATURE, ViewSpec
from uwf.errors import Corrupt, StoreBusy, StoreUnavailable, UsageError
from uwf.folders import fsync_folder

_NAME = re.compile(r"snapshot-(\d+)\.sqlite3")


class Snapshot(msgspec.Struct, frozen=True):
    """A kept snapshot: where it is, the checkpoint of each view (and of the stream
    index) it holds at this uwf's signatures, and, when it cannot be used whatever the
    log says, why (`problem`)."""

    path: Path
    checkpoints: Mapping[str, Checkpoint]
    problem: str | None = None
    # (A Struct, not a dataclass: a dataclass compiles its methods at every start-up,
    # and every command opens the store.)

    @property
    def checkpoint(self) -> Checkpoint:
        """The lowest checkpoint it holds: the log is folded again from there."""
        return min(self.checkpoints.values())


class Snapshots(Protocol):
    """Where a view store keeps its snapshots (the SQLite store's: `SqliteSnapshots`)."""

    def latest(self) -> Snapshot | None:
        """The newest snapshot kept, or None."""
        ...

    def take(self) -> Snapshot:
        """A new snapshot of the views as they are; older ones are let go."""
        ...

    def restore(self, snapshot: Snapshot, *, in_place: bool) -> bool:
        """Make the views the snapshot's. Without `in_place`, only when there is no
        views file (a fresh reader: the file appears whole or not at all); with it
        (inside the writers' section), over the views as they are. Whether it did."""
        ...


def usable(snapshots: Snapshots | None, match: Callable[[Checkpoint], None]
           ) -> tuple[Snapshot | None, str | None]:
    """The kept snapshot when the log holds every checkpoint in it (`match` raises
    Corrupt when the line at a checkpoint's seq does not hash to its digest); else None,
    and why it was refused (None: there is none)."""
    found = None if snapshots is None else snapshots.latest()
    if found is None:
        return None, None
    if found.problem is not None:
        return None, f"snapshot {found.path.name} refused: {found.problem}"
    for checkpoint in sorted(set(found.checkpoints.values())):
        try:
            match(checkpoint)
        except Corrupt:
            return None, (f"snapshot {found.path.name} refused: the log does not hold its "
                          f"checkpoint (seq {checkpoint.seq}): it was cut or rewritten since")
    return found, None


class SqliteSnapshots:
    """Snapshots of one SQLite views file, kept in its folder."""

    def __init__(self, views: Path, specs: Sequence[ViewSpec], *, durable: bool,
                 busy_timeout: float = 30.0) -> None:
        self.views = views
        self.folder = views.parent
        self.durable = durable
        self.busy_timeout = busy_timeout
        self._signatures = {spec.name: spec.signature for spec in specs}
        self._signatures[STREAMS] = STREAMS_SIGNATURE
        self._on_read = [spec.name for spec in specs if spec.on_read]

    def kept(self) -> list[Path]:
        """The snapshot files, oldest first."""
        found: list[tuple[int, Path]] = []
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.folder):
                match = _NAME.fullmatch(entry.name)
                if match is not None:
                    found.append((int(match.group(1)), Path(entry.path)))
        return [path for _, path in sorted(found)]

    def latest(self) -> Snapshot | None:
        kept = self.kept()
        if not kept:
            return None
        path = kept[-1]
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
            try:
                earlier = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                     "name = ?", (ckptrows.EARLIER,)).fetchone()
                rows = [] if earlier else db.execute(ckptrows.SELECT).fetchall()
            finally:
                db.close()
        except sqlite3.Error as exc:
            return Snapshot(path, {}, f"it is unreadable ({exc})")
        if earlier:
            return Snapshot(path, {}, "its views are of an earlier layout (a checkpoint "
                                      "row per view)")
        try:
            checkpoints = self._checkpoints(rows)
        except ckptrows.Damaged as exc:
            return Snapshot(path, {}, f"it is damaged ({exc})")
        if not checkpoints:
            return Snapshot(path, {}, "it holds no view at this uwf's versions")
        return Snapshot(path, checkpoints)

    def _checkpoints(self, rows: list[tuple[object, ...]]) -> dict[str, Checkpoint]:
        """The checkpoints of the views whose stored signature is this uwf's."""
        return ckptrows.read(rows, self._signatures).found

    def take(self) -> Snapshot:
        if not self.views.exists():
            raise UsageError("there are no views to keep a snapshot of (the log is empty)",
                             "write something first")
        temporary = self.folder / f".snapshot-{os.getpid()}-{threading.get_ident()}.tmp"
        try:
            with _classified(self.views):
                source = sqlite3.connect(self.views, timeout=self.busy_timeout,
                                         isolation_level=None)
                try:
                    target = sqlite3.connect(temporary, isolation_level=None)
                    try:
                        source.backup(target)  # one step: one read transaction
                        # A copy of a WAL file is a WAL file; a snapshot is read alone.
                        target.execute("PRAGMA journal_mode=DELETE")
                        _lean(target, self._on_read)
                        rows = target.execute(ckptrows.SELECT).fetchall()
                    finally:
                        target.close()
                finally:
                    source.close()
            checkpoints = self._checkpoints(rows)
            if not checkpoints:
                raise UsageError("there are no views to keep a snapshot of",
                                 "run `uwf registry refresh` first")
            if self.durable:
                _fsync(temporary)
            path = self.folder / f"snapshot-{min(checkpoints.values()).seq}.sqlite3"
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        if self.durable:
            fsync_folder(str(self.folder))
        for older in self.kept():  # only older ones: a newer one another process kept stays
            if older != path and _seq_of(older) <= _seq_of(path):
                older.unlink(missing_ok=True)
        return Snapshot(path, checkpoints)

    def restore(self, snapshot: Snapshot, *, in_place: bool) -> bool:
        if not in_place or not self.views.exists():
            return self._link(snapshot)
        with _classified(self.views):
            target = sqlite3.connect(self.views, timeout=self.busy_timeout,
                                     isolation_level=None)
            try:
                if _unjournalled(target, self.busy_timeout) and self._copy_over(target,
                                                                                snapshot):
                    return True
                source = sqlite3.connect(f"file:{snapshot.path}?mode=ro", uri=True,
                                         isolation_level=None)
                try:
                    # Over the live file, page by page, in one transaction: other
                    # processes' connections stay valid and see the snapshot's state at
                    # their next read.
                    source.backup(target)
                finally:
                    source.close()
            finally:
                target.close()
        return True

    def _copy_over(self, target: sqlite3.Connection, snapshot: Snapshot) -> bool:
        """The snapshot's bytes copied over the views file by the kernel (sendfile), for
        a views file no other connection has open (`target`'s journal is off): SQLite's
        page-by-page backup took 3 to 4 times the CPU of the copy (measured,
        docs/benchmarks.md). `target` holds the file's exclusive lock while the bytes
        are written, so a process opening it meanwhile waits, then reads the whole new
        file; the views file is then turned back to WAL mode by a new connection
        (`target`'s cached pages are of the file as it was). False, changing nothing,
        when another connection turned the file back to WAL mode meanwhile (its readers
        do not wait for a lock: the restore then goes page by page)."""
        target.execute("BEGIN EXCLUSIVE")
        if str(target.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "off":
            target.execute("ROLLBACK")
            return False
        try:
            with open(snapshot.path, "rb") as source, open(self.views, "r+b") as views:
                size = os.fstat(source.fileno()).st_size
                done = 0
                while done < size:
                    sent = os.sendfile(views.fileno(), source.fileno(), done, size - done)
                    if sent == 0:
                        raise OSError(f"{snapshot.path} shrank while it was copied")
                    done += sent
                views.truncate(size)
            # (Closing `views` let go of this process's locks on the file, `target`'s
            # too: the bytes were all written by then.)
        finally:
            target.execute("ROLLBACK")  # nothing written through SQLite: no pages to undo
        target.close()
        again = sqlite3.connect(self.views, timeout=self.busy_timeout, isolation_level=None)
        try:
            again.execute("PRAGMA journal_mode=WAL")
        finally:
            again.close()
        return True

    def _link(self, snapshot: Snapshot) -> bool:
        """Copy the snapshot to a temporary file and link it in as the views file, which
        appears whole or not at all; False when one is there already (another process
        made it first) or the snapshot went away meanwhile."""
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self.folder / f".restore-{os.getpid()}-{threading.get_ident()}.tmp"
        try:
            import shutil

            shutil.copyfile(snapshot.path, temporary)
            os.link(temporary, self.views)
        except OSError:  # another process made the views first (they are used), the
            return False  # snapshot was let go for a newer one, a full disk: fold the log
        else:
            return True
        finally:
            temporary.unlink(missing_ok=True)


def _lean(db: sqlite3.Connection, on_read: Sequence[str]) -> None:
    """The snapshot without the views' full-text indexes, made again on the first text
    search after a restore (uwf/engine/fulltext.py), nor the indexes of the views that
    make theirs on their first read (uwf/engine/readindex.py: the runs', the threads'
    and the steps', ~125 MiB of the run mix's 609): a smaller file to copy at each
    restore, for one more pass when it is kept (none when the views had none: a
    snapshot of views no read used since they were rebuilt)."""
    tables = [name for name, in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'f\\_%' "
        "ESCAPE '\\' AND sql LIKE 'CREATE VIRTUAL TABLE%'")]
    tables_of = [f"v_{view}" for view in on_read]
    indexes = [name for name, in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'i\\_%' "
        f"ESCAPE '\\' AND tbl_name IN ({', '.join('?' * len(tables_of))})", tables_of)]
    if not tables and not indexes:
        return
    for name in tables:
        db.execute(f'DROP TABLE "{name}"')
    for name in indexes:
        db.execute(f'DROP INDEX "{name}"')
    db.execute("VACUUM")


def _unjournalled(db: sqlite3.Connection, busy_timeout: float) -> bool:
    """Turn the views file's journal off for a restore, when no other connection has it
    open (SQLite leaves WAL mode only then): the snapshot's bytes are then copied over
    the file, not written into the WAL and again into the file (4 times faster than that,
    measured; the copy 3 to 4 times faster again than SQLite's backup).
    A crash midway leaves a damaged file, which the next rebuild replaces: views are a
    cache of the log. Whether it did (else the restore goes through the WAL)."""
    db.execute("PRAGMA busy_timeout = 0")
    try:
        mode = db.execute("PRAGMA journal_mode=OFF").fetchone()[0]
    except sqlite3.OperationalError:  # another connection is open: it must stay valid
        mode = "wal"
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    return str(mode).lower() == "off"


def _seq_of(path: Path) -> int:
    match = _NAME.fullmatch(path.name)
    return int(match.group(1)) if match is not None else -1


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _classified(views: Path) -> Iterator[None]:
    """SQLite's errors while copying, as the view store classifies them: busy, the disk,
    or a damaged views file."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        text = str(exc).lower()
        if "locked" in text or "busy" in text:
            raise StoreBusy(f"the views are busy ({views}: {exc})", "retry") from None
        raise StoreUnavailable(f"cannot copy the views ({views}: {exc})",
                               "check the disk and permissions, then retry") from None
    except sqlite3.DatabaseError as exc:
        raise Corrupt(f"views are unreadable ({views}: {exc})",
                      "run `uwf registry rebuild`") from None
