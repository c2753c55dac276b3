"""An fsync started at once and waited for later: Linux AIO's `IOCB_CMD_FSYNC`.

A write's fsync is submitted (`io_submit`) just after its `write`, runs in the
kernel's workers while the writer folds its views and lets the lock go, and is waited
for (`io_getevents`) before the write is acknowledged: the disk's wait overlaps the
work that follows the append instead of following it (docs/benchmarks.md, "an fsync
started early"). The durability is the same as `os.fsync`'s: the caller returns
only once the kernel has reported the flush done, and a failed flush raises.

Each thread has its own AIO context (a writer waits only for its own flushes), made on
its first flush and destroyed with the owner (`close`). Where AIO is not there (another
kernel or machine, `fs.aio-max-nr` used up, a forked child whose parent's context is
not its own) `start` answers None and the caller flushes with `os.fsync`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import threading

# The system calls by machine (asm/unistd.h): io_setup, io_destroy, io_getevents,
# io_submit. Elsewhere AIO is not used.
_CALLS = {"x86_64": (206, 207, 208, 209), "aarch64": (0, 1, 4, 2)}
_FSYNC = 2  # IOCB_CMD_FSYNC
_EVENTS = 8  # a context's ring: one flush in flight a thread, stale ones drained


class _Iocb(ctypes.Structure):
    """`struct iocb` (linux/aio_abi.h), little-endian."""

    _fields_ = [("aio_data", ctypes.c_uint64), ("aio_key", ctypes.c_uint32),
                ("aio_rw_flags", ctypes.c_int32), ("aio_lio_opcode", ctypes.c_uint16),
                ("aio_reqprio", ctypes.c_int16), ("aio_fildes", ctypes.c_uint32),
                ("aio_buf", ctypes.c_uint64), ("aio_nbytes", ctypes.c_uint64),
                ("aio_offset", ctypes.c_int64), ("aio_reserved2", ctypes.c_uint64),
                ("aio_flags", ctypes.c_uint32), ("aio_resfd", ctypes.c_uint32)]


class _Event(ctypes.Structure):
    """`struct io_event`."""

    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64),
                ("res", ctypes.c_int64), ("res2", ctypes.c_int64)]


class _Context:
    """One thread's AIO context, its request block and its events' buffer."""

    __slots__ = ("block", "blocks", "events", "id", "pid", "serial")

    def __init__(self, context: int) -> None:
        self.id = context
        self.pid = os.getpid()
        self.block = _Iocb(aio_lio_opcode=_FSYNC)
        self.blocks = (ctypes.POINTER(_Iocb) * 1)(ctypes.pointer(self.block))
        self.events = (_Event * _EVENTS)()
        self.serial = 0


class AsyncSync:
    """Flushes started now and waited for later (`start`, `wait`), one AIO context a
    thread; `close` destroys them all."""

    def __init__(self) -> None:
        calls = _CALLS.get(platform.machine())
        self._calls = calls
        self._syscall = None
        if calls is not None:
            libc = ctypes.CDLL(None, use_errno=True)
            syscall = libc.syscall
            syscall.restype = ctypes.c_long
            self._syscall = syscall
        self._local = threading.local()
        self._contexts: list[_Context] = []
        self._lock = threading.Lock()
        self.off = calls is None  # AIO refused once: flushes are the caller's from then on

    def _context(self) -> _Context | None:
        context: _Context | None = getattr(self._local, "context", None)
        if context is not None and context.pid == os.getpid():
            return context
        if self.off or self._calls is None or self._syscall is None:
            return None
        made = ctypes.c_ulong(0)
        if self._syscall(self._calls[0], _EVENTS, ctypes.byref(made)) != 0:
            self.off = True
            return None
        context = _Context(made.value)
        self._local.context = context
        with self._lock:
            self._contexts.append(context)
        return context

    def start(self, fd: int) -> int | None:
        """Submit an fsync of `fd`: a token for `wait`, or None when AIO is not
        there (then nothing was started: the caller flushes)."""
        context = self._context()
        if context is None:
            return None
        assert self._calls is not None
        assert self._syscall is not None
        context.serial += 1
        block = context.block
        block.aio_data = context.serial
        block.aio_fildes = fd
        if self._syscall(self._calls[3], ctypes.c_ulong(context.id), 1, context.blocks) != 1:
            self.off = True  # a file system or a kernel that does not take it
            return None
        return context.serial

    def wait(self, token: int) -> None:
        """Until the flush `start` answered `token` for is done; OSError if it failed."""
        context: _Context = self._local.context
        assert self._calls is not None
        assert self._syscall is not None
        call, syscall, events = self._calls[2], self._syscall, context.events
        while True:
            got = syscall(call, ctypes.c_ulong(context.id), 1, _EVENTS, events, None)
            if got < 0:
                code = ctypes.get_errno()
                if code == errno.EINTR:
                    continue
                raise OSError(code, os.strerror(code))
            for index in range(got):
                event = events[index]
                if event.data == token:  # any other is a flush nobody waits for now
                    if event.res < 0:
                        raise OSError(-event.res, os.strerror(-event.res))
                    return

    def close(self) -> None:
        """Destroy every thread's context (a flush in flight is finished first)."""
        with self._lock:
            contexts, self._contexts = self._contexts, []
        pid = os.getpid()
        for context in contexts:
            if context.pid == pid and self._calls is not None and self._syscall is not None:
                self._syscall(self._calls[1], ctypes.c_ulong(context.id))
        self._local = threading.local()
