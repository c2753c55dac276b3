"""Declarations of `uwf thread ...` and `uwf agent ...`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

from uwf.cli.common import open_store, read_input
from uwf.cli.spec import Command, arg

_store = open_store


def _start(args: argparse.Namespace) -> Any:
    from uwf.api.threads import start_thread

    return start_thread(_store(args), args.workflow, args.prompt, args.repo)


def _step(args: argparse.Namespace) -> Any:
    from uwf.api.stepping import step_thread

    return step_thread(_store(args), args.thread, args.agent, args.timeout)


def _run(args: argparse.Namespace) -> Any:
    from uwf.api.stepping import run_thread

    return run_thread(_store(args), args.thread, agent=args.agent, timeout=args.timeout,
                      max_steps=args.max_steps)


def _show(args: argparse.Namespace) -> Any:
    from uwf.api.threads import show_thread

    return show_thread(_store(args), args.thread)


def _list(args: argparse.Namespace) -> Any:
    from uwf.api.threads import list_threads

    return list_threads(_store(args), args.all)


def _kill(args: argparse.Namespace) -> Any:
    from uwf.api.threads import kill_thread

    return kill_thread(_store(args), args.thread, args.reason or "")


def _log(args: argparse.Namespace) -> Iterator[str]:
    from uwf.api.threads import iter_log

    for record in iter_log(_store(args), args.thread):
        yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _fork(args: argparse.Namespace) -> Any:
    from uwf.api.threads import fork_thread

    return fork_thread(_store(args), args.thread, args.at)


def _context(args: argparse.Namespace) -> Any:
    from uwf.api.agents import agent_context

    return agent_context(_store(args), args.thread, args.role, args.history)


def _submit(args: argparse.Namespace) -> Any:
    from uwf.api.agents import submit_step
    from uwf.errors import UsageError

    text = read_input(args.output)
    try:
        output = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--output is not JSON: {exc}", "give the output as JSON") from None
    detail = read_input(args.detail) if args.detail else None
    return submit_step(_store(args), args.thread, args.role, output, detail,
                       agent=args.agent or "manual")


def _timeout(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {text}")
    return value


_THREAD = arg("thread", help="thread id (a ULID)", metavar="THREAD")
_AGENT = arg("--agent", help="agent name from config.yaml, or a command line "
             "(overrides agentOverrides and defaultAgent)")
_TIMEOUT = arg("--timeout", help="seconds the agent may run before its process group is "
               "killed (default 3600)", type=_timeout, default=3600.0)

THREAD_COMMANDS = [
    Command(("thread", "start"), "Create a thread of a workflow (no step runs).",
            'uwf thread start solve-issue -p "Fix the login bug in #42"', _start,
            (arg("workflow", help="workflow name or hash", metavar="WORKFLOW"),
             arg("-p", "--prompt", help="the task: the thread's user prompt", required=True),
             arg("--repo", help="repo the thread belongs to (default: git top level of the "
                 "working directory)"))),
    Command(("thread", "step"), "Run one step: the moderator picks a role, its agent runs, "
            "and the head moves to the agent's StepNode if it passes every check.",
            "uwf thread step 01J7K9M2XNPQR5VWBCDF8G3H4T", _step, (_THREAD, _AGENT, _TIMEOUT)),
    Command(("thread", "run"), "Step the thread until it is done.",
            "uwf thread run 01J7K9M2XNPQR5VWBCDF8G3H4T --max-steps 20", _run,
            (_THREAD, _AGENT, _TIMEOUT,
             arg("--max-steps", help="stop after this many steps (default 200: a loop "
                 "that never approves stops too)", type=_count, default=200))),
    Command(("thread", "show"), "Show a thread's workflow, head and whether it is done.",
            "uwf thread show 01J7K9M2XNPQR5VWBCDF8G3H4T", _show, (_THREAD,)),
    Command(("thread", "list"), "List active threads (all with --all), oldest first.",
            "uwf thread list --all", _list,
            (arg("--all", help="include ended threads", action="store_true"),)),
    Command(("thread", "kill"), "End a thread now; its history stays.",
            'uwf thread kill 01J7K9M2XNPQR5VWBCDF8G3H4T --reason "superseded"', _kill,
            (_THREAD, arg("--reason", help="why, recorded in the event"))),
    Command(("thread", "log"), "Print the thread's steps oldest first, one JSON line each.",
            "uwf thread log 01J7K9M2XNPQR5VWBCDF8G3H4T", _log, (_THREAD,), streams=True),
    Command(("thread", "fork"), "Start a new thread whose head is an earlier step of this one.",
            "uwf thread fork 01J7K9M2XNPQR5VWBCDF8G3H4T --at 8FWKR3TN5V1QA", _fork,
            (_THREAD, arg("--at", help="StepNode hash in the thread's chain", required=True,
                          metavar="STEP_HASH"))),
    Command(("agent", "context"), "Print what an agent needs for a step: role, schema, "
            "prompts, history.", "uwf agent context 01J7K9M2XNPQR5VWBCDF8G3H4T planner",
            _context, (_THREAD, arg("role", help="the role to play", metavar="ROLE"),
                       arg("--history", help="only the last N steps of history",
                           type=_count, metavar="N"))),
    Command(("agent", "submit"), "Validate an output, write output, detail and StepNode "
            "nodes, and print the StepNode hash (the head does not move).",
            "uwf agent submit 01J7K9M2XNPQR5VWBCDF8G3H4T planner --output out.json", _submit,
            (_THREAD, arg("role", help="the role played", metavar="ROLE"),
             arg("--output", help="output JSON file, or - for stdin", required=True),
             arg("--detail", help="detail text file (transcript, notes), or - for stdin"),
             arg("--agent", help="agent name recorded in the StepNode (default manual)")),
            plain=True),
]
