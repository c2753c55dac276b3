"""What `uwf queue ...` and `uwf sched ...` return: the payloads `--json` prints, typed."""

from __future__ import annotations

from typing import Any

import msgspec

from uwf.payload import UNSET, Result, UnsetType

# -- entries ---------------------------------------------------------------------------


class EntryLease(Result):
    """The lease an entry is held under."""

    id: str
    expires_at: str
    attempt: int
    session: str | None


class BrokerShown(Result):
    """The MQTT broker of a job: where, and the variable holding its password (never the
    password)."""

    host: str
    port: int
    tls: bool
    username: str | None
    password_env: str | None


class EntryRecord(Result):
    """An entry as SPEC §8 lists its fields (plus the job registry's status word); a job
    over MQTT also has its broker, topic prefix, token and message counters."""

    id: str
    status: str
    job_status: str
    priority: int
    enqueued_at: str
    updated_at: str
    workflow: str | None
    workflow_hash: str | None
    prompt: str | None
    run: str | None
    repo: str
    session: str | None
    agent: str | None
    timeout_sec: int
    idle_timeout_sec: int
    expected_artifacts: list[str]
    note: str
    key: str | None
    attempts: int
    lease: EntryLease | None
    next_eligible_at: str | None
    parked_reason: str | None
    broker: BrokerShown | UnsetType = UNSET
    topic_prefix: str | UnsetType = UNSET
    auth_token: str | UnsetType = UNSET
    last_seq: int | UnsetType = UNSET
    received_seq: int | UnsetType = UNSET
    undelivered: list[int] | UnsetType = UNSET


class EntryAdded(Result):
    """`queue add`: whether the entry is new (else it was live under its key), and it."""

    added: bool
    entry: EntryRecord


class BatchAdded(Result):
    """`queue add --batch`: every line's entry id, and how many were new."""

    count: int
    added: int
    existing: int
    ids: list[str]


class EntryPage(Result):
    """`queue list`: a page of entries in queue order; `total` is how many the filters
    select."""

    total: int
    limit: int | None
    offset: int
    entries: list[EntryRecord]


class Drained(Result):
    """`queue drain`: the entries it marked drained."""

    count: int
    drained: list[EntryRecord]


# -- timelines ---------------------------------------------------------------------------


class TimelineEvent(Result):
    """One event of an entry's timeline: its status before and after."""

    seq: int
    ts: str
    event: str
    type: str
    from_: str | None = msgspec.field(name="from")
    to: str | None
    data: Any


class Timeline(Result):
    """`queue logs ID`: the entry's live status and its timeline, oldest first."""

    id: str
    status: str
    events: list[TimelineEvent]


class TimelineLength(Result):
    """One row of `queue logs --list`: an entry's live status and its number of events."""

    id: str
    status: str
    job_status: str
    events: int
    enqueued_at: str
    updated_at: str


class Timelines(Result):
    """`queue logs --list`: every entry, in queue order."""

    count: int
    entries: list[TimelineLength]


# -- scheduling ------------------------------------------------------------------------


class PolicyValues(Result):
    """The scheduling policy's values (backoffFactor a whole number when it is one)."""

    max_concurrent: int
    max_attempts: int
    lease_ttl_ms: int
    backoff_base_ms: int
    backoff_factor: int | float
    backoff_cap_ms: int
    sessions: dict[str, int]
    max_total: int | None


class PolicyShown(Result):
    """`sched policy show|set`: the policy, whether it is the default, and when it was
    last set."""

    policy: PolicyValues
    default: bool
    updated_at: str | None


class Granted(Result):
    """One lease `sched lease` granted."""

    id: str
    lease_id: str
    lease_expires_at: str
    attempt: int


class Leased(Result):
    """`sched lease`: the leases granted at `now`."""

    now: str
    granted: int
    leases: list[Granted]


class ReclaimedLease(Result):
    """One expired lease `sched reclaim` took back, and what became of its entry."""

    id: str
    lease_id: str
    attempts: int
    status: str
    next_eligible_at: str | None


class Reclaimed(Result):
    """`sched reclaim`: the expired leases taken back at `now`."""

    now: str
    count: int
    reclaimed: list[ReclaimedLease]


class PoolLoad(Result):
    """A pool with ready work (`session` None: the default pool): its ceiling and its
    active leases."""

    session: str | None
    ceiling: int
    active: int


class PlannedLease(Result):
    """An entry `sched lease` would grant now."""

    id: str
    priority: int
    attempt: int
    session: str | None


class Skipped(Result):
    """An entry `sched lease` would not grant now, and why."""

    id: str
    reason: str


class SkippedCounts(Result):
    """How many entries wait for each reason."""

    parked: int
    terminal: int
    leased: int
    waiting: int  # its run waits for an answer (docs/queue.md#waiting)
    backoff: int
    concurrency_ceiling: int = msgspec.field(name="concurrency-ceiling")


class Planned(Result):
    """`sched plan`: what a lease would grant now, and why the rest waits."""

    now: str
    policy: PolicyValues
    active: int
    available: int
    pools: list[PoolLoad]
    leases: list[PlannedLease]
    skipped: list[Skipped]
    skipped_counts: SkippedCounts


# -- jobs over MQTT --------------------------------------------------------------------


class Published(Result):
    """`queue publish`: the event's seq, the topic it went to, and the earlier events
    whose delivery had failed that went with it."""

    id: str
    seq: int
    topic: str
    resent: list[int]


class Received(Result):
    """One line of `queue subscribe`: an event of the job taken from the broker."""

    id: str
    seq: int
    ts: str
    topic: str
    event: Any


class EntryCounts(Result):
    """`queue counts`: entries per status (kept counts, every status named), and the
    throughput of the last `minutes`: entries added and entries finished (drained)
    since `since`, read from the log's end."""

    statuses: dict[str, int]
    total: int
    minutes: int
    since: str
    added: int
    finished: int
    # False when the window held more than `counts.SCAN_LINES` lines: the two figures
    # then count only the newest of them.
    exact: bool
