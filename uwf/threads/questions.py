"""A human in the loop: a role's question (`$ASK`), its answer, its deadline.

A step whose output asks (uwf/language/asking.py) is accepted and followed, in the
same write, by `thread.asked`: the thread is `waiting`, and no step, lease or agent
is held while it waits. `uwf thread answer` checks the answer against the question's
schema (the answer is stored as a node of that type), records `thread.answered`, and
the next step resumes the asking role (or takes its declared `$ASK` edge) with the
answer in its context. A question past its deadline is recorded as
`thread.timed_out` at the thread's next step, which takes the role's `$TIMEOUT`
edge, or blocks. docs/threads.md#a-human-in-the-loop.
"""

from __future__ import annotations

from typing import Any

import msgspec

from uwf.cas.store import Cas
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Journal, Outcome, Views
from uwf.engine.viewspec import Query
from uwf.errors import NotFound, Rejected
from uwf.language.moderator import NoTransition
from uwf.store import Store
from uwf.threads.decide import answer, time_out
from uwf.threads.events import ThreadBlocked, ThreadEnded
from uwf.threads.projection import ThreadState
from uwf.threads.results import ThreadShown
from uwf.threads.routing import last_step, next_decision
from uwf.threads.service import describe, get_thread

# The most waiting threads one sweep (`time_out_due`) reads, and times out, per call.
SWEEP_READ = 1000
SWEEP_BATCH = 100


def time_out_thread(journal: Journal, thread: str) -> None:
    """Record that the thread's question went unanswered past its deadline (judged at
    the writers' section's instant; nothing when it was answered meanwhile)."""
    def decide(views: Views, now: int) -> Outcome[None]:
        expired = time_out(get_thread(views, thread), now)
        return Outcome([] if expired is None else [NewEvent(f"thread/{thread}", expired)],
                       None)

    journal.write_at(decide)


def time_out_due(store: Store) -> list[str]:
    """Record `thread.timed_out` for the waiting threads whose question's deadline has
    passed (at the writers' section's instant), and what that leads to at once: a
    `$TIMEOUT` edge to `$END` ends the thread, a role with no `$TIMEOUT` edge blocks it
    (as its next step would); an edge to a role is run by whoever steps the thread next
    (a worker, once its queue entry is ready again). The threads timed out, at most
    SWEEP_BATCH a call. One counted read when no thread waits (the common case); the
    waiting threads are read outside the writers' section, which is entered only when
    one of them is past its deadline."""
    views = store.read()
    if not views.counts("threads", "state").get("waiting"):
        return []
    now = store.clock()
    if not any(time_out(state, now) is not None for state in _waiting(views)):
        return []

    def decide(views: Views, now: int) -> Outcome[list[str]]:
        rows = _waiting(views)
        events: list[NewEvent] = []
        timed: list[str] = []
        for state in rows:
            expired = time_out(state, now)
            if expired is None:
                continue
            subject = f"thread/{state.thread}"
            events += [NewEvent(subject, data)
                       for data in (expired, *_after_timeout(store.cas, state))]
            timed.append(state.thread)
            if len(timed) == SWEEP_BATCH:
                break
        return Outcome(events, timed)

    return store.journal.write_at(decide)


def _waiting(views: Views) -> list[ThreadState]:
    """The first SWEEP_READ waiting threads, oldest first."""
    rows: list[ThreadState] = views.query(Query(
        "threads", (("state", "=", "waiting"),), None, ("key",), SWEEP_READ))
    return rows


def _after_timeout(cas: Cas, state: ThreadState) -> list[EventData]:
    """What the moderator makes of a question timed out, decided now: the thread's end
    (`$TIMEOUT` leads to `$END`), its block (no `$TIMEOUT` edge), or nothing (a role
    runs next, at the thread's next step)."""
    assert state.asked is not None
    after = msgspec.structs.replace(state, state="idle", asked=msgspec.structs.replace(
        state.asked, timed_out=True))
    try:
        _, decision = next_decision(cas, after)
    except NoTransition as exc:
        role, _ = last_step(cas, after)
        return [ThreadBlocked("no-transition", exc.what, role, exc.status)]
    except NotFound:
        return []  # a missing node: the next step says so
    return [ThreadEnded("end")] if decision.ends else []


def answer_thread(store: Store, thread: str, value: Any, by: str = "") -> ThreadShown:
    """Answer the question a waiting thread asks: `value` is checked against the
    question's schema and stored as a node of it, then `thread.answered` recorded (once:
    a second answer, or one to a thread that does not wait, is refused)."""
    state = get_thread(store.read(), thread)
    answer(state, "", store.clock())  # refused now, before any node is written
    assert state.asked is not None
    schema, step_id = state.asked.answer_schema, state.asked.step_id
    problems = store.cas.problems(schema, value)
    if problems:
        raise Rejected(f"the answer does not match the question's schema: "
                       f"{'; '.join(problems)}", "see the schema with `uwf thread show "
                       f"{thread}` (question.answerSchema), and answer again")
    answer_hash = store.cas.put(schema, value)

    def decide(views: Views, now: int) -> Outcome[ThreadShown]:
        current = get_thread(views, thread)
        if current.asked is None or current.asked.step_id != step_id:
            raise Rejected(f"thread {thread} has moved on since its question was read",
                           f"see it with `uwf thread show {thread}`")
        event = answer(current, answer_hash, now, by)
        return Outcome([NewEvent(f"thread/{thread}", event)], then=lambda views: (
            describe(store.cas, get_thread(views, thread))))

    return store.journal.write_at(decide)
