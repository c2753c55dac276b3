"""The `threads` view: each thread's head, progress, step in flight and state."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from uwf.engine.events import Envelope
from uwf.engine.projection import StructProjection
from uwf.engine.viewspec import ColumnValue
from uwf.threads.events import (
    ThreadAnswered,
    ThreadAsked,
    ThreadBlocked,
    ThreadEnded,
    ThreadStarted,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
    ThreadTimedOut,
)
from uwf.threads.rules import Phase, next_phase
from uwf.threads.terms import DONE_STATES


class InFlight(msgspec.Struct, frozen=True, rename="camel"):
    """A step whose agent is running (or whose process died before its deadline)."""

    step_id: str
    role: str
    edge_prompt: str
    agent: str
    deadline_ms: int
    started_at: str


class Asked(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """The head's question (`thread.asked`): who asked it, what, its answer's schema
    node and deadline; then its answer's node (`thread.answered`) or that its deadline
    passed (`thread.timed_out`). Kept until the head moves."""

    step_id: str
    role: str
    question: str
    answer_schema: str
    asked_at: str
    deadline_ms: int | None = None
    answer: str | None = None
    answered_at: str | None = None
    answered_by: str | None = None
    timed_out: bool = False


# A failure's message as the threads and runs views keep it: the one line a list shows
# (the steps view keeps the whole of it, with the agent's stderr).
FAILURE_MESSAGE_CHARS = 300


class LastFailure(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """Why the thread's last attempt failed: its step, role, reason, message (cut to
    FAILURE_MESSAGE_CHARS), when, and the agent's exit status when it exited."""

    step_id: str
    role: str
    reason: str
    message: str
    at: str
    exit_status: int | None = None


def _last_failure(data: ThreadStepFailed, at: str) -> LastFailure:
    message = data.message
    if len(message) > FAILURE_MESSAGE_CHARS:
        message = message[:FAILURE_MESSAGE_CHARS - 3] + "..."
    return LastFailure(data.step_id, data.role, data.reason, message, at, data.exit_status)


class ThreadState(msgspec.Struct, frozen=True, rename="camel"):
    thread: str
    workflow: str
    name: str
    start: str
    repo: str
    created_at: str
    updated_at: str
    head: str | None = None
    steps: int = 0
    last_role: str | None = None
    last_status: str | None = None
    # idle (no step in flight) | running (a step in flight) | blocked | ended | killed.
    # Logs of any age fold to these: `active` was idle and running together (version 3).
    state: str = "idle"
    in_flight: InFlight | None = None
    # Set by `thread.step_failed`, cleared by `thread.stepped`: the run is `failed`.
    last_failure: LastFailure | None = None
    blocked: str | None = None
    # The role `thread.blocked` named: the role with no agent, or the head's role whose
    # status has no edge. What `thread show` calls the blocked thread's currentRole.
    blocked_role: str | None = None
    fork_of: str | None = None
    failures: int = 0
    visits: dict[str, int] = {}  # steps taken per role: O(1) for agents that count visits
    asked: Asked | None = None  # the head's question, while the head is the step that asked

    @property
    def done(self) -> bool:
        return self.state in DONE_STATES

    @property
    def phase(self) -> Phase:
        """The thread as the transition table (uwf/threads/rules.py) sees it: its state
        and the step in flight (while it waits, the step whose question waits)."""
        if self.in_flight is not None:
            return self.state, self.in_flight.step_id
        if self.state == "waiting" and self.asked is not None:
            return self.state, self.asked.step_id
        return self.state, None


_replace = msgspec.structs.replace


class ThreadsProjection(StructProjection):
    name: ClassVar[str] = "threads"
    version: ClassVar[int] = 6  # 6: waiting, and the head's question
    event_types: ClassVar[frozenset[str]] = frozenset(
        t.type for t in (ThreadStarted, ThreadStepStarted, ThreadStepped, ThreadStepFailed,
                         ThreadBlocked, ThreadEnded, ThreadAsked, ThreadAnswered,
                         ThreadTimedOut)
    )
    state_type: ClassVar[type[msgspec.Struct]] = ThreadState
    # `thread list` reads open (not ended) threads in creation (key) order, one index
    # range however many threads ended; `--status`, `--workflow NAME` and `--workflow
    # HASH` are index ranges too. Counts per state are kept.
    columns: ClassVar[tuple[str, ...]] = ("state", "open", "repo", "name", "created_at",
                                          "workflow")
    types: ClassVar[tuple[str, ...]] = ("text", "int", "text", "text", "text", "text")
    indexes: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("open", "key"), ("state", "key"), ("repo", "key"), ("name", "key"),
        ("created_at", "key"), ("workflow", "key"))
    counted: ClassVar[tuple[str, ...]] = ("state",)

    def column_values(self, state: ThreadState) -> tuple[ColumnValue, ...]:
        return (state.state, 0 if state.done else 1, state.repo, state.name, state.created_at,
                state.workflow)

    def key(self, event: Envelope) -> str:
        return event.subject.removeprefix("thread/")

    def apply(self, state: ThreadState | None, event: Envelope) -> ThreadState | None:
        data = event.data
        if isinstance(data, ThreadStarted):
            return ThreadState(
                thread=self.key(event), workflow=data.workflow, name=data.name,
                start=data.start, repo=data.repo, created_at=event.ts, updated_at=event.ts,
                head=data.head, steps=data.steps, fork_of=data.fork_of, visits=data.visits,
            )
        if state is None:  # an event before its thread began: `log verify` reports it
            return None
        # The state and the step in flight come from the table; the rest from the event.
        moved, still = next_phase(state.phase, data)
        moved = moved or state.state
        flight = None if still is None else state.in_flight
        if isinstance(data, ThreadStepStarted):
            flight = InFlight(data.step_id, data.role, data.edge_prompt, data.agent,
                              data.deadline_ms, event.ts)
            return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                            blocked=None, blocked_role=None)
        if isinstance(data, ThreadStepped):
            visits = {**state.visits, data.role: state.visits.get(data.role, 0) + 1}
            return _replace(
                state, updated_at=event.ts, state=moved, head=data.head, steps=state.steps + 1,
                last_role=data.role, last_status=data.status, in_flight=flight,
                last_failure=None, visits=visits, asked=None,
            )
        if isinstance(data, ThreadAsked):
            question = Asked(data.step_id, data.role, data.question, data.answer_schema,
                             event.ts, data.deadline_ms)
            return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                            asked=question)
        if isinstance(data, ThreadAnswered | ThreadTimedOut):
            asked = state.asked
            if asked is None or asked.step_id != data.step_id:
                return _replace(state, updated_at=event.ts, state=moved)  # not its question
            if isinstance(data, ThreadAnswered):
                asked = _replace(asked, answer=data.answer, answered_at=event.ts,
                                 answered_by=data.by or None)
            else:
                asked = _replace(asked, timed_out=True)
            return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                            asked=asked)
        if isinstance(data, ThreadStepFailed):
            return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                            last_failure=_last_failure(data, event.ts),
                            failures=state.failures + 1)
        if isinstance(data, ThreadBlocked):
            return _replace(state, updated_at=event.ts, state=moved, in_flight=flight,
                            blocked=data.message, blocked_role=data.role)
        return _replace(state, updated_at=event.ts, state=moved, in_flight=flight)
