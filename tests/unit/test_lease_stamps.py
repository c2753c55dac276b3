"""A lease's result spells its instant (`now`) with the journal's `Stamps` (the second
spelled once for many: `format_ts`'s very text), in-process and as the resident writer
decides it (`ops.OPS`); the writer spells the leases' expiries with stamps of their own."""

from __future__ import annotations

import pytest

from uwf.engine.clock import format_ts, parse_instant
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome, Views
from uwf.queue import sched
from uwf.queue.events import QueueAdded
from uwf.store import Store
from uwf.writer.ops import OPS, LeaseArgs, Spelling

ENTRY = "01KB0000000000000000000001"


def spied(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """An entry to lease, and the instants the journal's stamps spell from now on."""
    def add(views: Views) -> Outcome[None]:
        return Outcome([NewEvent(f"queue/{ENTRY}", QueueAdded(repo="/r", priority=100))])

    store.journal.write(add)
    spelled: list[int] = []
    real = store.journal.stamps

    def spy(ms: int) -> str:
        spelled.append(ms)
        return real(ms)

    monkeypatch.setattr(store.journal, "stamps", spy)
    return spelled


def test_an_in_process_lease_spells_its_instant_with_the_journals_stamps(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    spelled = spied(store, monkeypatch)
    leased = sched.lease(store, 1)
    assert spelled.count(parse_instant(leased.now)) == 2  # its event's ts, and its own


def test_the_writers_lease_spells_with_the_stamps_it_is_given(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    spelled = spied(store, monkeypatch)
    expiries: list[int] = []

    def expiry(ms: int) -> str:
        expiries.append(ms)
        return format_ts(ms)

    spelling = Spelling(store.journal.stamps, expiry)
    leased = store.journal.write_at(OPS["queue.lease"].decision(LeaseArgs(limit=1), spelling))
    assert parse_instant(leased.now) in spelled
    assert expiries == [parse_instant(leased.leases[0].lease_expires_at)]
    spelled.clear()
    Spelling.of(store.journal).now(0)  # the writer's: the journal's stamps for the instant
    assert spelled == [0]
