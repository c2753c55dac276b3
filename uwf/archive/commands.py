"""The arguments of `uwf archive ...` and the operations every surface calls.

Cheap to import (msgspec and the argument base only): the services load when an
operation runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from uwf.archive.terms import FOLDER_EXPECT, FolderName
from uwf.config.args import Args, arg

if TYPE_CHECKING:
    from pathlib import Path

    from uwf.archive.results import ArchiveVerified, Synced
    from uwf.engine.fold import Progress
    from uwf.store import Store


class ArchiveSync(Args, frozen=True, kw_only=True):
    dir: Annotated[FolderName, arg("the archive's folder (created if its parent exists)",
                                   positional=True, metavar="DIR", expect=FOLDER_EXPECT)]
    run: Annotated[str | None, arg("only this run (a thread's ULID, or its first "
                                   "characters); the checkpoint stays", metavar="ID",
                                   ids="runs")] = None
    follow: Annotated[bool, arg("keep syncing (every 0.2 s) until Ctrl-C or SIGTERM")] = False


class ArchiveVerify(Args, frozen=True, kw_only=True):
    dir: Annotated[FolderName, arg("the archive's folder", positional=True, metavar="DIR",
                                   expect=FOLDER_EXPECT)]


def folder(name: str, store: Store) -> str | Path:
    """The archive folder `name` made absolute here, at the edge, with the command's
    own settings (its HOME and working folder); an empty name is kept as it is, for
    `check_root` to refuse (it would mean the working folder)."""
    return store.settings.path(name) if name else name


def sync(args: ArchiveSync, store: Store, progress: Progress | None = None) -> Synced:
    """One sync of the archive (`follow`, syncing on until stopped, is the caller's);
    `progress` is told the log's events read of those to read."""
    from uwf.archive import service

    return service.sync(store, folder(args.dir, store), args.run, progress,
                        lock_timeout=store.settings.lock_timeout)


def verify(args: ArchiveVerify, store: Store) -> ArchiveVerified:
    """Check the archive against the seed's invariants and the live log."""
    from uwf.archive import verify as checks

    return checks.verify(store, folder(args.dir, store),
                         lock_timeout=store.settings.lock_timeout)
