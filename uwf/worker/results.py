"""What `uwf worker` prints: one line per entry it ran, typed."""

from __future__ import annotations

from typing import Literal

from uwf.payload import UNSET, Result, UnsetType

# completed (drained), failed (ready again after its backoff), parked (failed at
# maxAttempts), released (the worker stopped; ready again, no attempt counted) or lost
# (the lease was taken away).
# waiting: its run asked a question; the entry waits (no attempt failed) until answered.
Outcome = Literal["completed", "failed", "parked", "released", "lost", "waiting"]


class EntryDone(Result):
    """One leased entry's end: its id, its run, the outcome and the attempt; why when
    it did not complete; why the archive could not be synced after it; the anchor
    written after it, or why none could be; why its status could not be published
    to its MQTT broker."""

    id: str
    run: str | None
    outcome: Outcome
    attempt: int
    reason: str | UnsetType = UNSET
    archive_error: str | UnsetType = UNSET
    anchor: str | UnsetType = UNSET
    anchor_error: str | UnsetType = UNSET
    publish_error: str | UnsetType = UNSET
