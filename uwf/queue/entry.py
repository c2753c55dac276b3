"""A queue entry's whole state (SPEC §8): what `uwf.queue.rules.evolve` folds, what the
`queue` view stores, what `log verify` follows and what the deciders read.

Its status, its live lease (id, expiry, attempt, session), its failed attempts, the
end of its backoff and why it parked, the run its holder worked on, and what its
`queue.added` said (repo, priority, workflow or run, session, agent, limits, key, its
MQTT broker); its messaging counters. Pure: no store, no clock, no I/O.
"""

from __future__ import annotations

import msgspec

from uwf.queue.events import BrokerRef
from uwf.queue.terms import STATUSES

_, _, DRAINED, _, CANCELLED, _ = STATUSES
TERMINAL = (DRAINED, CANCELLED)
DEFAULT_TIMEOUT_SEC = 3600
DEFAULT_IDLE_TIMEOUT_SEC = 120


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
