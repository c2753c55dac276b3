"""The repo a command works in: the git top level of a folder it names, else of
the working directory it was started in (both from the entry point's `Settings`)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from uwf.config.settings import Settings
from uwf.errors import UsageError


def find_repo(explicit: str | None, settings: Settings) -> str:
    """The git top level of `--repo PATH` (else of the working directory, both the
    entry point's: `settings`): the nearest folder up from it holding `.git`; the
    folder itself when there is none."""
    try:
        here = _repo_folder(explicit, settings)
        for folder in (here, *here.parents):
            if (folder / ".git").exists():
                return str(folder)
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long, no working folder
        shown = "the working folder" if not explicit else repr(
            explicit if len(explicit) <= 60 else explicit[:57] + "...")
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot use {shown} as a repo: {reason}",
                         "give an existing folder with --repo") from None
    return str(here)


def _repo_folder(explicit: str | None, settings: Settings) -> Path:
    if explicit:
        return settings.path(explicit).resolve()
    if settings.cwd is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    return settings.cwd.resolve()


def search_folders(explicit: str | None, settings: Settings) -> list[Path]:
    """The folder a command works in (`--repo PATH`, else the working directory) and
    each folder up from it to its repo's top (`find_repo`), nearest first: where a
    workflow's file is looked for. Outside a repo, the folder alone."""
    top = Path(find_repo(explicit, settings))  # first: it names what is wrong with a path
    here = _repo_folder(explicit, settings)
    folders = [here]
    for parent in here.parents:
        if folders[-1] == top:
            break
        folders.append(parent)
    return folders if folders[-1] == top else [here]
