"""The `queue` view (each entry's state, SPEC §8) and the `sched` view (the policy).

An entry's row is its whole state (`uwf.queue.entry.QueueEntry`) as the aggregate's
`evolve` (`uwf.queue.rules`) leaves it: the view is that one function folded, as `log
verify` folds it, and the deciders (`uwf.queue.decide`) read the row. It records what
the events say happened, so it needs no policy and no clock.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from uwf.engine.events import Envelope
from uwf.engine.projection import StructProjection
from uwf.engine.viewspec import ColumnValue
from uwf.queue.entry import (
    DEFAULT_IDLE_TIMEOUT_SEC,
    DEFAULT_TIMEOUT_SEC,
    Lease,
    QueueEntry,
)
from uwf.queue.events import QUEUE_EVENTS, SchedPolicySet
from uwf.queue.rules import Policy, evolve, policy_of

__all__ = ["DEFAULT_IDLE_TIMEOUT_SEC", "DEFAULT_POOL", "DEFAULT_PRIORITY", "DEFAULT_TIMEOUT_SEC",
           "POLICY_KEY", "QUEUE_ORDER", "Lease", "PolicyState", "QueueEntry", "QueueProjection",
           "SchedProjection"]

DEFAULT_PRIORITY = 100
# The order every listing and every selection follows.
QUEUE_ORDER = ("priority", "enqueued_at", "key")
POLICY_KEY = "policy"  # the sched view's one row (subject `policy/sched`)
DEFAULT_POOL = ""  # `ready_pool` of an entry without a session (a label is never empty)


class PolicyState(msgspec.Struct, frozen=True, rename="camel"):
    policy: Policy
    updated_at: str
    updated_seq: int


class QueueProjection(StructProjection):
    name: ClassVar[str] = "queue"
    version: ClassVar[int] = 6  # 5: partial indexes; 6: waiting
    event_types: ClassVar[frozenset[str]] = frozenset(
        t.type for t in QUEUE_EVENTS if t is not SchedPolicySet)
    state_type: ClassVar[type[msgspec.Struct]] = QueueEntry
    # Every selection is an index range in queue order (priority, enqueuedAt, id): all
    # entries, those of a status, the ready ones of a pool (`ready_pool`: a ready
    # entry's session, "" for none); active and expired leases are a range of
    # (status, lease_expires), entries in backoff of (status, eligible_at); `live_key`
    # finds the live entry with a key. A filter by session or repo alone walks the
    # queue order. Counts per status and per ready pool are kept.
    columns: ClassVar[tuple[str, ...]] = (
        "status", "priority", "enqueued_at", "session", "repo", "live_key", "lease_expires",
        "eligible_at", "ready_pool")
    types: ClassVar[tuple[str, ...]] = (
        "text", "int", "text", "text", "text", "text", "int", "int", "text")
    indexes: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("priority", "enqueued_at", "key"),
        ("status", "priority", "enqueued_at", "key"),
        ("ready_pool", "priority", "enqueued_at", "key"),
        ("status", "lease_expires"),
        ("status", "eligible_at"),
        ("live_key",),
    )
    # Set only while an entry is ready, leased, in backoff or live with a key: an
    # entry added costs three indexes (queue order, status, its pool), not nine, and a
    # drained one stays in two.
    sparse: ClassVar[tuple[str, ...]] = ("ready_pool", "lease_expires", "eligible_at",
                                          "live_key")
    counted: ClassVar[tuple[str, ...]] = ("status", "ready_pool")

    def key(self, event: Envelope) -> str:
        return event.subject.removeprefix("queue/")

    def column_values(self, state: QueueEntry) -> tuple[ColumnValue, ...]:
        lease = state.lease
        return (state.status, state.priority, state.enqueued_at, state.session, state.repo,
                state.key if state.live else None,
                None if lease is None else lease.expires_at_ms,
                state.next_eligible_at_ms or None,
                (state.session or DEFAULT_POOL) if state.status == "ready" else None)

    def apply(self, state: QueueEntry | None, event: Envelope) -> QueueEntry | None:
        return evolve(state, event)


class SchedProjection(StructProjection):
    """One row, `policy`: the scheduling policy as the last `sched.policy_set` left it."""

    name: ClassVar[str] = "sched"
    version: ClassVar[int] = 1
    event_types: ClassVar[frozenset[str]] = frozenset({SchedPolicySet.type})
    state_type: ClassVar[type[msgspec.Struct]] = PolicyState

    def key(self, event: Envelope) -> str:
        return POLICY_KEY

    def apply(self, state: PolicyState | None, event: Envelope) -> PolicyState:
        data: SchedPolicySet = event.data
        policy = policy_of(data)
        return PolicyState(policy, event.ts, event.seq)
