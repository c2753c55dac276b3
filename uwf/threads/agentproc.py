"""An agent's process: its environment, its run, its output collected until it exits
(plus a short grace) or its deadline.

`Popen.communicate` waits for end-of-file on stdout and stderr, which never
comes while any descendant of the agent (a daemon it started, `setsid sleep`)
still holds them open. So uwf waits for the agent process itself: once it has
exited, the pipes get `EXIT_GRACE` seconds to drain, and then whatever was read
is its output; at the deadline, the agent (still running) is reported as timed
out, whatever its descendants do.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, NamedTuple

from uwf.cas.hashing import is_hash
from uwf.config.secrets import MIN_LENGTH
from uwf.engine.dburl import is_database_url
from uwf.redact import redactor
from uwf.threads.checks import Failure
from uwf.threads.events import STDERR_TAIL_BYTES, STDERR_TAIL_LINES

if TYPE_CHECKING:
    from pathlib import Path

    from uwf.config.configfile import Config
    from uwf.config.settings import Settings

EXIT_GRACE = 0.5  # seconds the pipes may drain after the agent exits
_POLL = 0.05  # how often an agent that prints nothing is checked for exit


class Collected(NamedTuple):
    """What an agent printed, and whether it exited before its deadline (if not, the
    caller kills it; what it printed until then is still said)."""

    out: bytes
    err: bytes
    exited: bool = True


def collect(process: subprocess.Popen[bytes], timeout: float) -> Collected:
    """The agent's stdout and stderr once it exited, or as they were at the deadline
    when it still ran (`exited` false). The pipes are closed either way."""
    assert process.stdout is not None
    assert process.stderr is not None
    streams: dict[int, list[bytes]] = {process.stdout.fileno(): [],
                                       process.stderr.fileno(): []}
    deadline = time.monotonic() + timeout
    exited_at: float | None = None
    selector = selectors.DefaultSelector()
    pipes: list[IO[bytes]] = [process.stdout, process.stderr]
    try:
        for pipe in pipes:
            selector.register(pipe, selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and process.poll() is not None:
                exited_at = now
            limit = deadline if exited_at is None else min(deadline, exited_at + EXIT_GRACE)
            if now >= limit:
                break
            wait = limit - now if exited_at is not None else min(limit - now, _POLL)
            for key, _ in selector.select(wait):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    streams[key.fd].append(chunk)
                else:
                    selector.unregister(key.fileobj)
        exited = True
        if exited_at is None:
            # Both pipes closed (or the deadline came) before the exit was seen: the
            # agent gets what is left of its time to exit.
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                exited = False
        return Collected(b"".join(streams[process.stdout.fileno()]),
                         b"".join(streams[process.stderr.fileno()]), exited)
    finally:
        selector.close()
        for pipe in pipes:
            pipe.close()


def stderr_tail(err: bytes, secrets: list[str]) -> str | None:
    """What a failed step keeps of its agent's stderr: the last STDERR_TAIL_LINES
    non-blank lines, secrets masked (before cutting: a cut secret would no longer
    match), at most STDERR_TAIL_BYTES bytes of UTF-8; None when it wrote nothing."""
    text = err.decode("utf-8", "replace")
    redact = redactor(secrets, min_length=MIN_LENGTH)
    if redact is not None:
        text = redact(text)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    tail = "\n".join(lines[-STDERR_TAIL_LINES:]).encode()
    if len(tail) > STDERR_TAIL_BYTES:  # a partial character at the cut is dropped
        tail = tail[-STDERR_TAIL_BYTES:].decode("utf-8", "ignore").encode()
    return tail.decode() or None


def agent_environment(settings: Settings, root: Path | None, config: Config
                      ) -> dict[str, str]:
    """The environment an agent starts from: the entry point's (`settings`') over the
    config's secrets, with what opens the store taken out. An agent on a folder store
    (at `root`; None: on PostgreSQL) gets
    UWF_HOME (a subflow starts its child threads there); on PostgreSQL it gets no URL,
    no password and no libpq variable (PG*)."""
    # As with dotenv: the environment (the entry point's) wins over `.env`.
    env = {**config.secrets(), **settings.environ}
    env.pop("UWF_HOME", None)
    if root is not None:
        env["UWF_HOME"] = str(root)
        return env
    url = settings.store_url or ""
    password = _url_password(url)
    return {name: value for name, value in env.items()
            if not name.startswith("PG") and not is_database_url(value)
            and not (url and url in value) and not (password and password in value)}


def _url_password(url: str) -> str | None:
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def spawn(argv: list[str], *, env: dict[str, str], cwd: str | None, timeout: float,
          nested: bool, secrets: list[str],
          on_agent: Callable[[subprocess.Popen[bytes]], None] | None = None
          ) -> str | Failure:
    """Run the agent `argv` to its end or `timeout` (in a process group of its own
    unless `nested`, the step of an agent's own thread); the StepNode hash its last line
    printed, or why the step failed (its exit status and stderr's tail, `secrets`
    masked)."""
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, start_new_session=not nested, cwd=cwd,  # agents work in the repo
        )
    except FileNotFoundError:
        return Failure("spawn", f"agent command {argv[0]!r} not found")
    except PermissionError:
        return Failure("spawn", f"agent command {argv[0]!r} is not executable")
    try:
        if on_agent is not None:
            on_agent(process)
        collected = collect(process, timeout)
    except BaseException:
        kill(process, nested)  # interrupted: leave no agent behind
        raise
    out, err, exited = collected
    tail = stderr_tail(err, secrets)
    said = (tail or "").rpartition("\n")[2].strip()[:200]
    said = f": {said}" if said else ""
    if not exited:  # what it said before it was killed tells where it was
        kill(process, nested)
        return Failure("timeout", f"agent did not finish within {timeout:g}s; killed{said}",
                       None, tail)
    process.wait()
    if process.returncode != 0:
        return Failure("exit", f"agent exited with status {process.returncode}{said}",
                       process.returncode, tail)
    # As the seed's agents do: the last non-empty line is the hash; what comes before
    # it (progress, logs) is the agent's business.
    text = out.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if not is_hash(last):
        shown = masked(text, secrets).strip()
        shown = shown if len(shown) <= 200 else "..." + shown[-197:]
        return Failure("garbage", f"agent printed {shown!r} instead of a StepNode hash on "
                                  "its last line", process.returncode, tail)
    return last


def kill(process: subprocess.Popen[bytes], nested: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if nested:
            process.kill()
        else:
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()  # the pipes are closed: nothing of a descendant can hold this up


def masked(text: str, secrets: list[str]) -> str:
    """`text` with `secrets` masked."""
    redact = redactor(secrets, min_length=MIN_LENGTH)
    return redact(text) if redact is not None else text
