"""The injected clock: a function returning epoch milliseconds, passed explicitly.

`--now` (or `UWF_NOW`) fixes time for one command: the CLI turns it into a
`fixed_clock` and hands it to the store; nothing reads or writes the process
environment behind the caller's back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from uwf.errors import UsageError

Clock = Callable[[], int]


def parse_instant(text: str) -> int:
    """Milliseconds since the epoch from an RFC 3339 string or an integer of ms."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"invalid time {text!r}", "give RFC 3339 (2026-11-25T20:57:13Z) or epoch ms"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def system_clock() -> int:
    """The wall clock in ms."""
    return time.time_ns() // 1_000_000


def fixed_clock(ms: int) -> Clock:
    """A clock stopped at `ms` (for `--now`, `UWF_NOW` and tests)."""
    return lambda: ms


def clock_from(override: str | None = None, env: Mapping[str, str] | None = None) -> Clock:
    """`override` (`--now`), else `env["UWF_NOW"]`, else the wall clock.

    A malformed value is a usage error here, before any work is done.
    """
    fixed = override or (env or {}).get("UWF_NOW")
    return fixed_clock(parse_instant(fixed)) if fixed else system_clock


def format_ts(ms: int) -> str:
    """RFC 3339 UTC with milliseconds, as every event's `ts`."""
    seconds, millis = divmod(ms, 1000)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{millis:03d}Z"
