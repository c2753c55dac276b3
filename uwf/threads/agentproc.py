"""Collecting an agent's output: until it exits (plus a short grace) or its deadline.

`Popen.communicate` waits for end-of-file on stdout and stderr, which never
comes while any descendant of the agent (a daemon it started, `setsid sleep`)
still holds them open. So uwf waits for the agent process itself: once it has
exited, the pipes get `EXIT_GRACE` seconds to drain, and then whatever was read
is its output; at the deadline, the agent (still running) is reported as timed
out, whatever its descendants do.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from typing import IO

from uwf.config.secrets import MIN_LENGTH
from uwf.redact import redactor
from uwf.threads.events import STDERR_TAIL_BYTES, STDERR_TAIL_LINES

EXIT_GRACE = 0.5  # seconds the pipes may drain after the agent exits
_POLL = 0.05  # how often an agent that prints nothing is checked for exit


def collect(process: subprocess.Popen[bytes], timeout: float) -> tuple[bytes, bytes] | None:
    """The agent's (stdout, stderr) once it exited, or None if it still ran at the
    deadline (the caller kills it). The pipes are closed either way."""
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
        if exited_at is None:
            # Both pipes closed (or the deadline came) before the exit was seen: the
            # agent gets what is left of its time to exit.
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return None
        return (b"".join(streams[process.stdout.fileno()]),
                b"".join(streams[process.stderr.fileno()]))
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
