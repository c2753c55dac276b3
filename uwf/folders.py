"""Folders made durable: a new file's or folder's name lasts a machine's crash only
once the folder that holds it is fsynced (POSIX; ext4's journal happens to cover it,
other file systems need not)."""

from __future__ import annotations

import os


def fsync_folder(path: str) -> None:
    """fsync the folder `path`, so the names made in it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_folders(path: str, durable: bool) -> None:
    """`path` and any missing folders above it, as `os.makedirs(exist_ok=True)`; with
    `durable`, each new folder's parent is fsynced once it holds it, so a crash never
    keeps a file whose folder's name was lost."""
    missing: list[str] = []
    # The caller's path as given (an absolute one, resolved at the edge): a relative one
    # stops at its first name, whose folder is then ".".
    folder = os.path.normpath(path)
    while not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent in ("", folder):
            break
        folder = parent
    made: list[str] = []
    for folder in reversed(missing):
        try:
            os.mkdir(folder)
        except FileExistsError:  # another process made it first: its name may not be
            if not os.path.isdir(folder):  # durable yet, so its parent is fsynced too
                raise
        made.append(folder)
    if durable:
        for folder in made:
            fsync_folder(os.path.dirname(folder) or ".")
