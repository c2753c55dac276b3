"""The threads feature's events: start, step (started, stepped, failed), block, end; a
role's question to a person (asked), its answer and its deadline passing."""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from uwf.engine.events import EventData

INPUTS_DIGEST_CHARS = 1000
# What a failed step keeps of its agent's stderr: its last lines, at most this many
# lines and bytes (UTF-8).
STDERR_TAIL_LINES = 20
STDERR_TAIL_BYTES = 4096


class ThreadStarted(EventData, frozen=True):
    """A thread exists: its workflow, StartNode and repo (and, for a fork, its origin)."""

    type: ClassVar[str] = "thread.started"
    refs: ClassVar[tuple[str, ...]] = ("workflow", "start", "head")
    workflow: str
    name: str
    start: str
    repo: str
    head: str | None = None
    fork_of: str | None = None
    steps: int = 0
    visits: dict[str, int] = {}  # noqa: RUF012  (msgspec copies mutable defaults)
    # The prompt's first INPUTS_DIGEST_CHARS characters: what the run index searches
    # and titles runs by (the whole prompt is in the StartNode).
    inputs_digest: str = ""


class ThreadStepStarted(EventData, frozen=True):
    """The moderator chose a role and an agent is about to run; recorded first, so a
    concurrent step of the same thread is refused."""

    type: ClassVar[str] = "thread.step_started"
    step_id: str
    role: str
    edge_prompt: str
    agent: str
    deadline_ms: int
    takes_over: str | None = None


class Usage(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True,
            rename="camel"):
    """What one step's agent reported it spent (docs/agents.md#usage): token counts and
    a cost in whatever unit the agent uses. Each field is optional; an agent that knows
    only its tokens leaves `cost` out."""

    input_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    output_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    cost: Annotated[float, msgspec.Meta(ge=0)] | None = None


class ThreadStepped(EventData, frozen=True, omit_defaults=True):
    """The agent's StepNode passed every check: the head moves to it."""

    type: ClassVar[str] = "thread.stepped"
    refs: ClassVar[tuple[str, ...]] = ("head", "output", "reused")
    step_id: str
    head: str
    role: str
    status: str
    output: str
    # An incremental rerun took this step over (absent otherwise): the original StepNode
    # whose output (and detail) the new StepNode points at. No agent ran.
    reused: str | None = None
    # What the agent reported it spent, read from the StepNode's detail when the step
    # was accepted (absent when it reported nothing, and in events written before
    # usage was kept): the runs view sums it without reading a node.
    usage: Usage | None = None


class ThreadStepFailed(EventData, frozen=True, omit_defaults=True):
    """A step ended without moving the head: the reason, and what the agent left."""

    type: ClassVar[str] = "thread.step_failed"
    refs: ClassVar[tuple[str, ...]] = ("node",)
    step_id: str
    role: str
    reason: str
    message: str
    # The agent's exit status, when its process ran and exited (absent otherwise, and
    # in events written before it was kept).
    exit_status: int | None = None
    # The last lines of what the agent wrote on stderr, masked, at most
    # STDERR_TAIL_LINES lines and STDERR_TAIL_BYTES bytes (absent when it wrote none).
    stderr: str | None = None
    # The StepNode the agent wrote for this step (its start and prev are the step's) and
    # the checks refused: kept, and named by the StepNode that finally passes as one of
    # its `previousAttempts` (absent when the agent gave none, and before it was kept).
    node: str | None = None


class ThreadBlocked(EventData, frozen=True):
    """The thread cannot go on until something changes (no transition, no agent)."""

    type: ClassVar[str] = "thread.blocked"
    reason: str
    message: str
    role: str | None = None
    status: str | None = None


class ThreadEnded(EventData, frozen=True):
    """The thread is over: reached `$END` (reason "end") or was killed ("killed")."""

    type: ClassVar[str] = "thread.ended"
    reason: str
    note: str = ""


class ThreadAsked(EventData, frozen=True, omit_defaults=True):
    """The step just accepted (`step_id`, its StepNode the head) asks a person: the
    thread waits for an answer to `question` of the schema node `answer_schema`, until
    `deadline_ms` when one was asked for (docs/threads.md#a-human-in-the-loop)."""

    type: ClassVar[str] = "thread.asked"
    refs: ClassVar[tuple[str, ...]] = ("answer_schema",)
    step_id: str
    role: str
    question: str
    answer_schema: str
    deadline_ms: int | None = None


class ThreadAnswered(EventData, frozen=True, omit_defaults=True):
    """The question of step `step_id` is answered: `answer` is the answer's node (of the
    question's answer schema); `by` says who, when told."""

    type: ClassVar[str] = "thread.answered"
    refs: ClassVar[tuple[str, ...]] = ("answer",)
    step_id: str
    answer: str
    by: str = ""


class ThreadTimedOut(EventData, frozen=True):
    """No answer came before the question's deadline: the thread goes on by the asking
    role's `$TIMEOUT` edge (or blocks, when it declares none)."""

    type: ClassVar[str] = "thread.timed_out"
    step_id: str
    deadline_ms: int


THREAD_EVENTS: tuple[type[EventData], ...] = (
    ThreadStarted, ThreadStepStarted, ThreadStepped, ThreadStepFailed, ThreadBlocked, ThreadEnded,
    ThreadAsked, ThreadAnswered, ThreadTimedOut,
)
