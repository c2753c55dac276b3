"""A durable write's pages handed to the disk at once: `sync_file_range(2)` with
`SYNC_FILE_RANGE_WRITE`, which starts their write-out and returns without waiting.

A durable command's line is written, its pages sent on their way, and then the writer
folds its views and lets the lock go while the disk writes them; the `fsync` after the
unlock (uwf/engine/filelog.py) waits for a write already under way, and the journal's
commit. The fsync stays the command's one durability point and reports any error: this
is a head start, never a promise (docs/format.md, step 8). It runs in the writer's own
thread (no kernel worker to wake, nothing done off the process's CPU clock).

Where there is no such call (another kernel or machine) or the file refuses it, `start`
does nothing from then on, and the fsync does all of it, as before.
"""

from __future__ import annotations

import ctypes

SYNC_FILE_RANGE_WRITE = 2


class Writeback:
    """`start(fd)`: the dirty pages of `fd`'s file sent to the disk, not waited for."""

    __slots__ = ("_call",)

    def __init__(self) -> None:
        try:
            call = ctypes.CDLL(None, use_errno=True).sync_file_range
        except (OSError, AttributeError):
            self._call = None
            return
        call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
        call.restype = ctypes.c_int
        self._call = call

    @property
    def off(self) -> bool:
        return self._call is None

    def start(self, fd: int) -> None:
        call = self._call
        if call is not None and call(fd, 0, 0, SYNC_FILE_RANGE_WRITE) != 0:
            self._call = None  # refused (a pipe, a file system without it): the fsync's
