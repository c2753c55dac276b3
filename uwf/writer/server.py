"""`uwf writer`: one process that serves a folder store's frequent writes over a Unix
socket, many commands to one fsync.

Each round of its loop takes every call that has arrived (from any number of client
processes) and decides them as one unit (`rounds.decide_round`, uwf/engine/rounds.py:
the writers' lock and the tail check once, each call decided against the queue held
in memory, uwf/writer/memqueue.py, one append of the round's lines), its fsync left
out and its views' commit deferred to an idle moment (`flush`). The round's replies
go to the syncer (uwf/writer/syncer.py), which makes the log durable (`EventLog.sync`:
one fsync of the last segment covers every line written
before it, for every round handed to it meanwhile) and only then sends them, while
the loop runs the next round; while two clients or more are connected, the loop makes
a small round durable and answers it itself, and the calls that come meanwhile make the
next round together (`Writer.together`). Nothing is acknowledged before an fsync that covers
its lines; a refusal waits for it too (it may have read a line of an earlier round).

The writers' lock stays the protocol: a process that does not use the writer (an older
uwf, a client that found none, `uwf registry rebuild`) takes it between two of the
writer's rounds, and the writer's next round sees its lines by the tail check.
One writer a store: it holds `writer.lock` (flock) while it runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from uwf.engine.clock import system_clock
from uwf.engine.events import openssl_digester
from uwf.engine.rounds import Decide, decide_round, flush
from uwf.engine.writerlink import (
    HEADER,
    MAX_FRAME,
    SOCKET_NAME,
    UNSERVED,
    Refused,
    address,
    done_frame,
    frame,
    refusal,
)
from uwf.errors import StoreUnavailable, UsageError, UwfError
from uwf.store import Store
from uwf.writer.deferred import DeferredLog, _Counted
from uwf.writer.memqueue import QueueMemory
from uwf.writer.ops import OPS, Incoming, Spelling, read_call
from uwf.writer.syncer import Syncer

LOCK_NAME = "writer.lock"
# The views' commit of deferred rounds: when no call has come for FLUSH_IDLE seconds
# and no round waits for its fsync (a loop waiting for its own disk is not idle: a
# commit then, on a slow disk, would come every few rounds instead of every 64th),
# after FLUSH_ROUNDS rounds, or once FLUSH_ROWS entities changed, whichever first.
FLUSH_IDLE = 0.005
# The most calls a round made durable in the loop's own thread may hold (`Writer.together`):
# a bigger one is worth the disk's time overlapped with the next round's decisions.
TOGETHER_CALLS = 2
FLUSH_ROUNDS = 64
FLUSH_ROWS = 4096


# The chain's digest in a round: hashlib's SHA-256, whose import a command line avoids
# and a writer pays once.
chain_digest = openssl_digester()


class Served(msgspec.Struct, kw_only=True):
    """What a writer did until it stopped."""

    socket: str
    calls: int = 0
    rounds: int = 0
    fsyncs: int = 0


class _Peer:
    """One client connection: the bytes read and not yet a whole frame."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pending = b""


def check_servable(store: Store) -> Path:
    """The folder a writer may serve, or the reason it may not."""
    if store.root is None or store.database is not None:
        raise UsageError("a store in PostgreSQL needs no writer: each of its commands is "
                         "one call to the server already", "run `uwf writer` on a folder store")
    if store.clock is not system_clock:
        raise UsageError("the writer decides by the wall clock: it takes no --now or UWF_NOW",
                         "start it without them (a client with --now decides in-process)")
    if store.redact is not None:
        raise UsageError("the writer masks no secrets: a client with secrets to mask "
                         "decides in-process", "start it with no secrets configured")
    return store.root


def _answer(peer: _Peer, reply: bytes | Refused) -> None:
    """Send a reply (from the syncer's thread), framed already or not. A client gone
    meanwhile is let go by the loop when it reads the end of its stream: its call
    stands, as a command's whose process was killed after its write."""
    with contextlib.suppress(OSError):
        peer.sock.sendall(reply if isinstance(reply, bytes) else frame(reply))


def _guarded(op: str, decide: Decide) -> Decide:
    """`decide`, with a bug in it said in full here and to the client as one line."""
    def run(views: Any, now: int) -> Any:
        try:
            return decide(views, now)
        except UwfError:
            raise
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            raise UwfError(f"the writer failed running {op}: {exc!r}",
                           "see the writer's stderr") from exc
    return run


def _unavailable(why: str) -> Refused:
    return refusal(StoreUnavailable(f"the log could not be made durable: {why}",
                                    "check the disk, then start the writer again"))


class Writer:
    """A folder store's resident writer: `serve` until `stopped()`."""

    def __init__(self, store: Store, *, batch: bool = True, defer: bool = True,
                 inline: bool = False, together: bool = False) -> None:
        self.root = check_servable(store)
        # A round decided in memory as one unit (else each call through its in-process
        # function, one section a round), its views' commit deferred to the next idle
        # moment or the FLUSH_ROUNDS-th round (else one a round): measured in
        # docs/benchmarks.md. `inline`: a round of one call, nothing else on its way to
        # the disk, made durable in the loop's thread rather than the syncer's (measured
        # slower on a loaded disk, so not the default: docs/benchmarks.md).
        # `together`: while two clients or more are connected, a small round (at most
        # TOGETHER_CALLS calls) with nothing else on its way to the disk is made durable
        # in the loop's thread (the calls that come meanwhile wait on the socket and make
        # the next round together: fewer rounds, and no hand-off, a call), as the floor
        # of bench/writer_floor.py does; a bigger round goes to the syncer, so that the
        # loop decides the next calls while the disk works (measured in
        # docs/benchmarks.md, "the writer against its floor"). A lone client's rounds go
        # to the syncer. Not the default: on a quiet machine it measured slower at P = 2
        # and 4 in three alternating pairs (docs/benchmarks.md, "After stop 44's merges").
        self.batch = batch
        self.defer = batch and defer
        self.together = together
        self.store = store
        store.writer = None  # its commands run here, never sent back to itself
        self.log = DeferredLog(store.journal.log)
        store.journal.log = self.log
        self.memory = QueueMemory(store.journal)
        self._spelling = Spelling.of(store.journal)  # how its decisions spell instants
        self.served = Served(socket=str(self.root / SOCKET_NAME))
        self._syncer = Syncer(self.log.sync, _answer, _unavailable, inline=inline)
        self._lock_fd: int | None = None
        self._listener: socket.socket | None = None
        # The loop's poll: each descriptor's peer (None: the listener), no selectors
        # layer between epoll and the loop (a call's wake-up is its hot path).
        self._poll = select.epoll()
        self._peers: dict[int, _Peer | None] = {}

    def start(self) -> None:
        """Take the store's writer lock, and listen on its socket (a stale one removed)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(f"a writer already serves {self.root}",
                             "stop it first, or let it serve (clients find it themselves)"
                             ) from None
        self._lock_fd = fd
        path, dir_fd = address(self.root)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # a writer killed before it could remove its socket
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            os.chmod(path, 0o600)
            listener.listen(256)
        finally:
            if dir_fd is not None:
                os.close(dir_fd)
        listener.setblocking(False)
        self._listener = listener
        self._poll.register(listener.fileno(), select.EPOLLIN)
        self._peers[listener.fileno()] = None
        # The queue read into memory now, not on the first call.
        self.memory.catch_up(self.store.journal, self.store.journal.refresh())
        self._syncer.start()

    def serve(self, stopped: Callable[[], bool], poll: float = 0.25) -> Served:
        """Serve rounds until `stopped()` (looked at every `poll` seconds when idle); the
        last rounds answered before it returns."""
        while not stopped():
            if self._syncer.failed is not None:
                self._syncer.stop()
                raise StoreUnavailable(f"the writer's fsync failed: {self._syncer.failed}",
                                       "check the disk, then start the writer again")
            self._once(poll)
        self._once(0)  # the calls already sent are served, not cut off by the stop
        self.flush()
        self._syncer.stop()
        self.served.fsyncs = self._syncer.fsyncs
        return self.served

    def _once(self, timeout: float) -> None:
        """One round of the calls that have arrived within `timeout` seconds (the
        deferred rows committed to the views when none has, after FLUSH_IDLE)."""
        unsaved = self.memory.unsaved
        if unsaved is not None:
            if unsaved.rounds >= FLUSH_ROUNDS or len(unsaved.changed) >= FLUSH_ROWS:
                self.flush()
            else:
                timeout = min(timeout, FLUSH_IDLE)
        calls: list[tuple[_Peer, Incoming | None]] = []
        peers = self._peers
        for fd, _mask in self._poll.poll(timeout):
            peer = peers.get(fd)
            if peer is not None:
                calls.extend(self._read(peer))
            elif fd in peers:
                self._accept()
        if calls:
            self._round(calls)
        elif self.memory.unsaved is not None and not self._syncer.busy:
            self.flush()

    def flush(self) -> None:
        """The rounds' rows not yet in the views, committed (one transaction)."""
        if self.memory.unsaved is not None:
            flush(self.store.journal, self.memory)

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(True)
            self._peers[sock.fileno()] = _Peer(sock)
            self._poll.register(sock.fileno(), select.EPOLLIN)

    def _read(self, peer: _Peer) -> list[tuple[_Peer, Incoming | None]]:
        """The whole calls `peer` has sent (None: one that does not decode)."""
        try:
            data = peer.sock.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self._drop(peer)
            return []
        pending = peer.pending + data
        found: list[tuple[_Peer, Incoming | None]] = []
        while len(pending) >= HEADER.size:
            size = HEADER.unpack_from(pending)[0]
            if size > MAX_FRAME:
                self._drop(peer)
                return found
            if len(pending) < HEADER.size + size:
                break
            body = pending[HEADER.size:HEADER.size + size]
            pending = pending[HEADER.size + size:]
            try:
                found.append((peer, read_call(body)))
            except msgspec.DecodeError:
                found.append((peer, None))
        peer.pending = pending
        return found

    def _drop(self, peer: _Peer) -> None:
        fd = peer.sock.fileno()
        if self._peers.pop(fd, None) is not None:
            with contextlib.suppress(OSError, ValueError):
                self._poll.unregister(fd)
        with contextlib.suppress(OSError):
            peer.sock.close()

    def _round(self, calls: list[tuple[_Peer, Incoming | None]]) -> None:
        """Run every call, then hand the replies to the syncer, which sends them once an
        fsync covers the round's lines (`Syncer`)."""
        fd: int | None = None
        try:
            replies, section = self._decided(calls)
            appended, fd = section.appended, section.fd
        except UwfError as exc:  # the lock not had in time (StoreBusy): nothing ran
            replies, appended = [(peer, refusal(exc)) for peer, _ in calls], False
        except Exception as exc:  # a bug, or the disk: no call of the round is answered
            traceback.print_exc(file=sys.stderr)  # as done (the memory is read again)
            failed = UwfError(f"the writer failed a round: {exc!r}", "see the writer's stderr")
            replies, appended = [(peer, refusal(failed)) for peer, _ in calls], False
        self.served.calls += len(calls)
        self.served.rounds += 1
        self._syncer.submit(replies, fd, appended and self.log.durable,
                            here=self.together and len(calls) <= TOGETHER_CALLS
                            and len(self._peers) > 2)  # (one of them the listener)

    def _decided(self, calls: list[tuple[_Peer, Incoming | None]]
                 ) -> tuple[list[tuple[_Peer, bytes | Refused]], _Counted]:
        """Every call's reply (a result framed already), and the round's section (whether
        it appended anything, the segment it appended to: not yet durable).

        Batched (the default): every call that names a served operation is decided in
        one round of the write protocol (`rounds.decide_round`: one tail check, each
        decided against the queue held in memory, one append, one views commit)."""
        if not self.batch:
            return self._one_by_one(calls)
        replies: list[Refused | None] = []
        decides: list[Decide] = []
        for _peer, call in calls:
            decide, refused = self._decision(call)
            replies.append(refused)
            if decide is not None:
                decides.append(decide)
        with self.log.round() as section:
            results = decide_round(self.store.journal, section, decides, self.memory,
                                   defer=self.defer, line_digest=chain_digest)
        answered: list[tuple[_Peer, bytes | Refused]] = []
        at = 0
        for (peer, _call), early in zip(calls, replies, strict=True):
            if early is not None:
                answered.append((peer, early))
                continue
            result = results[at]
            at += 1
            answered.append((peer, refusal(result) if isinstance(result, UwfError)
                             else done_frame(result)))
        return answered, section

    def _decision(self, call: Incoming | None) -> tuple[Decide | None, Refused | None]:
        """A call's decision, or the refusal it gets before any is made."""
        if call is None:
            return None, refusal(UsageError("the writer could not read a call",
                                            "use the uwf the writer runs"))
        op = OPS.get(call.op)
        if op is None:  # an operation of a newer uwf: the client decides it itself
            return None, Refused(UNSERVED, f"this writer does not serve {call.op}")
        try:
            args = op.read(call.args)
        except msgspec.ValidationError as exc:
            return None, refusal(UsageError(
                f"the writer refused the arguments of {call.op}: {exc}",
                "use the uwf the writer runs"))
        return _guarded(call.op, op.decision(args, self._spelling)), None

    def _one_by_one(self, calls: list[tuple[_Peer, Incoming | None]]
                    ) -> tuple[list[tuple[_Peer, bytes | Refused]], _Counted]:
        """Each call through its in-process function, one section for the round (the
        writer before its batch mode, kept to measure against)."""
        with self.log.round() as section:
            replies = [(peer, self._run(call)) for peer, call in calls]
        self.memory.forget()
        return replies, section

    def _run(self, call: Incoming | None) -> bytes | Refused:
        _decide, refused = self._decision(call)
        if refused is not None:
            return refused
        assert call is not None
        op = OPS[call.op]
        try:
            result = op.run(self.store, op.read(call.args))
        except UwfError as exc:
            return refusal(exc)
        except Exception as exc:  # a bug: said here in full, to the client in a line
            traceback.print_exc(file=sys.stderr)
            return refusal(UwfError(f"the writer failed running {call.op}: {exc!r}",
                                    "see the writer's stderr"))
        return done_frame(result)

    def close(self) -> None:
        """Answer what is pending; stop listening (the socket removed first, so no client
        waits on it), let the clients go, give back the writer lock."""
        with contextlib.suppress(UwfError):
            self.flush()
        self._syncer.stop()
        if self._listener is not None:
            path, dir_fd = address(self.root)
            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            finally:
                if dir_fd is not None:
                    os.close(dir_fd)
            self._listener.close()
            self._listener = None
        for peer in list(self._peers.values()):
            if peer is not None:
                with contextlib.suppress(OSError):
                    peer.sock.close()
        self._peers.clear()
        self._poll.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
