"""Helpers of the command handlers: reading a file, stdin or JSON, and stopping cleanly
on a signal (progress bars: uwf.cli.progress)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uwf.config.settings import Settings


def read_input(source: str, settings: Settings) -> str:
    """The text of a file (`source` resolved by the command's `settings`: its HOME and
    working folder), or of stdin for `-`: a regular file (never a FIFO, a device
    or a folder) of at most MAX_JSON_INPUT_BYTES, and UTF-8; a one-line error otherwise
    (docs/cli.md#files-a-command-reads)."""
    from uwf.config import inputfile
    from uwf.errors import UsageError

    # The bytes themselves: a text stdin would smuggle bad bytes in as surrogates.
    data = inputfile.read_input(source if source == "-" else settings.path(source),
                                inputfile.MAX_JSON_INPUT_BYTES, stdin=True)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if source == "-":
            raise UsageError(f"stdin is not UTF-8 text: {exc}", "give UTF-8") from None
        raise UsageError(f"cannot read {source}: {exc}", "give a UTF-8 file") from None
    if source == "-":
        return text
    # A file's line endings as text mode (universal newlines) always gave them.
    return text.replace("\r\n", "\n").replace("\r", "\n")


class _Refused(Exception):
    """A number or constant json.loads must not turn into a value."""


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _integer(text: str) -> int:
    from uwf.cas.limits import MAX_NUMBER

    # int() refuses 4,300+ digits with a ValueError; 400 are already past float64.
    value = int(text) if len(text) <= 400 else None
    if value is None or abs(value) > MAX_NUMBER:
        raise _Refused(f"a number of {len(text.lstrip('-')):,} digits is out of range")
    return value


def _float(text: str) -> float:
    import math

    value = float(text)
    if not math.isfinite(value):  # 1e400 parses as inf
        raise _Refused(f"the number {text[:40]} is out of range")
    return value


def parse_json(text: str, source: str) -> Any:
    """JSON from `source` (a file name, `-` or a flag, for errors) as plain values within
    uwf's limits (docs/cli.md#limits): nested at most 200 deep, numbers within float64
    (no NaN or Infinity), strings UTF-8 can encode. Otherwise a usage error."""
    import json

    from uwf.cas.limits import MAX_DEPTH
    from uwf.config.inputfile import LIMITS_DOC
    from uwf.config.yamlfile import value_problem
    from uwf.errors import UsageError

    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark, as editors write it
    try:
        value = json.loads(text, parse_constant=_constant, parse_int=_integer,
                           parse_float=_float)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source} is not JSON: {exc}", "fix the input") from None
    except _Refused as exc:
        raise UsageError(f"{source}: {exc}", LIMITS_DOC) from None
    except RecursionError:
        raise UsageError(f"{source}: nested more than {MAX_DEPTH} deep", LIMITS_DOC) from None
    if (problem := value_problem(value)) is not None:
        raise UsageError(f"{source}: {problem}", LIMITS_DOC)
    return value


@contextlib.contextmanager
def until_signalled(then: Callable[[], None] | None = None) -> Iterator[threading.Event]:
    """An event set by SIGTERM or Ctrl-C (and `then()` called), so a command that
    follows (`archive sync --follow`, `bridge mqtt`, the worker) ends between two steps
    (exit 0) instead of unwinding one mid-write. Signal handlers belong to the main
    thread; elsewhere (main(argv) in a thread) none is installed."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()
        if then is not None:
            then()

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM,
                                                                       signal.SIGINT)}
    # A SIGTERM the console script's handler took before this one was installed, whose
    # exception was swallowed where exceptions are ignored, stops the command all the same.
    if getattr(previous[signal.SIGTERM], "received", 0):
        stop.set()
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
