"""How a time reads on a page: relative to the store's clock ("3 min ago", the UTC time
on hover) and durations ("1 min 05 s"). The page's script keeps the relative times
current between refreshes (`data-ago`), counting from the same clock."""

from __future__ import annotations

from typing import Any

from uwf.engine.clock import parse_instant
from uwf.errors import UwfError

# A run in one of these lifecycles has ended: its duration runs to its last update.
ENDED = frozenset({"completed", "failed", "cancelled", "archived"})
_STEPS = ((86_400_000, "day"), (3_600_000, "h"), (60_000, "min"), (1000, "s"))


def instant(ts: Any) -> int | None:
    """Milliseconds of an event's `ts` (RFC 3339 UTC), None for anything else."""
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return parse_instant(ts)
    except UwfError:
        return None


def ago(ts: Any, now_ms: int) -> str:
    """`ts` relative to `now_ms`: "just now", "12 s ago", "5 min ago", "in 3 h"."""
    at = instant(ts)
    if at is None:
        return str(ts or "")
    delta = now_ms - at
    if abs(delta) < 1000:
        return "just now"
    for size, unit in _STEPS:
        if abs(delta) >= size:
            count = abs(delta) // size
            plural = "s" if unit == "day" and count != 1 else ""
            said = f"{count} {unit}{plural}"
            return f"{said} ago" if delta > 0 else f"in {said}"
    return "just now"


def duration(ms: Any) -> str:
    """A length of time: "850 ms", "12.3 s", "4 min 05 s", "2 h 03 min", "3 days 4 h"."""
    if not isinstance(ms, int | float) or ms < 0:
        return ""
    ms = int(ms)
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{ms // 60_000} min {ms % 60_000 // 1000:02d} s"
    if ms < 86_400_000:
        return f"{ms // 3_600_000} h {ms % 3_600_000 // 60_000:02d} min"
    days = ms // 86_400_000
    return f"{days} day{'' if days == 1 else 's'} {ms % 86_400_000 // 3_600_000} h"


def run_took(run: Any, now_ms: int) -> str:
    """A run's duration: created to its last update once it has ended, to now before."""
    if not isinstance(run, dict):
        return ""
    start = instant(run.get("createdAt"))
    end = instant(run.get("updatedAt")) if run.get("lifecycle") in ENDED else now_ms
    if start is None or end is None:
        return ""
    return duration(max(end - start, 0))
