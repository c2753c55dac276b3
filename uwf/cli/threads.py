"""Declarations of `uwf thread ...` and `uwf agent ...`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec

from uwf.cli.common import parse_json, read_input
from uwf.cli.context import Context
from uwf.cli.spec import Command
from uwf.config.args import Args, Count, NonNegative, Seconds, arg
from uwf.config.limits import DEFAULT_HISTORY, DEFAULT_MAX_STEPS
from uwf.ids import ULID_PATTERN
from uwf.threads.terms import StatusFilter as Status

HistoryArg = Annotated[str, msgspec.Meta(pattern=r"^([0-9]+|all)$")]  # a count, or all
ThreadId = Annotated[str, msgspec.Meta(pattern=ULID_PATTERN),
                     arg("thread id (a ULID)", positional=True, metavar="THREAD",
                         expect="a thread id (a ULID: 26 upper-case Crockford Base32 "
                                "characters, as `uwf thread list --all` prints them)")]
Agent = Annotated[str | None, arg("agent name from config.yaml, or a command line "
                                  "(overrides agentOverrides and defaultAgent)")]
Timeout = Annotated[Seconds, arg("seconds the agent may run before its process group is "
                                 "killed (default 3600, at most 31,536,000: a year)")]


class ThreadStart(Args, frozen=True, kw_only=True):
    workflow: Annotated[str, arg("workflow name or hash, or a workflow file (.yaml, .yml, "
                                 ".json, or a path with a folder) to register first; a "
                                 "name is also looked for in the repo's .workflow/ and "
                                 ".workflows/ folders",
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
    status: Annotated[list[Status] | None, arg(
        "only threads in this state: idle, running (a step in flight), active (idle or "
        "running), blocked, ended or killed; repeat for several (ended or killed lists "
        "ended threads without --all)", metavar="STATUS")] = None
    limit: Annotated[NonNegative | None, arg("at most N threads (default: all)",
                                             metavar="N")] = None
    offset: Annotated[NonNegative, arg("skip the first N threads", metavar="N")] = 0


class ThreadKill(Args, frozen=True, kw_only=True):
    thread: ThreadId
    reason: Annotated[str | None, arg("why, recorded in the event")] = None


class ThreadFork(Args, frozen=True, kw_only=True):
    thread: ThreadId
    at: Annotated[str, arg("StepNode hash in the thread's chain", metavar="STEP_HASH")]


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


def _start(args: ThreadStart, ctx: Context) -> Any:
    from uwf.threads.service import start_thread

    return start_thread(ctx.store, args.workflow, args.prompt, args.repo)


def _step(args: ThreadStep, ctx: Context) -> Any:
    from uwf.threads.service import with_status
    from uwf.threads.stepping import step_thread

    return with_status(ctx.store, step_thread(ctx.store, args.thread, args.agent,
                                              args.timeout))


def _run(args: ThreadRun, ctx: Context) -> Any:
    from uwf.threads.service import with_status
    from uwf.threads.stepping import run_thread

    return with_status(ctx.store, run_thread(ctx.store, args.thread, agent=args.agent,
                                             timeout=args.timeout, max_steps=args.max_steps))


def _show(args: ThreadRef, ctx: Context) -> Any:
    from uwf.threads.service import show_thread

    return show_thread(ctx.store, args.thread)


def _list(args: ThreadList, ctx: Context) -> Any:
    import sys

    from uwf.threads.service import damage_line, list_threads

    rows = list_threads(ctx.store, args.all, args.limit, args.offset,
                        workflow=args.workflow, statuses=args.status or ())
    if (line := damage_line(rows)) is not None:  # the list still prints; exit 1
        sys.stderr.write(f"uwf: error: {line}\n")
    return rows


def _damaged(rows: Any) -> bool:
    from uwf.threads.service import HEAD_DAMAGE

    return any(row.get("status") in HEAD_DAMAGE for row in rows)


def _kill(args: ThreadKill, ctx: Context) -> Any:
    from uwf.threads.service import kill_thread

    return kill_thread(ctx.store, args.thread, args.reason or "")


def _log(args: ThreadRef, ctx: Context) -> Iterator[str]:
    from uwf.threads.service import iter_log

    for record in iter_log(ctx.store, args.thread):
        yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _fork(args: ThreadFork, ctx: Context) -> Any:
    from uwf.threads.service import fork_thread

    return fork_thread(ctx.store, args.thread, args.at)


def _context(args: AgentContext, ctx: Context) -> Any:
    from uwf.threads.agent import HistoryLimit, agent_context

    limit: HistoryLimit = None
    if args.history is not None:
        limit = "all" if args.history == "all" else int(args.history)
    return agent_context(ctx.store, args.thread, args.role, limit)


def _submit(args: AgentSubmit, ctx: Context) -> Any:
    from uwf.threads.agent import submit_step
    output = parse_json(read_input(args.output), "--output")
    detail = read_input(args.detail) if args.detail else None
    return submit_step(ctx.store, args.thread, args.role, output, detail,
                       agent=args.agent or "manual")


THREAD_COMMANDS: list[Command[Any]] = [
    Command(("thread", "start"), "Create a thread of a workflow (no step runs); a workflow "
            "file is registered first.",
            'uwf thread start solve-issue -p "Fix the login bug in #42"', ThreadStart, _start),
    Command(("thread", "step"), "Run one step: the moderator picks a role, its agent runs, "
            "and the head moves to the agent's StepNode if it passes every check.",
            "uwf thread step 01J7K9M2XNPQR5VWBCDF8G3H4T", ThreadStep, _step),
    Command(("thread", "run"), "Step the thread until it is done.",
            "uwf thread run 01J7K9M2XNPQR5VWBCDF8G3H4T --max-steps 20", ThreadRun, _run),
    Command(("thread", "show"), "Show a thread's workflow, head, status and current role.",
            "uwf thread show 01J7K9M2XNPQR5VWBCDF8G3H4T", ThreadRef, _show),
    Command(("thread", "list"), "List threads that have not ended (all with --all, or by "
            "--status and --workflow), oldest first.",
            "uwf thread list --status blocked --workflow solve-issue --limit 20", ThreadList,
            _list, fails=_damaged),
    Command(("thread", "kill"), "End a thread now; its history stays.",
            'uwf thread kill 01J7K9M2XNPQR5VWBCDF8G3H4T --reason "superseded"', ThreadKill,
            _kill),
    Command(("thread", "log"), "Print the thread's steps oldest first, one JSON line each.",
            "uwf thread log 01J7K9M2XNPQR5VWBCDF8G3H4T", ThreadRef, _log, streams=True),
    Command(("thread", "fork"), "Start a new thread whose head is an earlier step of this one.",
            "uwf thread fork 01J7K9M2XNPQR5VWBCDF8G3H4T --at 8FWKR3TN5V1QA", ThreadFork, _fork),
    Command(("agent", "context"), "Print what an agent needs for a step: role, schema, "
            "prompts, history.", "uwf agent context 01J7K9M2XNPQR5VWBCDF8G3H4T planner",
            AgentContext, _context),
    Command(("agent", "submit"), "Validate an output, write output, detail and StepNode "
            "nodes, and print the StepNode hash (the head does not move).",
            "uwf agent submit 01J7K9M2XNPQR5VWBCDF8G3H4T planner --output out.json",
            AgentSubmit, _submit, plain=True),
]
