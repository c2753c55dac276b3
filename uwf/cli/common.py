"""Helpers of the command handlers: a progress bar, and reading a file or stdin."""

from __future__ import annotations

import sys


def progress_bar(done: int, total: int) -> None:
    """A progress bar on stderr while views are rebuilt, only when stderr is a terminal."""
    if not sys.stderr.isatty() or total <= 0:
        return
    filled = int(30 * done / total)
    sys.stderr.write(f"\rrebuilding views [{'#' * filled}{'.' * (30 - filled)}] "
                     f"{100 * done // total:3d}%")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def read_input(source: str) -> str:
    """The text of a file, or of stdin for `-`; a one-line error when unreadable."""
    from uwf.errors import NotFound, UsageError

    if source == "-":
        return sys.stdin.read()
    try:
        with open(source, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        raise NotFound(f"no such file: {source}", "check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {source}: {exc}", "give a UTF-8 file") from None

