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

from uwf.cas.store import Cas
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome, Views
from uwf.errors import Rejected
from uwf.language.asking import read_ask
from uwf.store import Store
from uwf.threads.decide import answer, time_out
from uwf.threads.events import ThreadAsked
from uwf.threads.results import ThreadShown
from uwf.threads.service import describe, get_thread


def asked(cas: Cas, step_id: str, role: str, output: dict[str, Any], now: int
          ) -> ThreadAsked:
    """The question an accepted asking output records; its answer schema is put as a
    node first (node before the event that names it)."""
    ask = read_ask(output)
    due = None if ask.timeout_s is None else now + int(ask.timeout_s * 1000)
    return ThreadAsked(step_id, role, ask.question, cas.put_schema(ask.answer_schema), due)


def time_out_thread(store: Store, thread: str) -> None:
    """Record that the thread's question went unanswered past its deadline (judged at
    the writers' section's instant; nothing when it was answered meanwhile)."""
    def decide(views: Views, now: int) -> Outcome[None]:
        expired = time_out(get_thread(views, thread), now)
        return Outcome([] if expired is None else [NewEvent(f"thread/{thread}", expired)],
                       None)

    store.journal.write_at(decide)


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
