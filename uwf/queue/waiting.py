"""Entries whose run waits for an answer (docs/queue.md#waiting).

A worker whose run asks a question (`thread.asked`) gives the lease back as
`queue.waiting`: no attempt failed, nothing is held while a person thinks. Once the
run is answered (or its question's deadline passed), `resume_answered` makes the
entry ready again (`queue.resumed`), and the next lease continues the run. `thread
answer` calls it once the answer is recorded (whatever surface answers), and `settle`
(a worker before it leases, `sched reclaim`) after timing out the questions past
their deadline; the transitions are the queue's table's (`uwf/queue/rules.py`).
"""

from __future__ import annotations

from uwf.engine.events import NewEvent
from uwf.engine.journal import Journal, Outcome, Views
from uwf.engine.viewspec import Query
from uwf.queue import decide as decider
from uwf.queue.projection import QUEUE_ORDER, QueueEntry
from uwf.queue.results import EntryRecord
from uwf.queue.service import get_entry, record
from uwf.store import Store
from uwf.threads.decide import time_out
from uwf.threads.projection import ThreadState
from uwf.threads.questions import time_out_due

# The most waiting entries one call looks at (the oldest first): the rest wait for the
# next call, so a lease never reads an unbounded list.
RESUME_BATCH = 100


def wait(journal: Journal, entry_id: str, lease_id: str, run: str, question: str) -> EntryRecord:
    """Give the live lease back because run `run` waits for an answer to `question`."""
    def decide(views: Views, now: int) -> Outcome[EntryRecord]:
        data = decider.wait(get_entry(views, entry_id), lease_id, now, run, question)
        return Outcome([NewEvent(f"queue/{entry_id}", data)],
                       then=lambda views: record(get_entry(views, entry_id)))

    return journal.write_at(decide)


def why_resume(thread: ThreadState | None, now: int) -> str | None:
    """Why a waiting entry whose run is `thread` may go on at `now` (None: it waits)."""
    if thread is None:
        return "its run is gone"
    if thread.state != "waiting":
        return "answered" if thread.asked is not None and thread.asked.answer else (
            f"its run is {thread.state}")
    if time_out(thread, now) is not None:
        return "its question's deadline passed"
    return None


def resume_answered(store: Store) -> list[str]:
    """Make ready again every waiting entry whose run no longer waits (answered, killed,
    or past its question's deadline); the ids resumed. Nothing is written when none is
    (the common case costs one counted read)."""
    if not store.read().counts("queue", "status").get("waiting"):
        return []

    def decide(views: Views, now: int) -> Outcome[list[str]]:
        waiting: list[QueueEntry] = views.query(Query(
            "queue", (("status", "=", "waiting"),), order=QUEUE_ORDER, limit=RESUME_BATCH))
        events = []
        for entry in waiting:
            thread = None if entry.run is None else views.get("threads", entry.run)
            reason = why_resume(thread, now)
            if reason is not None:
                events.append(NewEvent(f"queue/{entry.id}", decider.resume(entry, reason)))
        return Outcome(events, [event.subject.removeprefix("queue/") for event in events])

    return store.journal.write_at(decide)


def settle(store: Store) -> list[str]:
    """What time makes due, done now rather than when someone looks: questions past
    their deadline timed out (`thread.timed_out`, and their `$TIMEOUT` edge's end or
    block: `time_out_due`), then every waiting entry whose run no longer waits made
    ready; the entries resumed. The worker's loop and `sched reclaim` call it; two
    counted reads when nothing waits."""
    time_out_due(store)
    return resume_answered(store)
