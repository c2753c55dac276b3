"""A client's link to a store's resident writer (`uwf writer`, uwf/writer/): a Unix
socket in the store's folder, and the frames that cross it.

A frame is a 4-byte big-endian length, then msgpack: a `Call` (an operation's name, as
the writer's registry lists it, and its argument values) from the client; a `Done`
(the operation's typed result, msgpack of its Struct) or a `Refused` (the refusal's
class, what and next action: the same `UwfError` the operation raises in-process) back.

`WriterLink.call` gives None when no writer answers (no socket, a socket no process
listens on, a connection refused before the call was sent): the caller then runs the
operation in-process, as every uwf did before the writer, and stays correct beside
it (the writer takes the writers' lock like any process). Once a call is sent, it is
never sent again: a writer that stops before it answers is `StoreUnavailable`, the call
perhaps applied, perhaps not.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from uwf import errors
from uwf.errors import StoreUnavailable, UwfError

if TYPE_CHECKING:
    import socket  # imported when a call is made: every command opens a store

SOCKET_NAME = "writer.sock"  # in the store's folder (docs/format.md)
HEADER = struct.Struct(">I")
UNSERVED = "Unserved"  # a refusal's kind: the writer does not serve the operation
MAX_FRAME = 64 * 1024 * 1024
T = TypeVar("T")


class Call(msgspec.Struct, tag="call", frozen=True):
    op: str
    args: dict[str, Any]


class Done(msgspec.Struct, tag="done", frozen=True):
    result: msgspec.Raw


class Refused(msgspec.Struct, tag="refused", frozen=True):
    kind: str  # the UwfError's class name (`NotFound`, `NothingToDo`, ...)
    what: str
    next_action: str = ""
    exit_code: int = errors.EXIT_REJECTED


Reply = Done | Refused
_call_decoder = msgspec.msgpack.Decoder(Call)
_encoder = msgspec.msgpack.Encoder()

# The refusals a reply may name, rebuilt as the same class (its exit code with it).
KINDS: dict[str, type[UwfError]] = {
    kind.__name__: kind for kind in (
        errors.UwfError, errors.NotFound, errors.Rejected, errors.UsageError,
        errors.NothingToDo, errors.StoreBusy, errors.Corrupt, errors.StoreUnavailable,
        errors.OldFormat, errors.Conflict)}


def frame(message: Call | Done | Refused) -> bytes:
    body = _encoder.encode(message)
    return HEADER.pack(len(body)) + body


class DoneAs(msgspec.Struct, Generic[T], tag="done", frozen=True):
    """A `Done` as it is framed and read: the result's own msgpack in place of its
    `Raw` (the same bytes, encoded once: tests/unit/test_writer_frames.py), decoded as
    its type in the same pass as the reply (`WriterLink.call`)."""

    result: T


def done_frame(result: Any) -> bytes:
    """The frame of a `Done` of `result`: its length, then the msgpack, made in one
    buffer (no `Raw` of the result encoded first, then copied into the frame)."""
    buffer = bytearray(HEADER.size)
    _encoder.encode_into(DoneAs(result), buffer, HEADER.size)
    HEADER.pack_into(buffer, 0, len(buffer) - HEADER.size)
    return bytes(buffer)


def decode_call(body: bytes) -> Call:
    return _call_decoder.decode(body)


def refusal(exc: UwfError) -> Refused:
    """A refusal as it crosses the socket: its nearest class the client knows."""
    kind = next(cls for cls in type(exc).__mro__ if cls.__name__ in KINDS).__name__
    return Refused(kind, exc.what, exc.next_action, exc.exit_code)


def address(root: Path) -> tuple[str, int | None]:
    """The socket's path as `bind`/`connect` take it, and a descriptor to close after:
    a path longer than a Unix socket's 107 bytes is reached through the folder's
    descriptor (/proc/self/fd/N/writer.sock)."""
    path = str(root / SOCKET_NAME)
    if len(os.fsencode(path)) < 100:
        return path, None
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{SOCKET_NAME}", fd


def read_exact(sock: socket.socket, count: int) -> bytes | None:
    """`count` bytes, or None at the end of the stream before them."""
    chunks: list[bytes] = []
    while count:
        chunk = sock.recv(count)
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _read_frame(sock: socket.socket) -> bytes | None:
    """One frame's body (a reply fits one `recv` as a rule), or None at the end of the
    stream before it."""
    data = sock.recv(1 << 16)
    if not data:
        return None
    if len(data) < HEADER.size:
        rest = read_exact(sock, HEADER.size - len(data))
        if rest is None:
            return None
        data += rest
    end = HEADER.size + HEADER.unpack_from(data)[0]
    if len(data) >= end:  # one call in flight a connection: nothing follows its reply
        return data[HEADER.size:end]
    tail = read_exact(sock, end - len(data))
    return None if tail is None else data[HEADER.size:] + tail


class WriterLink:
    """The store's writer socket, connected on first use and kept for the next call: one
    connection a thread (threads of one process sharing a store, as `uwf worker
    --concurrency N` does, each have their call in flight at once)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._local = threading.local()  # this thread's connection: `_local.sock`
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()  # every thread's, closed by `close`
        # A reply of each result type, read in one pass: DoneAs[result] | Refused.
        self._decoders: dict[type[Any], msgspec.msgpack.Decoder[Any]] = {}

    def call(self, op: str, args: dict[str, Any], result: type[T]) -> T | None:
        """The writer's result of `op`, or its refusal raised; None when no writer
        answers (run the operation in-process)."""
        sock: socket.socket | None = getattr(self._local, "sock", None)
        if sock is None and not os.path.lexists(self.root / SOCKET_NAME):
            return None  # no writer: one stat, not a socket made to fail (a hot path)
        request = frame(Call(op, args))
        if sock is not None:
            try:
                sock.sendall(request)
            except OSError:  # the writer this connection reached is gone: it read nothing
                self._let_go(sock)
                sock = None
        if sock is None:
            sock = self._connect()
            if sock is None:
                return None
            try:
                sock.sendall(request)
            except OSError:
                self._let_go(sock)
                return None  # refused before a byte of the call was read
        try:
            body = _read_frame(sock)
        except OSError:
            body = None
        if body is None:
            self._let_go(sock)
            raise StoreUnavailable(
                f"the writer of {self.root} stopped before it answered {op}: the command "
                "may or may not have been applied",
                "look at the state (`uwf queue show ID`, `uwf log tail`) before you retry")
        decoder = self._decoders.get(result)
        if decoder is None:
            decoder = self._decoders[result] = msgspec.msgpack.Decoder(
                DoneAs[result] | Refused)  # type: ignore[valid-type]
        reply = decoder.decode(body)
        if isinstance(reply, Refused):
            if reply.kind == UNSERVED:
                return None  # an operation this writer does not know: nothing was done
            kind = KINDS.get(reply.kind, UwfError)
            raise kind(reply.what, reply.next_action)
        return reply.result  # type: ignore[no-any-return]

    def _connect(self) -> socket.socket | None:
        import socket

        path, fd = address(self.root)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError:  # no socket, a stale one, a writer that refuses: no writer
            sock.close()
            return None
        finally:
            if fd is not None:
                os.close(fd)
        self._local.sock = sock
        with self._lock:
            self._open.add(sock)
        return sock

    def _let_go(self, sock: socket.socket) -> None:
        self._local.sock = None
        with self._lock:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def close(self) -> None:
        """Close every thread's connection (the store is closed)."""
        with self._lock:
            socks, self._open = self._open, set()
        self._local = threading.local()
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()
