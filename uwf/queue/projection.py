"""The `queue` view (each entry's state, SPEC §8) and the `sched` view (the policy).

The lease state machine lives here, as a fold of what the events say happened:
`ready -lease-> leased -complete-> drained`; `leased -release/reclaim-> ready`
(after a backoff) or `parked`; `parked -reset-> ready`; anything `-cancel->
cancelled`. Which transitions a command may ask for is decided in `uwf.queue.sched`;
this fold only records them, so it needs no policy and no clock.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from uwf.engine.events import Envelope
from uwf.engine.projection import StructProjection
from uwf.engine.viewstore import ColumnValue
from uwf.queue.events import (
    QUEUE_EVENTS,
    QueueAdded,
    QueueCancelled,
    QueueCompleted,
    QueueDrained,
    QueueLeased,
    QueueReclaimed,
    QueueReleased,
    QueueRenewed,
    QueueReset,
    QueueStatusSet,
    SchedPolicySet,
)

STATUSES = ("ready", "leased", "drained", "parked", "cancelled")
TERMINAL = ("drained", "cancelled")
# The job registry's words for the same states.
ALIASES = {"pending": "ready", "running": "leased", "completed": "drained", "error": "parked",
           "cancelled": "cancelled"}
JOB_WORDS = {"ready": "pending", "leased": "running", "drained": "completed",
             "parked": "error", "cancelled": "cancelled"}
DEFAULT_PRIORITY = 100
DEFAULT_TIMEOUT_SEC = 3600
DEFAULT_IDLE_TIMEOUT_SEC = 120
# The order every listing and every selection follows.
QUEUE_ORDER = ("priority", "enqueued_at", "key")
POLICY_KEY = "policy"  # the sched view's one row (subject `policy/sched`)
DEFAULT_POOL = ""  # `ready_pool` of an entry without a session (a label is never empty)


class Lease(msgspec.Struct, frozen=True, rename="camel"):
    id: str
    expires_at_ms: int
    attempt: int
    session: str | None = None


class QueueEntry(msgspec.Struct, frozen=True, rename="camel"):
    id: str
    repo: str
    priority: int
    enqueued_at: str
    updated_at: str
    status: str = "ready"
    workflow: str | None = None
    workflow_hash: str | None = None
    prompt: str | None = None
    run: str | None = None
    session: str | None = None
    agent: str | None = None
    timeout_sec: int = DEFAULT_TIMEOUT_SEC
    idle_timeout_sec: int = DEFAULT_IDLE_TIMEOUT_SEC
    expected_artifacts: list[str] = []
    note: str = ""
    key: str | None = None
    attempts: int = 0
    lease: Lease | None = None
    next_eligible_at_ms: int | None = None
    parked_reason: str | None = None
    events: int = 1  # how many events this entry has in the log (its timeline's length)

    @property
    def live(self) -> bool:
        return self.status not in TERMINAL


class Policy(msgspec.Struct, frozen=True, rename="camel"):
    """The scheduling policy; the defaults are SPEC §8's (conservative: one at a time).

    Ceilings are per pool: the entries of one session label are a pool, and the
    entries without a session are the default pool. A pool's ceiling is its own
    (`sessions`), else `max_concurrent`; a lease in one pool never blocks another's.
    `max_total`, when set, bounds the active leases of all pools together.
    """

    max_concurrent: int = 1
    max_attempts: int = 3
    lease_ttl_ms: int = 300_000
    backoff_base_ms: int = 1000
    backoff_factor: float = 2
    backoff_cap_ms: int = 60_000
    sessions: dict[str, int] = {}  # msgspec copies mutable defaults
    max_total: int | None = None

    def ceiling(self, pool: str | None) -> int:
        """The most leases active at once in `pool` (a session label; None: the default
        pool, of entries without a session)."""
        return self.max_concurrent if pool is None else self.sessions.get(
            pool, self.max_concurrent)


class PolicyState(msgspec.Struct, frozen=True, rename="camel"):
    policy: Policy
    updated_at: str
    updated_seq: int


_replace = msgspec.structs.replace


def _failed(state: QueueEntry, attempts: int, next_eligible: int | None, parked: bool,
            reason: str) -> QueueEntry:
    if parked:
        return _replace(state, status="parked", attempts=attempts, lease=None,
                        next_eligible_at_ms=None, parked_reason=reason or "failed")
    return _replace(state, status="ready", attempts=attempts, lease=None,
                    next_eligible_at_ms=next_eligible, parked_reason=None)


def policy_of(data: SchedPolicySet) -> Policy:
    """The policy a `sched.policy_set` event records."""
    return Policy(data.max_concurrent, data.max_attempts, data.lease_ttl_ms,
                  data.backoff_base_ms, data.backoff_factor, data.backoff_cap_ms,
                  dict(data.sessions), data.max_total)


class QueueProjection(StructProjection):
    name: ClassVar[str] = "queue"
    version: ClassVar[int] = 3
    event_types: ClassVar[frozenset[str]] = frozenset(
        t.type for t in QUEUE_EVENTS if t is not SchedPolicySet)
    state_type: ClassVar[type[msgspec.Struct]] = QueueEntry
    # Every selection is an index range in queue order (priority, enqueuedAt, id):
    # the first ready entries, of a session or a repo; active leases are a range of
    # (status, lease_expires); entries in backoff a range of (status, eligible_at);
    # `live_key` finds the live entry with a key. Counts per status are kept.
    columns: ClassVar[tuple[str, ...]] = (
        "status", "priority", "enqueued_at", "session", "repo", "live_key", "lease_expires",
        "eligible_at", "ready_pool")
    indexes: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("priority", "enqueued_at", "key"),
        ("status", "priority", "enqueued_at", "key"),
        ("status", "session", "priority", "enqueued_at", "key"),
        ("status", "repo", "priority", "enqueued_at", "key"),
        ("session", "priority", "enqueued_at", "key"),
        ("repo", "priority", "enqueued_at", "key"),
        ("status", "lease_expires"),
        ("status", "eligible_at"),
        ("live_key",),
    )
    # `ready_pool` (a ready entry's session, "" for none; counted, not indexed) names
    # the pools that have ready work, so a lease asks each pool, not every entry.
    counted: ClassVar[tuple[str, ...]] = ("status", "ready_pool")

    def key(self, event: Envelope) -> str:
        return event.subject.removeprefix("queue/")

    def column_values(self, state: QueueEntry) -> tuple[ColumnValue, ...]:
        lease = state.lease
        return (state.status, state.priority, state.enqueued_at, state.session, state.repo,
                state.key if state.live else None,
                None if lease is None else lease.expires_at_ms,
                state.next_eligible_at_ms or 0,
                (state.session or DEFAULT_POOL) if state.status == "ready" else None)

    def apply(self, state: QueueEntry | None, event: Envelope) -> QueueEntry | None:
        data = event.data
        if isinstance(data, QueueAdded):
            return QueueEntry(
                id=self.key(event), repo=data.repo, priority=data.priority,
                enqueued_at=event.ts, updated_at=event.ts, workflow=data.workflow,
                workflow_hash=data.workflow_hash, prompt=data.prompt, run=data.run,
                session=data.session, agent=data.agent, timeout_sec=data.timeout_sec,
                idle_timeout_sec=data.idle_timeout_sec,
                expected_artifacts=data.expected_artifacts, note=data.note, key=data.key)
        if state is None:  # an event before its entry was added: `log verify` reports it
            return None
        state = _replace(state, updated_at=event.ts, events=state.events + 1)
        if isinstance(data, QueueLeased):
            lease = Lease(data.lease_id, data.expires_at_ms, data.attempt, data.session)
            return _replace(state, status="leased", lease=lease, next_eligible_at_ms=None)
        if isinstance(data, QueueRenewed):
            if state.lease is None:
                return state
            return _replace(state, lease=_replace(state.lease, expires_at_ms=data.expires_at_ms))
        if isinstance(data, QueueCompleted | QueueReleased) and data.run is not None:
            state = _replace(state, run=data.run)
        if isinstance(data, QueueCompleted | QueueDrained):
            return _replace(state, status="drained", lease=None, next_eligible_at_ms=None)
        if isinstance(data, QueueReleased):
            if not data.failed:
                return _replace(state, status="ready", lease=None, next_eligible_at_ms=None)
            return _failed(state, data.attempts, data.next_eligible_at_ms, data.parked,
                           data.reason)
        if isinstance(data, QueueReclaimed):
            return _failed(state, data.attempts, data.next_eligible_at_ms, data.parked,
                           data.reason)
        if isinstance(data, QueueReset):
            return _replace(state, status="ready", attempts=0, lease=None,
                            next_eligible_at_ms=None, parked_reason=None)
        if isinstance(data, QueueCancelled):
            return _replace(state, status="cancelled", lease=None, next_eligible_at_ms=None)
        if isinstance(data, QueueStatusSet):
            parked = "set by an operator" if data.status == "parked" else None
            return _replace(state, status=data.status, lease=None, next_eligible_at_ms=None,
                            parked_reason=parked)
        return state


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
