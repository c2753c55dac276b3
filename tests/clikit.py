"""The one driver of the console scripts in tests: `call(prog, argv, env)` runs `uwf`,
`json-cas` or any other script of this environment's bin folder, and gives the exit
code, stdout and stderr a real process would. `uwf` and `json-cas` run in this process
by default (`main(argv)` with the process's environment, stdin, stdout and stderr, for a
fraction of a process's cost, most of which is imports); `process=True` (or a memory
cap, or any other script) runs a real process.

In this process, a call still running at its time limit is interrupted (SIGINT, as
Ctrl-C would) and reported as `hung`; a call that leaves something behind in this
process (a change to os.environ, a signal handler, the working folder, the recursion
limit, a file descriptor, a thread) fails the test: `main(argv)` is promised to be
callable many times in one process. A process still running at its limit is killed and
reported as `hung`.
"""

from __future__ import annotations

import io
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

# The console scripts whose `main(argv)` can run here; any other runs as a process.
IN_PROCESS = ("uwf", "json-cas")
BIN = Path(sys.executable).parent  # this environment's console scripts


@dataclass(frozen=True)
class Called:
    """What a call gave: its exit code, stdout and stderr as bytes; `hung` if it still ran
    at its time limit; `raised`, in this process, an exception that escaped `main` (a
    SystemExit too: `main` returns its exit code), with its traceback."""

    code: int
    out: bytes
    err: bytes
    hung: bool = False
    raised: str | None = None

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


AGAIN = 0.5  # seconds between two interrupts once past the limit


class _Watchdog:
    """Interrupts the main thread (SIGINT, as Ctrl-C would) if the call runs past `limit`,
    and again every AGAIN seconds until it ends (an interrupt that lands in a finalizer
    is swallowed there: "Exception ignored"); `fired` says it did, so the test fails
    whatever the command made of it."""

    def __init__(self, limit: float) -> None:
        self.fired = False
        self._limit = limit
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="clikit-watchdog",
                                        daemon=True)

    def _watch(self) -> None:
        wait = self._limit
        while not self._done.wait(wait):
            with self._lock:
                if self._done.is_set():
                    return
                self.fired = True
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            wait = AGAIN

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            with self._lock:
                self._done.set()
        finally:  # set even if an interrupt lands here
            self._done.set()
            self._thread.join()  # gone before the threads are counted


def _exit_code(main: Callable[[Sequence[str]], int], argv: Sequence[str]
               ) -> tuple[int, str | None]:
    """What the console script's process would exit with (its wrapper is
    `sys.exit(main())`), an exception that escapes printed as Python prints it; and that
    exception's traceback, if one escaped."""
    try:
        return main(list(argv)) & 0xFF, None
    except SystemExit as exc:
        raised = traceback.format_exc()
        if exc.code is None:
            return 0, raised
        if isinstance(exc.code, int):
            return exc.code & 0xFF, raised
        sys.stderr.write(f"{exc.code}\n")
        return 1, raised
    except KeyboardInterrupt:
        traceback.print_exc()
        return -signal.SIGINT, traceback.format_exc()  # Python ends itself with the signal
    except Exception:
        traceback.print_exc()
        return 1, traceback.format_exc()


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


@contextmanager
def _working_folder(cwd: Path | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    saved = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)


@contextmanager
def _stdin(data: bytes | Path, errors: str) -> Iterator[io.TextIOWrapper]:
    """stdin as a process would have it: the bytes given, or the file at the path."""
    if isinstance(data, bytes):
        yield _stream(data, errors)
        return
    with data.open("rb") as handle:
        stream = io.TextIOWrapper(handle, encoding="utf-8", errors=errors)
        yield stream
        stream.detach()


@contextmanager
def _interruptible(what: str, watchdog: _Watchdog) -> Iterator[None]:
    """SIGINT unblocked and raising KeyboardInterrupt, as in a new process (a test run
    before in this worker may have left another handler or a blocked SIGINT, and the
    watchdog's interrupt would go unheard); a command that leaves it otherwise fails."""
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        left = signal.signal(signal.SIGINT, saved)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    if left is not signal.default_int_handler and not watchdog.fired:
        pytest.fail(f"{what} left behind in this process: the SIGINT handler {left!r}")


def _in_this_process(prog: str, argv: Sequence[str], env: Mapping[str, str], *,
                     stdin: bytes | Path, limit: float, cwd: Path | None) -> Called:
    what = " ".join([prog, *argv])
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(f"{what}: in-process runs only on the main thread (it swaps "
                           "os.environ and sys.std*); use process=True")
    main = _main(prog)
    errors = stdio_errors(env)
    out, err = _stream(b"", errors), _stream(b"", "backslashreplace")
    watchdog = _Watchdog(limit)
    code, raised = -1, None
    environ_changed: list[tuple[str, str]] = []
    try:
        with (_left_as_found(what, watchdog),
              _working_folder(cwd),
              mock.patch.dict(os.environ, env, clear=True),
              mock.patch.object(tempfile, "tempdir", None),  # TMPDIR is env's
              _stdin(stdin, errors) as given,
              _stdio(given, out, err),
              _interruptible(what, watchdog),
              watchdog):
            code, raised = _exit_code(main, argv)
            environ_changed = sorted(set(os.environ.items()) ^ set(env.items()))
    except KeyboardInterrupt:
        if not watchdog.fired:
            raise
    if environ_changed and not watchdog.fired:  # restored; in a process it would stay
        pytest.fail(f"{what} changed os.environ: {sorted({k for k, _ in environ_changed})}")
    out.flush()
    err.flush()
    return Called(code, _bytes(out), _bytes(err), watchdog.fired, raised)


def _in_a_process(prog: str, argv: Sequence[str], env: Mapping[str, str], *,
                  stdin: bytes | Path, limit: float, cwd: Path | None,
                  memory_cap: int | None) -> Called:
    exe = shutil.which(prog, path=str(BIN)) or prog  # else found on env's PATH
    handle = stdin.open("rb") if isinstance(stdin, Path) else None
    try:
        proc = subprocess.run(
            [exe, *argv], input=stdin if isinstance(stdin, bytes) else None,
            stdin=handle, capture_output=True, env=dict(env), cwd=cwd, timeout=limit,
            check=False, preexec_fn=None if memory_cap is None else _capped(memory_cap))
    except subprocess.TimeoutExpired as exc:  # killed by subprocess.run
        return Called(-signal.SIGKILL, _given(exc.stdout), _given(exc.stderr), hung=True)
    finally:
        if handle is not None:
            handle.close()
    return Called(proc.returncode, proc.stdout, proc.stderr)


def _capped(limit: int) -> Callable[[], None]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return cap


def _given(data: bytes | str | None) -> bytes:
    return data.encode() if isinstance(data, str) else data or b""


def call(prog: str, argv: Sequence[str], env: Mapping[str, str], *,
         stdin: bytes | Path = b"", limit: float = 60.0, cwd: Path | None = None,
         process: bool = False, memory_cap: int | None = None) -> Called:
    """`prog ARGV` with `env` as the whole environment (so the agents a step starts
    inherit it), `stdin` (bytes, or a file to read as stdin), in `cwd` (else this
    process's folder): in this process if it can be (`IN_PROCESS`), else, or when
    `process` is set or the address space is capped at `memory_cap` bytes, as a real
    process of this environment's script. `limit`: seconds until the call is `hung`."""
    if process or memory_cap is not None or prog not in IN_PROCESS:
        return _in_a_process(prog, argv, env, stdin=stdin, limit=limit, cwd=cwd,
                             memory_cap=memory_cap)
    return _in_this_process(prog, argv, env, stdin=stdin, limit=limit, cwd=cwd)


def _bytes(stream: io.TextIOWrapper) -> bytes:
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue()


def text(data: bytes, errors: str = "strict") -> str:
    """Output as `subprocess.run(..., text=True)` gives it: UTF-8, universal newlines."""
    return data.decode("utf-8", errors).replace("\r\n", "\n").replace("\r", "\n")


__all__ = ["BIN", "IN_PROCESS", "Called", "call", "stdio_errors", "text"]
