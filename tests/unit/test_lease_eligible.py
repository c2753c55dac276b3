"""A lease of N reads the ready entries in queue order only until N are found out of
their backoff (`sched._eligible`): the rest of the page it asked for is not looked at."""

from __future__ import annotations

import pytest

from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome, Views
from uwf.queue import sched
from uwf.queue.events import QueueAdded
from uwf.queue.rules import out_of_backoff as judged
from uwf.store import Store


def test_a_lease_of_one_looks_at_the_first_eligible_entry_only(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [f"01KB00000000000000000000{n:02d}" for n in range(1, 6)]

    def add(views: Views) -> Outcome[None]:
        return Outcome([NewEvent(f"queue/{entry}", QueueAdded(repo="/r", priority=100))
                        for entry in ids])

    store.journal.write(add)
    looked: list[int | None] = []

    def counted(eligible_at: int | None, now: int) -> bool:
        looked.append(eligible_at)
        return judged(eligible_at, now)

    monkeypatch.setattr(sched, "out_of_backoff", counted)
    views = store.read()
    (first,) = sched._eligible(views, 0, 1)
    assert first.id == ids[0]
    assert len(looked) == 1
    looked.clear()
    assert [entry.id for entry in sched._eligible(views, 0, 2)] == ids[:2]
    assert len(looked) == 2
    assert [entry.id for entry in sched._eligible(views, 0, None)] == ids  # every one
