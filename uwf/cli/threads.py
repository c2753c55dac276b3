"""`uwf thread ...` and `uwf agent ...`: help, examples, and the handlers only a
command line has (`thread list`'s line on stderr, `thread log`'s JSON lines, `agent
submit`'s files or stdin); the arguments and operations are uwf.threads.commands'."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from uwf.cli.common import parse_json, read_input
from uwf.invoker.context import Context
from uwf.invoker.spec import Command, on_store
from uwf.payload import to_payload
from uwf.threads import commands as threads
from uwf.threads.commands import (
    AgentContext,
    AgentSubmit,
    ThreadAnswer,
    ThreadFork,
    ThreadKill,
    ThreadList,
    ThreadRef,
    ThreadRun,
    ThreadStart,
    ThreadStep,
)
from uwf.threads.results import ThreadRow


def _run(args: ThreadRun, ctx: Context) -> Any:
    """On a terminal, a bar of the steps taken (of --max-steps when given)."""
    store = ctx.store
    if ctx.bars is not None:  # an MCP call sets its own `steps`: left alone
        # Erased when the run stops: "4/200" of --max-steps says nothing the panel does not.
        store.steps = ctx.bars.bar("steps taken", "steps", leave=False)
    return threads.run(args, store)


def _timeline(args: ThreadRef, ctx: Context, payload: Any) -> str | None:
    """On a terminal, after `thread show`'s panel: its steps and the path taken."""
    from uwf.cli.progress import run_timeline

    return run_timeline(ctx.store, args.thread, payload.get("inFlight"),
                        payload.get("status") == "ended")


def _thread_panel(payload: dict[str, Any]) -> str:
    """`thread show`'s panel: the fields, `lastFailure` in one line, and the attempts
    (when one failed or was reused)."""
    from uwf.cli.progress import attempts_lines, failure_line
    from uwf.cli.render import panel

    shown = {key: value for key, value in payload.items() if key != "attempts"}
    if failure := payload.get("lastFailure"):
        shown["lastFailure"] = failure_line(failure)
    if attempts := payload.get("attempts"):
        return panel(shown) + "\n\n" + attempts_lines(attempts)
    return panel(shown)


def _list(args: ThreadList, ctx: Context) -> list[ThreadRow]:
    import sys

    from uwf.threads.service import damage_line

    rows = threads.list_all(args, ctx.store)
    if (line := damage_line(rows)) is not None:  # the list still prints; exit 1
        sys.stderr.write(f"uwf: error: {line}\n")
    return rows


def _damaged(rows: Any) -> bool:
    from uwf.threads.service import HEAD_DAMAGE

    return any(row.get("status") in HEAD_DAMAGE for row in rows)


def _log(args: ThreadRef, ctx: Context) -> Iterator[str]:
    """A JSON line per step; on a terminal, a heading per step and its output beneath."""
    from uwf.threads.service import iter_log

    for record in iter_log(ctx.store, args.thread):
        payload = to_payload(record)
        if not ctx.terminal:
            yield json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
            continue
        from uwf.cli.render import panel

        yield (f"{record.step:>3}  {record.role}  {record.status}  by {record.agent}  "
               f"(step {record.hash}, detail {record.detail})\n"
               + panel(payload["output"], "     "))


def _answer(args: ThreadAnswer, ctx: Context) -> Any:
    """The answer from `--answer` or `--file` (one of them), parsed as JSON."""
    from uwf.errors import UsageError

    if (args.answer is None) == (args.file is None):
        raise UsageError("give the answer with --answer JSON or --file FILE (one of them)",
                         f"see the question with `uwf thread show {args.thread}`")
    text, source = ((args.answer, "--answer") if args.answer is not None
                    else (read_input(args.file or "-", ctx.settings), args.file or "-"))
    shown = threads.answer(args, ctx.store, parse_json(text, source))
    # The run's queue entry, when a worker gave it back as waiting: ready again now,
    # whoever answers (any surface), for whoever leases next (docs/queue.md#waiting).
    # The answer is recorded either way: if this write fails, the next worker's lease
    # or `sched reclaim` makes it ready.
    from uwf.errors import UwfError
    from uwf.queue.waiting import resume_answered

    with contextlib.suppress(UwfError):
        resume_answered(ctx.store)
    return shown


def _staged(ctx: Context) -> Any:
    """The step's staging folder when `uwf thread step` runs this as an agent's command
    (UWF_STEP_DIR): read and written instead of the store, which is then never opened."""
    if not ctx.settings.environ.get("UWF_STEP_DIR"):
        return None
    from uwf.threads.staging import open_staged

    return open_staged(ctx.settings.environ, ctx.settings.clock, ctx.redact)


def _context(args: AgentContext, ctx: Context) -> Any:
    staged = _staged(ctx)
    if staged is None:
        return threads.context(args, ctx.store)
    from uwf.threads.staging import staged_context

    return staged_context(staged, args.thread, args.role, threads.history_limit(args))


def _submit(args: AgentSubmit, ctx: Context) -> str:
    output = parse_json(read_input(args.output, ctx.settings), "--output")
    detail = read_input(args.detail, ctx.settings) if args.detail else None
    staged = _staged(ctx)
    if staged is not None:
        from uwf.threads.staging import staged_submit

        return staged_submit(staged, args.thread, args.role, output, detail,
                             agent=args.agent or "manual", started_at_ms=None,
                             completed_at_ms=ctx.settings.clock())
    from uwf.threads.agent import submit_step

    return submit_step(ctx.store, args.thread, args.role, output, detail,
                       agent=args.agent or "manual")


THREAD_COMMANDS: list[Command[Any]] = [
    Command(("thread", "start"), "Create a thread of a workflow (no step runs); a workflow "
            "file is registered first.",
            'uwf thread start solve-issue -p "Fix the login bug in #42"', ThreadStart,
            on_store(threads.start)),
    Command(("thread", "step"), "Run one step: the moderator picks a role, its agent runs, "
            "and the head moves to the agent's StepNode if it passes every check.",
            "uwf thread step 01J7K9M2XNPQR5VWBCDF8G3H4T", ThreadStep, on_store(threads.step)),
    Command(("thread", "run"), "Step the thread until it is done.",
            "uwf thread run 01J7K9M2XNPQR5VWBCDF8G3H4T --max-steps 20", ThreadRun,
            _run),
    Command(("thread", "show"), "Show a thread's workflow, head, status and current role.",
            "uwf thread show 01J7K9M2XNPQR5VWBCDF8G3H4T", ThreadRef, on_store(threads.show),
            human=_thread_panel, after=_timeline, read_only=True),
    Command(("thread", "list"), "List threads that have not ended (all with --all, or by "
            "--status and --workflow), oldest first.",
            "uwf thread list --status blocked --workflow solve-issue --limit 20", ThreadList,
            _list, fails=_damaged, read_only=True),
    Command(("thread", "answer"), "Answer the question a waiting thread asks (checked "
            "against its answerSchema); its next step resumes the asking role with it.",
            'uwf thread answer 01J7K9M2XNPQR5VWBCDF8G3H4T --answer \'{"approved": true}\'',
            ThreadAnswer, _answer),
    Command(("thread", "kill"), "End a thread now; its history stays.",
            'uwf thread kill 01J7K9M2XNPQR5VWBCDF8G3H4T --reason "superseded"', ThreadKill,
            on_store(threads.kill)),
    Command(("thread", "log"), "Print the thread's steps oldest first, one JSON line each.",
            "uwf thread log 01J7K9M2XNPQR5VWBCDF8G3H4T", ThreadRef, _log, streams=True,
            read_only=True),
    Command(("thread", "fork"), "Start a new thread whose head is an earlier step of this one.",
            "uwf thread fork 01J7K9M2XNPQR5VWBCDF8G3H4T --at 8FWKR3TN5V1QA", ThreadFork,
            on_store(threads.fork)),
    Command(("agent", "context"), "Print what an agent needs for a step: role, schema, "
            "prompts, history.", "uwf agent context 01J7K9M2XNPQR5VWBCDF8G3H4T planner",
            AgentContext, _context, read_only=True),
    Command(("agent", "submit"), "Validate an output, write output, detail and StepNode "
            "nodes, and print the StepNode hash (the head does not move).",
            "uwf agent submit 01J7K9M2XNPQR5VWBCDF8G3H4T planner --output out.json",
            AgentSubmit, _submit, plain=True),
]
