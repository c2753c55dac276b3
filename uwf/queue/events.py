"""The queue's and the scheduler's events (SPEC §8): subject `queue/<id>` for an entry,
`policy/sched` for the policy.

Each event records the outcome it caused (a lease's id, expiry and attempt; a
failed attempt's count and either its next eligible time or that it parked),
never only the request, so a replay gives the same queue whatever the policy
or the clock say today.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from uwf.engine.events import EventData

POLICY_SUBJECT = "policy/sched"


class BrokerRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The MQTT broker a job's events go through (the job-registry seed's `broker`). The
    password is never stored: `password_env` names the environment variable that holds
    it where the job is published or followed."""

    host: str
    port: int = 1883
    tls: bool = False
    username: str | None = None
    password_env: str | None = None


class QueueAdded(EventData, frozen=True):
    """A unit of agent work is queued: a workflow and a prompt (a new run), or a run to
    continue. Its ts is the entry's enqueuedAt."""

    type: ClassVar[str] = "queue.added"
    refs: ClassVar[tuple[str, ...]] = ("workflow_hash",)
    repo: str
    priority: int
    workflow: str | None = None
    workflow_hash: str | None = None
    prompt: str | None = None
    run: str | None = None
    session: str | None = None
    agent: str | None = None
    timeout_sec: int = 3600
    idle_timeout_sec: int = 120
    expected_artifacts: list[str] = []  # noqa: RUF012  (msgspec copies mutable defaults)
    note: str = ""
    key: str | None = None
    # Jobs over MQTT (docs/mqtt.md): the broker, the topic prefix when it is not the
    # default `uwf/jobs/<id>`, and the token every message of the job carries. Left out
    # of the line (UNSET) for an entry without a broker, as before there were jobs.
    broker: BrokerRef | msgspec.UnsetType = msgspec.UNSET
    topic_prefix: str | msgspec.UnsetType = msgspec.UNSET
    auth_token: str | msgspec.UnsetType = msgspec.UNSET


class QueueDrained(EventData, frozen=True):
    """`queue drain` handed a ready entry to the host, outside any policy."""

    type: ClassVar[str] = "queue.drained"


class QueueLeased(EventData, frozen=True):
    """An entry is leased (`sched lease`, `queue pick`) until `expires_at_ms`."""

    type: ClassVar[str] = "queue.leased"
    lease_id: str
    expires_at_ms: int
    attempt: int  # this try's ordinal: failed attempts so far + 1
    session: str | None = None


class QueueRenewed(EventData, frozen=True):
    """A live lease is extended."""

    type: ClassVar[str] = "queue.renewed"
    lease_id: str
    expires_at_ms: int


class QueueCompleted(EventData, frozen=True):
    """The lease holder finished the entry: drained, for good."""

    type: ClassVar[str] = "queue.completed"
    lease_id: str
    run: str | None = None  # the run the holder started or continued for the entry


class QueueReleased(EventData, frozen=True):
    """The lease holder gave the entry back. Not `failed`: ready again at once, attempts
    unchanged. `failed`: one more failed attempt, then ready after a backoff
    (`next_eligible_at_ms`) or, at the policy's maxAttempts, `parked`."""

    type: ClassVar[str] = "queue.released"
    lease_id: str
    failed: bool
    attempts: int
    reason: str = ""
    next_eligible_at_ms: int | None = None
    parked: bool = False
    run: str | None = None  # the run the holder started: a retry continues it


class QueueWaiting(EventData, frozen=True):
    """The lease holder gave the entry back because its run waits for an answer to
    `question` (docs/queue.md#waiting): no attempt failed, no lease is held; it is
    leasable again once resumed."""

    type: ClassVar[str] = "queue.waiting"
    lease_id: str
    run: str
    question: str


class QueueResumed(EventData, frozen=True):
    """A waiting entry's run was answered (or its question's deadline passed): the
    entry is ready again, to continue its run."""

    type: ClassVar[str] = "queue.resumed"
    reason: str


class QueueReclaimed(EventData, frozen=True):
    """An expired lease is taken back (`sched reclaim`): one failed attempt, as above."""

    type: ClassVar[str] = "queue.reclaimed"
    lease_id: str
    attempts: int
    reason: str
    next_eligible_at_ms: int | None = None
    parked: bool = False


class QueueReset(EventData, frozen=True):
    """A parked entry is ready again with attempts 0 (`sched reset`)."""

    type: ClassVar[str] = "queue.reset"
    previous_attempts: int


class QueueCancelled(EventData, frozen=True):
    """The entry will never run (`queue cancel`); a lease it had is void."""

    type: ClassVar[str] = "queue.cancelled"
    previous: str
    reason: str = ""


class QueueStatusSet(EventData, frozen=True):
    """An operator set the status by hand (`queue status --set`); a lease it had is void."""

    type: ClassVar[str] = "queue.status_set"
    status: str
    previous: str


class QueuePublished(EventData, frozen=True):
    """An event of the job (`uwf queue publish`, or a status change the worker
    announces) with its `seq`, one more than the job's last, recorded before it is sent
    to `topic`. Its ts is the message's."""

    type: ClassVar[str] = "queue.published"
    seq: int
    topic: str
    event: Any


class QueueDeliveryFailed(EventData, frozen=True):
    """The broker did not take the published event `seq` (unreachable, refused, no
    acknowledgement in time): it is sent again by the job's next publish."""

    type: ClassVar[str] = "queue.delivery_failed"
    seq: int
    error: str


class QueueDelivered(EventData, frozen=True):
    """Published events whose delivery had failed were sent again and acknowledged."""

    type: ClassVar[str] = "queue.delivered"
    seqs: list[int]


class QueueReceived(EventData, frozen=True):
    """`uwf queue subscribe` took the job's event `seq` from the broker: the right token,
    a seq not seen before."""

    type: ClassVar[str] = "queue.received"
    seq: int
    topic: str
    event: Any


class SchedPolicySet(EventData, frozen=True):
    """The scheduling policy, whole, as it is from this event on."""

    type: ClassVar[str] = "sched.policy_set"
    max_concurrent: int
    max_attempts: int
    lease_ttl_ms: int
    backoff_base_ms: int
    backoff_factor: float
    backoff_cap_ms: int
    # Per-session ceilings and the overall cap (absent from events written before them).
    sessions: dict[str, int] = {}  # noqa: RUF012  (msgspec copies mutable defaults)
    max_total: int | None = None


QUEUE_EVENTS: tuple[type[EventData], ...] = (
    QueueAdded, QueueDrained, QueueLeased, QueueRenewed, QueueCompleted, QueueReleased,
    QueueReclaimed, QueueReset, QueueCancelled, QueueStatusSet, QueuePublished,
    QueueDeliveryFailed, QueueDelivered, QueueReceived, SchedPolicySet, QueueWaiting,
    QueueResumed,
)
# What a job says over MQTT: recorded on its subject, moving no status.
MESSAGE_EVENTS: tuple[type[EventData], ...] = (
    QueuePublished, QueueDeliveryFailed, QueueDelivered, QueueReceived)
