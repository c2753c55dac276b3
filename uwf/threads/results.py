"""What `uwf thread ...` and `uwf agent context` return: the payloads `--json` prints,
typed."""

from __future__ import annotations

from typing import Any, Literal

from uwf.payload import UNSET, Result, UnsetType

# How much history a context gives: a number of steps (0: none, only `steps` and
# `visits`), "all", or None for the default (UWF_HISTORY > config historyLimit >
# DEFAULT_HISTORY).
HistoryLimit = int | Literal["all"] | None


class ThreadSummary(Result):
    """The seed's StepOutput: a thread's workflow, id, head (its last StepNode, or the
    StartNode before the first step) and whether it is done."""

    workflow: str
    thread: str
    head: str
    done: bool


class Started(Result):
    """`thread start`: the Workflow hash the thread runs and its id; `source`, the repo
    file the workflow came from when one holds its name, and `storeVersion`, the
    name's registered version when the file's is another."""

    workflow: str
    thread: str
    source: str | UnsetType = UNSET
    store_version: str | UnsetType = UNSET


class StepInFlight(Result):
    """The step in flight: its role, the agent uwf resolved for it and when it started."""

    role: str
    agent: str
    started_at: str


class StepFailure(Result):
    """Why the last attempt failed (`lastFailure`): its step, role, reason and message
    (cut to 300 characters), when, and the agent's exit status (null when it did not
    exit: a timeout, a refused StepNode)."""

    step_id: str
    role: str
    reason: str
    message: str
    at: str
    exit_status: int | None


class Attempt(Result, kw_only=True):
    """One attempt at a step, oldest first (`attempts`): its role, the agent uwf chose
    (null for a step an incremental rerun took over), how it ended (`stepped`;
    `reused`: taken over from the StepNode `reused`, no agent ran; `failed`;
    `running`), when it started and ended and how long it took (ms), the StepNode it
    produced, and a failure's reason, message, exit status, the last lines of its
    agent's stderr (masked) and the StepNode refused (when the agent wrote one)."""

    step_id: str
    role: str
    agent: str | None
    outcome: str
    started_at: str | None
    ended_at: str | None
    duration_ms: int | None
    head: str | UnsetType = UNSET
    status: str | UnsetType = UNSET
    reused: str | UnsetType = UNSET
    reason: str | UnsetType = UNSET
    message: str | UnsetType = UNSET
    exit_status: int | UnsetType = UNSET
    stderr: str | UnsetType = UNSET
    node: str | UnsetType = UNSET  # a failed attempt's StepNode, refused and kept


class Question(Result, kw_only=True):
    """A role's question to a person (docs/threads.md#a-human-in-the-loop): the step
    and role that asked it, the question, the JSON Schema its answer must match, when it
    was asked and (when it has a deadline) is due; once answered, the answer, when and
    by whom; `timedOut` once its deadline passed unanswered."""

    step_id: str
    role: str
    question: str
    answer_schema: Any
    asked_at: str
    due_at: str | UnsetType = UNSET
    answer: Any | UnsetType = UNSET
    answered_at: str | UnsetType = UNSET
    answered_by: str | UnsetType = UNSET
    timed_out: bool | UnsetType = UNSET


class ThreadShown(ThreadSummary):
    """`thread show`, `step` and `kill`: the summary with the thread's `status` (the
    view's state) and `currentRole` (None when done, at `$END` or undecidable),
    `inFlight` while a step is in flight (status `running`), `lastFailure` while its
    last attempt is one that failed, and (`thread show`) its last attempts when one
    of them failed or was reused; `question` while its head is a step that asked one
    (status `waiting` until it is answered)."""

    status: str
    current_role: str | None
    in_flight: StepInFlight | UnsetType = UNSET
    question: Question | UnsetType = UNSET
    last_failure: StepFailure | UnsetType = UNSET
    attempts: list[Attempt] | UnsetType = UNSET


class ThreadRan(ThreadShown, kw_only=True):
    """`thread run`: where the thread stopped and how many steps this run took."""

    steps: int


class ThreadRow(Result, kw_only=True):
    """One row of `thread list`: `done` only in lists that may hold ended threads;
    `status` `missing` or `corrupt` (and `currentRole` null) when the head node cannot
    be read; `question` (its text) while the thread is waiting for an answer."""

    thread: str
    workflow: str
    head: str
    done: bool | UnsetType = UNSET
    status: str
    current_role: str | None
    in_flight: StepInFlight | UnsetType = UNSET
    question: str | UnsetType = UNSET


class LogRecord(Result):
    """One line of `thread log`: a step, numbered from 1, with its output."""

    step: int
    hash: str
    role: str
    status: str
    output: Any
    detail: str
    agent: str
    edge_prompt: str | UnsetType = UNSET
    started_at_ms: int | UnsetType = UNSET
    completed_at_ms: int | UnsetType = UNSET
    previous_attempts: list[str] | UnsetType = UNSET  # refused StepNodes before this one


class Forked(Result):
    """`thread fork`: the new thread, its head (the step forked at) and its origin."""

    workflow: str
    thread: str
    head: str
    fork_of: str


class HistoryStep(Result):
    """A step in an agent's context: its role, status, output, StepNode hash, agent
    and detail (a hash, never the node)."""

    role: str
    status: str
    output: Any
    step: str
    agent: str
    detail: str


class StepContext(Result):
    """`agent context`: everything an agent needs for one step. `role` is the role's
    definition with its `name` and `schema`; `history` the last steps, oldest first;
    `historyTruncated` says it holds fewer than `steps`; `question` the question the
    head asked, with its answer once answered (the step that resumes the asking role
    reads it here)."""

    thread: str
    workflow: str
    workflow_name: str
    role: dict[str, Any]
    prompt: str
    edge_prompt: str
    history: list[HistoryStep]
    head: str | None
    start: str
    step_id: str | None
    steps: int
    history_truncated: bool
    visits: dict[str, int]
    question: Question | UnsetType = UNSET
    # The StepNodes refused for this step so far, oldest first (the one this step
    # writes names them as `previousAttempts`); absent when none was.
    previous_attempts: list[str] | UnsetType = UNSET
