"""`rules.evolve` copies an entry once an event (a copy is the whole entry's fields: the
resident writer folds one for every call), and leaves the very entry the copies a field
group at a time left before (the reference below), for every status and kind, allowed
or forbidden, and the messaging events."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tests.unit.test_queue_rules import ADDED, LEASE, entry_in, envelope, event_of
from uwf.engine.events import Envelope, EventData
from uwf.queue import rules
from uwf.queue.events import (
    QueueCompleted,
    QueueDelivered,
    QueueDeliveryFailed,
    QueuePublished,
    QueueReceived,
    QueueReclaimed,
    QueueReleased,
    QueueRenewed,
    QueueReset,
    QueueStatusSet,
    QueueWaiting,
)
from uwf.queue.projection import Lease, QueueEntry
from uwf.queue.rules import KINDS
from uwf.queue.terms import STATUSES

_replace = msgspec.structs.replace
PARKED = STATUSES[3]


def reference(entry: QueueEntry | None, event: Envelope) -> QueueEntry | None:
    """evolve as it was written before one copy an event (a copy a field group)."""
    data: Any = event.data
    if entry is None or rules.kind_of(data) == "added":
        return rules.evolve(entry, event)
    entry = _replace(entry, status=rules.leads_to(entry.status, data), updated_at=event.ts,
                     events=entry.events + 1)
    if isinstance(data, QueuePublished):
        return _replace(entry, last_seq=max(entry.last_seq, data.seq))
    if isinstance(data, QueueDeliveryFailed):
        return _replace(entry, undelivered=sorted({*entry.undelivered, data.seq}))
    if isinstance(data, QueueDelivered):
        return _replace(entry, undelivered=[s for s in entry.undelivered if s not in data.seqs])
    if isinstance(data, QueueReceived):
        return _replace(entry, received_seq=max(entry.received_seq, data.seq))
    if rules.kind_of(data) == "leased":
        lease = Lease(data.lease_id, data.expires_at_ms, data.attempt, data.session)
        return _replace(entry, lease=lease, next_eligible_at_ms=None)
    if isinstance(data, QueueRenewed):
        live = entry.lease
        if live is None or live.id != data.lease_id:
            return entry
        return _replace(entry, lease=_replace(live, expires_at_ms=data.expires_at_ms))
    if isinstance(data, QueueCompleted | QueueReleased | QueueWaiting) and data.run is not None:
        entry = _replace(entry, run=data.run)
    entry = _replace(entry, lease=None, next_eligible_at_ms=None)
    if isinstance(data, QueueReleased | QueueReclaimed):
        entry = _replace(entry, attempts=data.attempts)
        if isinstance(data, QueueReleased) and not data.failed:
            return entry
        if data.parked:
            return _replace(entry, parked_reason=data.reason or "failed")
        return _replace(entry, next_eligible_at_ms=data.next_eligible_at_ms,
                        parked_reason=None)
    if isinstance(data, QueueReset):
        return _replace(entry, attempts=0, parked_reason=None)
    if isinstance(data, QueueStatusSet):
        return _replace(entry, parked_reason="set by an operator"
                        if data.status == PARKED else None)
    return entry


MESSAGES: list[EventData] = [QueuePublished(7, "t/events", {}), QueueDeliveryFailed(3, "down"),
                             QueueDelivered([2, 3]), QueueReceived(5, "t/events", {})]
CASES = [(status, event_of(kind, entry_in(status, 1))) for status in STATUSES
         for kind in KINDS if kind != "added"] + [
    ("leased", QueueRenewed("01KB00000000000000000000BB", 1)),  # not the live lease
    ("leased", QueueCompleted(LEASE, "01KB0000000000000000000RUN")),  # with its run
    *[("ready", data) for data in MESSAGES]]


def messaged(status: str) -> QueueEntry:
    return _replace(entry_in(status, 1), parked_reason="was", next_eligible_at_ms=5,
                    undelivered=[1, 2, 3], last_seq=9, received_seq=1)


@pytest.mark.parametrize(("status", "data"), CASES)
def test_evolve_folds_an_event_as_field_by_field_copies_did(status: str, data: EventData
                                                           ) -> None:
    entry = messaged(status)
    event = envelope(3, data)
    assert rules.evolve(entry, event) == reference(entry, event)


@pytest.mark.parametrize(("status", "data"), CASES)
def test_evolve_copies_the_entry_once_an_event(status: str, data: EventData,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    copies: list[object] = []

    def counted(struct: Any, **changes: Any) -> Any:
        if isinstance(struct, QueueEntry):
            copies.append(struct)
        return _replace(struct, **changes)

    monkeypatch.setattr(rules, "_replace", counted)
    rules.evolve(messaged(status), envelope(3, data))
    assert len(copies) == 1


def test_an_added_entry_is_made_not_copied() -> None:
    assert rules.evolve(None, envelope(2, event_of("added", ADDED))) is not None
