"""Numbers from `UWF_*` environment variables: a bad value is a usage error naming it."""

from __future__ import annotations

import os

from uwf.errors import UsageError


def env_number(name: str, default: float, *, integer: bool = False,
               positive: bool = False) -> float:
    """The value of `name` (or `default` when unset); never negative, positive if asked."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise UsageError(f"{name} must be {kind}, not {raw!r}", f"fix or unset {name}") from None
    if value < 0 or (positive and value == 0):
        raise UsageError(f"{name} must be {'positive' if positive else '0 or more'}, not {raw}",
                         f"fix or unset {name}")
    return value
