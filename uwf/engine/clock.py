"""The injected clock: `UWF_NOW` (or `--now`) fixes time for every command."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from uwf.engine.errors import UsageError


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


def now_ms(override: str | None = None) -> int:
    """The current time in ms: the override, else `UWF_NOW`, else the wall clock."""
    fixed = override if override is not None else os.environ.get("UWF_NOW")
    if fixed:
        return parse_instant(fixed)
    return time.time_ns() // 1_000_000


def format_ts(ms: int) -> str:
    """RFC 3339 UTC with milliseconds, as every event's `ts`."""
    seconds, millis = divmod(ms, 1000)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{millis:03d}Z"
