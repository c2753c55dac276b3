"""A thread's attempts at its steps, as `thread show` and `run show` give them: why
the last one failed (from the `threads` view's row) and the last ATTEMPTS_SHOWN
attempts (one indexed read of the `steps` view), each with its outcome, duration
and, for a failure, its reason, exit status and the tail of its agent's stderr."""

from __future__ import annotations

from typing import TypeVar

from uwf.engine.clock import parse_instant
from uwf.engine.journal import Views
from uwf.engine.viewspec import Query
from uwf.payload import UNSET, UnsetType
from uwf.threads.projection import ThreadState
from uwf.threads.results import Attempt, StepFailure
from uwf.threads.steps import StepState, thread_steps

ATTEMPTS_SHOWN = 20
# The most refused StepNodes a step names as its `previousAttempts` (the latest).
PREVIOUS_ATTEMPTS_KEPT = 100
T = TypeVar("T")


def last_failure(state: ThreadState) -> StepFailure | None:
    """Why the thread's last attempt failed; None when it did not (or none ran)."""
    failure = state.last_failure
    if failure is None:
        return None
    return StepFailure(step_id=failure.step_id, role=failure.role, reason=failure.reason,
                       message=failure.message, at=failure.at,
                       exit_status=failure.exit_status)


def attempts(views: Views, thread: str, limit: int = ATTEMPTS_SHOWN) -> list[Attempt]:
    """The thread's last `limit` attempts, oldest first (step ids are ULIDs: the key
    order is the order they began in)."""
    rows: list[StepState] = views.query(Query("steps", thread_steps(thread), None,
                                              ("-key",), limit))
    return [_attempt(row) for row in reversed(rows)]


def previous_attempts(views: Views, state: ThreadState, role: str) -> list[str]:
    """The StepNodes refused for the thread's next step as `role` (its failed attempts
    since the head last moved that left one: `ThreadStepFailed.node`), oldest first, at
    most PREVIOUS_ATTEMPTS_KEPT: what its StepNode names as `previousAttempts`.

    `state` is the thread as `views` hold it: with no failure since its last step
    (`last_failure`, which every `thread.step_failed` sets and only `thread.stepped`
    clears) there is none to read."""
    if state.last_failure is None:
        return []
    thread = state.thread
    found: list[str] = []
    # Newest first, a page at a time: most often the step in flight and the step that
    # passed before it are all there is to read, however long the thread.
    page, offset = 4, 0
    while offset < 4 * PREVIOUS_ATTEMPTS_KEPT:
        rows: list[StepState] = views.query(Query("steps", thread_steps(thread), None,
                                                  ("-key",), page, offset))
        for row in rows:
            if row.outcome in ("stepped", "reused"):
                return found[::-1]  # the head moved: attempts before it were elsewhere
            if row.outcome == "failed" and row.role == role and row.node is not None:
                found.append(row.node)
                if len(found) == PREVIOUS_ATTEMPTS_KEPT:
                    return found[::-1]
        if len(rows) < page:
            break
        offset, page = offset + page, min(4 * page, 256)
    return found[::-1]


def telling(shown: list[Attempt]) -> bool:
    """Do the attempts say more than the steps do (one failed, or was reused)?"""
    return any(attempt.outcome in ("failed", "reused") for attempt in shown)


def _attempt(row: StepState) -> Attempt:
    return Attempt(step_id=row.step_id, role=row.role, agent=row.agent, outcome=row.outcome,
                   started_at=row.started_at, ended_at=row.ended_at,
                   duration_ms=_duration(row.started_at, row.ended_at),
                   head=_given(row.head), status=_given(row.status),
                   reused=_given(row.reused), reason=_given(row.reason),
                   message=_given(row.message), exit_status=_given(row.exit_status),
                   stderr=_given(row.stderr), node=_given(row.node))


def _given(value: T | None) -> T | UnsetType:
    return UNSET if value is None else value


def _duration(started: str | None, ended: str | None) -> int | None:
    if started is None or ended is None:
        return None
    return max(0, parse_instant(ended) - parse_instant(started))
