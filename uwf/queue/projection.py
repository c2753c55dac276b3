"""The `queue` view (each entry's state, SPEC §8) and the `sched` view (the policy).

The entry's status moves as the transition table says (`uwf.queue.rules`: `ready
-lease-> leased -complete-> drained`; `leased -release/reclaim-> ready` (after a
backoff) or `parked`; `parked -reset-> ready`; anything live `-cancel-> cancelled`);
this fold only records what the events say happened, so it needs no policy and no
clock. Which transitions a command may ask for is decided in `uwf.queue.decide`.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

import msgspec

from uwf.engine.events import Envelope, EventData
from uwf.engine.projection import StructProjection
from uwf.engine.viewspec import ColumnValue
from uwf.queue.events import (
    QUEUE_EVENTS,
    BrokerRef,
    QueueAdded,
    QueueCompleted,
    QueueDelivered,
    QueueDeliveryFailed,
    QueueLeased,
    QueuePublished,
    QueueReceived,
    QueueReclaimed,
    QueueReleased,
    QueueRenewed,
    QueueReset,
    QueueStatusSet,
    QueueWaiting,
    SchedPolicySet,
)
from uwf.queue.rules import TERMINAL, EntryState, Policy, leads_to, policy_of

T = TypeVar("T")
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
    # Jobs over MQTT: the broker, topic prefix and token `queue.added` gave, the last
    # seq published and received, and the published seqs not delivered yet.
    broker: BrokerRef | None = None
    topic_prefix: str | None = None
    auth_token: str | None = None
    last_seq: int = 0
    received_seq: int = 0
    undelivered: list[int] = []

    @property
    def topic(self) -> str:
        """Where the job's events go: `<topicPrefix>/events`."""
        return f"{self.topic_prefix or f'uwf/jobs/{self.id}'}/events"

    @property
    def live(self) -> bool:
        return self.status not in TERMINAL

    @property
    def rules_state(self) -> EntryState:
        """The entry as the transition table judges it (`uwf.queue.rules`)."""
        lease = self.lease
        return EntryState(self.status, None if lease is None else lease.id, self.attempts,
                          None if lease is None else lease.expires_at_ms)


class PolicyState(msgspec.Struct, frozen=True, rename="camel"):
    policy: Policy
    updated_at: str
    updated_seq: int


_replace = msgspec.structs.replace


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
        data = event.data
        if isinstance(data, QueueAdded):
            return QueueEntry(
                id=self.key(event), repo=data.repo, priority=data.priority,
                enqueued_at=event.ts, updated_at=event.ts, workflow=data.workflow,
                workflow_hash=data.workflow_hash, prompt=data.prompt, run=data.run,
                session=data.session, agent=data.agent, timeout_sec=data.timeout_sec,
                idle_timeout_sec=data.idle_timeout_sec,
                expected_artifacts=data.expected_artifacts, note=data.note, key=data.key,
                broker=_given(data.broker), topic_prefix=_given(data.topic_prefix),
                auth_token=_given(data.auth_token))
        if state is None:  # an event before its entry was added: `log verify` reports it
            return None
        return _fields(_replace(state, status=leads_to(state.status, data), updated_at=event.ts,
                                events=state.events + 1), data)


def _fields(state: QueueEntry, data: EventData) -> QueueEntry:
    """The entry's fields besides its status after `data` (the status is the table's):
    a lease is granted or renewed, else any lease and backoff end; a failed attempt is
    counted, with its backoff or the reason it parked."""
    if isinstance(data, QueuePublished | QueueDeliveryFailed | QueueDelivered | QueueReceived):
        return _message(state, data)
    if isinstance(data, QueueLeased):
        lease = Lease(data.lease_id, data.expires_at_ms, data.attempt, data.session)
        return _replace(state, lease=lease, next_eligible_at_ms=None)
    if isinstance(data, QueueRenewed):
        if state.lease is None:
            return state
        return _replace(state, lease=_replace(state.lease, expires_at_ms=data.expires_at_ms))
    if isinstance(data, QueueCompleted | QueueReleased | QueueWaiting) and data.run is not None:
        state = _replace(state, run=data.run)
    state = _replace(state, lease=None, next_eligible_at_ms=None)
    if isinstance(data, QueueReclaimed) or (isinstance(data, QueueReleased) and data.failed):
        if data.parked:
            return _replace(state, attempts=data.attempts, parked_reason=data.reason or "failed")
        return _replace(state, attempts=data.attempts,
                        next_eligible_at_ms=data.next_eligible_at_ms, parked_reason=None)
    if isinstance(data, QueueReset):
        return _replace(state, attempts=0, parked_reason=None)
    if isinstance(data, QueueStatusSet):
        return _replace(state, parked_reason="set by an operator"
                        if data.status == "parked" else None)
    return state


def _given(value: T | msgspec.UnsetType) -> T | None:
    return None if isinstance(value, msgspec.UnsetType) else value


def _message(state: QueueEntry, data: EventData) -> QueueEntry:
    """The job's messaging counters after one of its MQTT events (no status moves)."""
    if isinstance(data, QueuePublished):
        return _replace(state, last_seq=max(state.last_seq, data.seq))
    if isinstance(data, QueueDeliveryFailed):
        return _replace(state, undelivered=sorted({*state.undelivered, data.seq}))
    if isinstance(data, QueueDelivered):
        return _replace(state, undelivered=[seq for seq in state.undelivered
                                            if seq not in data.seqs])
    assert isinstance(data, QueueReceived)
    return _replace(state, received_seq=max(state.received_seq, data.seq))


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
