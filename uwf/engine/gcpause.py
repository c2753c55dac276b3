"""The cyclic garbage collector held off while a batch makes many objects.

A `queue add --batch` of 50,000 entries makes some million objects (specs, events,
envelopes, states, rows) that hold no reference cycles and live until the batch is
written; every 700 allocations CPython's collector walks the young ones, and now and
then all of them: a fifth of the batch's CPU, measured (docs/benchmarks.md). Reference
counting frees them as before; the collector runs again once the batch is done.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside; enabled again after, unless it was off before (by
    the caller, or by another thread's `paused`, which enables it when it ends)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
