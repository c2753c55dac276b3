"""The operations a resident writer serves: each a name, its arguments' Struct, and the
in-process function it runs (the same one a client without a writer runs).

A registry of remotable operations rather than any command of the invoker: these are
the writes that come many at a time from many processes (a worker pool's lease, renew,
complete and release), where one fsync for many is worth a socket; their arguments are
plain values and their results typed Structs, so both cross the socket as msgpack and a
refusal is the very `UwfError` the in-process path raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from uwf.engine.clock import Stamps
from uwf.engine.journal import Journal
from uwf.engine.rounds import Decide
from uwf.queue import sched
from uwf.store import Store


class LeaseArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    limit: int | None = None
    session: str | None = None


class HeldArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    lease: str


class CompleteArgs(HeldArgs, frozen=True, forbid_unknown_fields=True):
    run: str | None = None


class ReleaseArgs(HeldArgs, frozen=True, forbid_unknown_fields=True):
    failed: bool = False
    reason: str = ""
    run: str | None = None


def _lease(store: Store, a: LeaseArgs) -> Any:
    return sched.lease(store, a.limit, a.session)


def _complete(store: Store, a: CompleteArgs) -> Any:
    return sched.complete(store, a.id, a.lease, run=a.run)


def _release(store: Store, a: ReleaseArgs) -> Any:
    return sched.release(store, a.id, a.lease, failed=a.failed, reason=a.reason, run=a.run)


def _renew(store: Store, a: HeldArgs) -> Any:
    return sched.renew(store, a.id, a.lease)


class Incoming(msgspec.Struct, tag="call", frozen=True):
    """A `Call` (uwf/engine/writerlink.py) as the writer reads it: its arguments' bytes
    kept, read once as the operation's own Struct (`Op.read`), not as a dict first."""

    op: str
    args: msgspec.Raw


read_call = msgspec.msgpack.Decoder(Incoming).decode


class Spelling(NamedTuple):
    """How a writer's decisions spell instants: `format_ts`'s text, a second spelled once
    for many (`clock.Stamps`): the section's instant by the journal's stamps (its events'
    `ts` spell the same second), a lease's expiry by stamps of its own."""

    now: Callable[[int], str]
    expiry: Callable[[int], str]

    @classmethod
    def of(cls, journal: Journal) -> Spelling:
        return cls(journal.stamps, Stamps())


class Op:
    """An operation: its arguments, the in-process function, and its decision alone
    (what a round of the writer runs: `uwf.engine.rounds`); `read` makes its arguments
    from a call's bytes (msgspec.ValidationError when they are not)."""

    __slots__ = ("args", "decision", "read", "run")

    def __init__(self, args: type[msgspec.Struct], run: Callable[[Store, Any], Any],
                 decision: Callable[[Any, Spelling], Decide]) -> None:
        self.args = args
        self.run = run
        self.decision = decision
        self.read: Callable[[msgspec.Raw], Any] = msgspec.msgpack.Decoder(args).decode


OPS: dict[str, Op] = {
    "queue.lease": Op(LeaseArgs, _lease,
                      lambda a, spell: sched.lease_decision(a.limit, a.session, *spell)),
    "queue.complete": Op(CompleteArgs, _complete,
                         lambda a, _: sched.complete_decision(a.id, a.lease, a.run)),
    "queue.release": Op(ReleaseArgs, _release, lambda a, _: sched.release_decision(
        a.id, a.lease, a.failed, a.reason, a.run)),
    "queue.renew": Op(HeldArgs, _renew, lambda a, _: sched.renew_decision(a.id, a.lease)),
}
