"""A call tried again while the store does not answer (a server restarting): the
writes whose result must be recorded, and the reads they stand on (a step's record)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from uwf.errors import StoreUnavailable

T = TypeVar("T")


def while_unavailable(call: Callable[[], T], seconds: float) -> T:
    """`call()`, tried again while it raises StoreUnavailable, for at most `seconds`
    (wall time: a fixed `--now` clock never moves)."""
    give_up = time.monotonic() + seconds
    pause = 0.1
    while True:
        try:
            return call()
        except StoreUnavailable:
            if time.monotonic() + pause > give_up:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 2.0)
