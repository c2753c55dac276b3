"""Reading a file a command is given: a regular file, or `-` for stdin, within a limit.

Every file uwf reads on a user's word goes through here (docs/cli.md#files-a-command-reads):
a `--batch`, a workflow file, JSON input, an anchor, a key, the config file and its
`.env`. A FIFO, a device, a folder or a socket is refused before it is opened (opening
a FIFO for reading waits for a writer; reading /dev/zero never ends), and so is a
file over its limit, after reading at most one byte more than the limit. Links are
followed (a config linked in from a dotfiles folder is ordinary): what is checked is
the file the link leads to, both before opening it and on the opened descriptor, so
a path swapped for a FIFO in between is refused too. Stdin is bounded by the same
limit. The limits are listed in docs/cli.md#limits.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from uwf.errors import NotFound, UsageError, UwfError

KiB, MiB = 1 << 10, 1 << 20

# A `queue add --batch` line (one entry, its prompt inline), and a whole batch: one
# write to the log, every entry held in memory until then (about 3 KiB each on the way
# through the journal, so 100,000 entries cost some 300 MiB and a few seconds).
MAX_BATCH_LINE_BYTES = 1 * MiB
MAX_BATCH_BYTES = 16 * MiB
MAX_BATCH_ENTRIES = 100_000
# JSON input (`json-cas put|hash`, `uwf agent submit --output|--detail`): a node is at
# most 16 MiB as compact JSON (uwf.cas.limits); indented, the same node takes more.
MAX_JSON_INPUT_BYTES = 64 * MiB
# An anchor is about 400 bytes and an Ed25519 PEM key about 120: anything near this
# limit is not one.
MAX_ANCHOR_BYTES = 64 * KiB
MAX_KEY_BYTES = 64 * KiB
# The config's `.env` (the config file itself is a YAML file: uwf.config.yamlfile).
MAX_DOTENV_BYTES = 1 * MiB

LIMITS_DOC = "see the limits in docs/cli.md#limits"
STDIN = "-"

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def size_words(limit: int) -> str:
    """`1 MiB (1,048,576 bytes)`: a limit as the errors and docs/cli.md say it."""
    for unit, name in ((MiB, "MiB"), (KiB, "KiB")):
        if limit >= unit and limit % unit == 0:
            return f"{limit // unit} {name} ({limit:,} bytes)"
    return f"{limit:,} bytes"


def shown(source: str | Path) -> str:
    return "stdin" if str(source) == STDIN else str(source)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


@contextlib.contextmanager
def open_input(source: str | Path, limit: int, *, what: str = "", stdin: bool = False,
               error: type[UwfError] = UsageError, action: str | None = None
               ) -> Iterator[BinaryIO]:
    """The file `source` opened for reading in binary (stdin for `-` when `stdin`); the
    caller reads at most `limit` + 1 bytes of it.

    `what` names the file before its path (`the anchor key `); `error` is the class of a refusal
    (a usage error for a file named on the command line; the config and its `.env`
    pass Rejected), `action` its next action. A missing file is NotFound.
    """
    if stdin and str(source) == STDIN:
        raw = getattr(sys.stdin, "buffer", None)
        # A text stdin without bytes beneath (an in-process caller's): its text as UTF-8,
        # lone surrogates kept, so that bad bytes are refused as on a real stdin.
        yield raw if raw is not None else io.BytesIO(
            sys.stdin.read(limit + 1).encode("utf-8", "surrogatepass"))
        return
    path = Path(source)  # resolved by the caller, at the edge (Settings.path)
    other = action or ("give a regular file, or - for stdin" if stdin
                       else "give a regular file")
    try:
        # stat first: a FIFO or a device is never opened (opening has effects of its own).
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{what}{path} is {_kind(mode)}, not a regular file", other)
        # O_NONBLOCK: if the path became a FIFO since the stat, the open does not wait.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise NotFound(f"no such file: {path}", "check the path") from None
    except OSError as exc:
        raise error(f"cannot read {what}{path}: {exc.strerror or exc}",
                    action or "check the path and its permissions") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{what}{path} is {_kind(mode)}, not a regular file", other)
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def read_input(source: str | Path, limit: int, *, what: str = "", stdin: bool = False,
               error: type[UwfError] = UsageError, action: str | None = None,
               too_big: str | None = None) -> bytes:
    """The bytes of `source` (see `open_input`), at most `limit` of them: a file over
    the limit is refused naming it, after reading one byte more than the limit."""
    with open_input(source, limit, what=what, stdin=stdin, error=error,
                    action=action) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise error(f"cannot read {what}{shown(source)}: {exc.strerror or exc}",
                        action or "check the path and its permissions") from None
    if len(data) > limit:
        raise error(f"{what}{shown(source)} is more than {size_words(limit)}",
                    too_big or action or f"shorten it; {LIMITS_DOC}")
    return data


def read_lines(source: str | Path, line_limit: int, limit: int, *, what: str = "",
               stdin: bool = False) -> list[bytes]:
    """The lines of `source` (the line numbered n at n - 1), without their `\\n`: a
    line over `line_limit` bytes, or a file over `limit` bytes, is refused (a usage
    error naming the first such line, or the file, and the limit). The file is read
    in one call, at most `limit` + 1 bytes, and split in one (a batch's 50,000 lines
    cost 0.1 µs each; a line at a time, 0.4); only a file that breaks a limit is read
    again a line at a time, to name the line."""
    with open_input(source, limit, what=what, stdin=stdin) as handle:
        data = _read(handle.read, limit + 1, source, what)
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the newline that ends the last line (or an empty file)
    if len(data) > limit or max(map(len, lines), default=0) > line_limit:
        for _ in _lines(io.BytesIO(data), source, line_limit, limit, what):
            pass  # raises
    return lines


def _read(read: Callable[[int], bytes], size: int, source: str | Path, what: str) -> bytes:
    try:
        return read(size)
    except OSError as exc:
        raise UsageError(f"cannot read {what}{shown(source)}: {exc.strerror or exc}",
                         "check the path") from None


def _lines(handle: BinaryIO, source: str | Path, line_limit: int, limit: int, what: str
           ) -> Iterator[tuple[int, bytes]]:
    total = 0
    number = 0
    while True:
        # Room for the limit and a CRLF: a line's ending is not counted.
        line = _read(handle.readline, line_limit + 2, source, what)
        if not line:
            return
        number += 1
        total += len(line)
        if total > limit:
            raise UsageError(f"{what}{shown(source)} is more than {size_words(limit)}",
                             f"split it into several batches; {LIMITS_DOC}")
        measured = len(line)
        if line.endswith(b"\n"):
            line = line[:-1]
            measured = len(line) - line.endswith(b"\r")
        if measured > line_limit:
            raise UsageError(f"{what}{shown(source)} line {number} is more than "
                             f"{size_words(line_limit)}",
                             f"shorten that line; nothing was added; {LIMITS_DOC}")
        yield number, line
