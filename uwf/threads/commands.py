"""The arguments of `uwf thread ...` and `uwf agent ...`, and the operations every
surface calls.

Cheap to import (msgspec and the argument base only): the services load when an
operation runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from uwf.config.args import Args, Count, NonNegative, Seconds, arg
from uwf.config.limits import DEFAULT_HISTORY, DEFAULT_MAX_STEPS
from uwf.ids import ULID_PREFIX_PATTERN
from uwf.threads.terms import StatusFilter

if TYPE_CHECKING:
    from uwf.store import Store
    from uwf.threads.results import (
        Forked,
        Started,
        StepContext,
        ThreadRan,
        ThreadRow,
        ThreadShown,
    )

HistoryArg = Annotated[str, msgspec.Meta(pattern=r"^([0-9]+|all)$")]  # a count, or all
ThreadId = Annotated[str, msgspec.Meta(pattern=ULID_PREFIX_PATTERN),
                     arg("thread id (a ULID, in any case, or its first characters)",
                         positional=True, metavar="THREAD", ids="threads",
                         expect="a thread id (a ULID: 26 Crockford Base32 characters, or "
                                "the first of them, as `uwf thread list --all` prints them)")]
Agent = Annotated[str | None, arg("agent name from config.yaml, or a command line "
                                  "(overrides agentOverrides and defaultAgent)")]
Timeout = Annotated[Seconds, arg("seconds the agent may run before its process group is "
                                 "killed (default 3600, at most 31,536,000: a year)")]


class ThreadStart(Args, frozen=True, kw_only=True):
    workflow: Annotated[str, arg("workflow name or hash, or a workflow file (.yaml, .yml, "
                                 ".json, or a path with a folder) to register first; a "
                                 "name is also looked for in .workflows/ and .workflow/ "
                                 "folders, here and up to the repo's top",
                                 positional=True, metavar="WORKFLOW")]
    prompt: Annotated[str, arg("the task: the thread's user prompt", short="-p")]
    repo: Annotated[str | None, arg("repo the thread belongs to (default: git top level of "
                                    "the working directory)")] = None


class ThreadStep(Args, frozen=True, kw_only=True):
    thread: ThreadId
    agent: Agent = None
    timeout: Timeout = 3600.0


class ThreadRun(ThreadStep, frozen=True, kw_only=True):
    max_steps: Annotated[Count, arg(f"stop after this many steps (default {DEFAULT_MAX_STEPS}: "
                                    "a loop that never approves stops too)")] = DEFAULT_MAX_STEPS


class ThreadRef(Args, frozen=True, kw_only=True):
    thread: ThreadId


class ThreadList(Args, frozen=True, kw_only=True):
    all: Annotated[bool, arg("include ended threads")] = False
    workflow: Annotated[str | None, arg("only threads of this workflow: a registered name "
                                        "(any version) or a Workflow hash",
                                        metavar="NAME|HASH")] = None
    status: Annotated[list[StatusFilter] | None, arg(
        "only threads in this state: idle, running (a step in flight), active (idle or "
        "running), waiting (for an answer), blocked, ended or killed; repeat for several "
        "(ended or killed lists ended threads without --all)", metavar="STATUS")] = None
    waiting: Annotated[bool, arg("only threads waiting for an answer (--status "
                                 "waiting), with their question")] = False
    limit: Annotated[NonNegative | None, arg("at most N threads (default: all)",
                                             metavar="N")] = None
    offset: Annotated[NonNegative, arg("skip the first N threads", metavar="N")] = 0


class ThreadAnswer(Args, frozen=True, kw_only=True):
    thread: ThreadId
    answer: Annotated[str | None, arg("the answer: JSON matching the question's "
                                      "answerSchema (`--json` is the output flag)",
                                      metavar="JSON")] = None
    file: Annotated[str | None, arg("read the answer's JSON from this file, or - for "
                                    "stdin", metavar="FILE")] = None
    by: Annotated[str | None, arg("who answers, recorded in the event",
                                  metavar="NAME")] = None


class ThreadKill(Args, frozen=True, kw_only=True):
    thread: ThreadId
    reason: Annotated[str | None, arg("why, recorded in the event")] = None


class ThreadFork(Args, frozen=True, kw_only=True):
    thread: ThreadId
    at: Annotated[str, arg("StepNode hash in the thread's chain", metavar="STEP_HASH",
                           ids="hash")]


class AgentContext(Args, frozen=True, kw_only=True):
    thread: ThreadId
    role: Annotated[str, arg("the role to play", positional=True, metavar="ROLE")]
    history: Annotated[HistoryArg | None, arg(
        f"only the last N steps of history (default {DEFAULT_HISTORY}, or UWF_HISTORY, or the "
        "config's historyLimit; 0: none; all: every step)", metavar="N|all")] = None


class AgentSubmit(Args, frozen=True, kw_only=True):
    thread: ThreadId
    role: Annotated[str, arg("the role played", positional=True, metavar="ROLE")]
    output: Annotated[str, arg("output JSON file, or - for stdin")]
    detail: Annotated[str | None, arg("detail text file (transcript, notes), or - for "
                                      "stdin")] = None
    agent: Annotated[str | None, arg("agent name recorded in the StepNode (default "
                                     "manual)")] = None


def start(args: ThreadStart, store: Store) -> Started:
    """Create a thread of a workflow; a workflow file is registered first."""
    from uwf.threads.service import start_thread

    return start_thread(store, args.workflow, args.prompt, args.repo, settings=store.settings)


def step(args: ThreadStep, store: Store) -> ThreadShown:
    """Run one step of the thread; where it is after it."""
    from uwf.threads.service import with_status
    from uwf.threads.stepping import step_thread

    return with_status(store, step_thread(store, args.thread, args.agent, args.timeout,
                                           settings=store.settings))


def run(args: ThreadRun, store: Store) -> ThreadRan:
    """Step the thread until it is done, or `max_steps` steps were taken."""
    from uwf.threads.stepping import run_thread

    return run_thread(store, args.thread, agent=args.agent, timeout=args.timeout,
                      max_steps=args.max_steps, settings=store.settings)


def show(args: ThreadRef, store: Store) -> ThreadShown:
    """A thread's workflow, head, status and current role."""
    from uwf.threads.service import show_thread

    return show_thread(store, args.thread)


def list_all(args: ThreadList, store: Store) -> list[ThreadRow]:
    """Threads oldest first, by the arguments' filters and page."""
    from uwf.threads.service import list_threads

    statuses = [*(args.status or ()), *(["waiting"] if args.waiting else [])]
    return list_threads(store, args.all, args.limit, args.offset, workflow=args.workflow,
                        statuses=statuses)


def kill(args: ThreadKill, store: Store) -> ThreadShown:
    """End a thread now; its history stays."""
    from uwf.threads.service import kill_thread

    return kill_thread(store.journal, args.thread, args.reason or "")


def answer(args: ThreadAnswer, store: Store, value: Any) -> ThreadShown:
    """Answer the question a waiting thread asks (`value`, checked against its schema);
    the thread's next step resumes the asking role with it."""
    from uwf.threads.questions import answer_thread

    return answer_thread(store, args.thread, value, args.by or "")


def fork(args: ThreadFork, store: Store) -> Forked:
    """A new thread whose head is an earlier step of this one."""
    from uwf.threads.service import fork_thread

    return fork_thread(store, args.thread, args.at)


def history_limit(args: AgentContext) -> int | Literal["all"] | None:
    if args.history is None:
        return None
    return "all" if args.history == "all" else int(args.history)


def context(args: AgentContext, store: Store) -> StepContext:
    """What an agent needs for a step of the thread as the role."""
    from uwf.threads.agent import agent_context

    return agent_context(store, args.thread, args.role, history_limit(args),
                         settings=store.settings)
