"""A thread's whole state (SPEC §6): what `uwf.threads.rules.evolve` folds, what the
`threads` view stores (and the `runs` view holds inside each run's record), what `log
verify` follows and what the deciders read.

Its head and progress, its state in the transition table, the step in flight (with its
deadline), its last failure, why it blocked, the head's question (with its deadline),
and what its `thread.started` said. Pure: no store, no clock, no I/O.
"""

from __future__ import annotations

import msgspec

from uwf.threads.terms import DONE_STATES

# A thread as the transition table sees it: (its state, the id of the step in flight;
# while it waits, the step whose question waits). A plain tuple: the folds build one
# per event.
Phase = tuple[str | None, str | None]


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


class ThreadState(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
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
