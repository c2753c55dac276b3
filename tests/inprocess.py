"""`uwf` and `json-cas` run in this process: `main(argv)` with what a real process of the
console script would have (its environment, stdin, stdout and stderr) and the exit code it
would give, for a fraction of a process's cost (most of which is imports).

A call that would hang fails the test, loudly, when its time limit passes; a call that
leaves something behind in this process (a change to os.environ, a signal handler, the
working folder, the recursion limit, a file descriptor, a thread) fails it too:
`main(argv)` is promised to be callable many times in one process.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from unittest import mock

import pytest

# The console scripts whose `main(argv)` can run here; any other runs as a process.
IN_PROCESS = ("uwf", "json-cas")

# What a command must leave as it found it (beside os.environ and sys.std*, restored here).
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD,
            signal.SIGALRM)


def _main(prog: str) -> Callable[[Sequence[str]], int]:
    from uwf.cli.jsoncas import main as json_cas
    from uwf.cli.main import main as uwf

    return uwf if prog == "uwf" else json_cas


def stdio_errors(env: Mapping[str, str]) -> str:
    """The error handler Python gives a process's stdin and stdout in `env`: the one
    PYTHONIOENCODING names, else surrogateescape in the C or POSIX locale (C.UTF-8 too)
    or in UTF-8 mode, else strict."""
    _, _, errors = env.get("PYTHONIOENCODING", "").partition(":")
    if errors:
        return errors
    name = env.get("LC_ALL") or env.get("LC_CTYPE") or env.get("LANG") or "C"
    if name.split(".")[0] in ("C", "POSIX") or env.get("PYTHONUTF8") == "1":
        return "surrogateescape"
    return "strict"


def _stream(data: bytes, errors: str) -> io.TextIOWrapper:
    """A text stream with a `.buffer` beneath, as sys.stdin and sys.stdout are."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors=errors,
                            write_through=True)


class _Watchdog:
    """Interrupts the main thread (SIGINT, as Ctrl-C would) if the call runs past `limit`;
    `fired` says it did, so the test fails whatever the command made of it."""

    def __init__(self, limit: float) -> None:
        self.fired = False
        self._armed = True
        self._lock = threading.Lock()
        self._timer = threading.Timer(limit, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        with self._lock:
            if self._armed:
                self.fired = True
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._armed = False
        self._timer.cancel()
        self._timer.join()  # gone before the threads are counted


def _exit_code(main: Callable[[Sequence[str]], int], argv: Sequence[str]) -> int:
    """What the console script's process would exit with (its wrapper is
    `sys.exit(main())`); an exception that escapes is printed as Python prints it."""
    try:
        return main(list(argv)) & 0xFF
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code & 0xFF
        sys.stderr.write(f"{exc.code}\n")
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        return -signal.SIGINT  # Python ends itself with the signal
    except Exception:
        traceback.print_exc()
        return 1


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@contextmanager
def _left_as_found(what: str, watchdog: _Watchdog) -> Iterator[None]:
    """Fail if the call leaves a signal handler, the working folder, the recursion limit,
    a file descriptor or a thread behind (unless it hung: that is said first)."""
    handlers = {signum: signal.getsignal(signum) for signum in _SIGNALS}
    cwd = os.getcwd()
    recursion = sys.getrecursionlimit()
    fds = _fds()
    threads = set(threading.enumerate())
    yield
    if watchdog.fired:
        return
    left = [f"the {signal.Signals(signum).name} handler" for signum, handler in
            handlers.items() if signal.getsignal(signum) != handler]
    if os.getcwd() != cwd:
        left.append(f"the working folder {os.getcwd()}")
    if sys.getrecursionlimit() != recursion:
        left.append(f"the recursion limit {sys.getrecursionlimit()}")
    # A descriptor open now that was not before (one closed and reused is not seen).
    left += [f"fd {fd} -> {target}" for fd in sorted(_fds() - fds, key=int)
             if (target := _target(fd)) is not None]
    left += [f"thread {thread.name}" for thread in set(threading.enumerate()) - threads
             if thread.is_alive()]
    if left:
        pytest.fail(f"{what} left behind in this process: {', '.join(left)}")


def _target(fd: str) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own descriptor, closed since
        return None


@contextmanager
def _stdio(stdin: io.TextIOWrapper, out: io.TextIOWrapper, err: io.TextIOWrapper
           ) -> Iterator[None]:
    """sys.stdin, stdout and stderr for the call, and the originals (`sys.__stdout__`)
    too: argparse sizes help to the terminal of sys.__stdout__, which a process whose
    output is captured does not have."""
    names = ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")
    saved = [getattr(sys, name) for name in names]
    for name, stream in zip(names, (stdin, out, err) * 2, strict=True):
        setattr(sys, name, stream)
    try:
        yield
    finally:
        for name, value in zip(names, saved, strict=True):
            setattr(sys, name, value)


def run_main(prog: str, argv: Sequence[str], env: Mapping[str, str], stdin: bytes,
             limit: float) -> tuple[int, bytes, bytes]:
    """`prog`'s `main(argv)` in this process with `env` as the whole environment (so the
    agents a step starts inherit it), `stdin`, and its stdout and stderr captured; the
    exit code, stdout and stderr a process would give."""
    what = " ".join([prog, *argv])
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(f"{what}: in-process runs only on the main thread (it swaps "
                           "os.environ and sys.std*); use the proc_cli fixture")
    main = _main(prog)
    errors = stdio_errors(env)
    out, err = _stream(b"", errors), _stream(b"", "backslashreplace")
    watchdog = _Watchdog(limit)
    code = -1
    environ_changed: list[tuple[str, str]] = []
    try:
        with (_left_as_found(what, watchdog),
              mock.patch.dict(os.environ, env, clear=True),
              mock.patch.object(tempfile, "tempdir", None),  # TMPDIR is env's
              _stdio(_stream(stdin, errors), out, err),
              watchdog):
            code = _exit_code(main, argv)
            environ_changed = sorted(set(os.environ.items()) ^ set(env.items()))
    except KeyboardInterrupt:
        if not watchdog.fired:
            raise
    if watchdog.fired:
        pytest.fail(f"{what} still ran after {limit:g}s (in-process; a command that "
                    "runs until stopped needs the proc_cli fixture)")
    if environ_changed:  # restored here; in a process of many commands it would stay
        pytest.fail(f"{what} changed os.environ: {sorted({k for k, _ in environ_changed})}")
    out.flush()
    err.flush()
    return code, _bytes(out), _bytes(err)


def _bytes(stream: io.TextIOWrapper) -> bytes:
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue()


def text(data: bytes) -> str:
    """Output as `subprocess.run(..., text=True)` gives it: UTF-8, universal newlines."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


__all__ = ["IN_PROCESS", "run_main", "stdio_errors", "text"]
