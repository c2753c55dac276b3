"""Declaration of `uwf worker`: lease queue entries and run them (docs/worker.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from uwf.cli.common import until_signalled
from uwf.invoker.context import Context
from uwf.invoker.spec import Command
from uwf.worker import commands as workers
from uwf.worker.commands import WorkerArgs


def _worker(args: WorkerArgs, ctx: Context) -> Iterator[str]:
    import json
    import sys

    from uwf.payload import to_payload

    worker = workers.worker(args, ctx.store)
    human = not ctx.json and sys.stdout.isatty()
    # On a terminal, a count of the entries done (how many will come is not known).
    bar = ctx.bars.bar("entries done", "entries") if ctx.bars is not None else None
    with until_signalled(worker.stop):
        for done, result in enumerate(worker.results(), 1):
            line = result.line() if human else json.dumps(to_payload(result.record()),
                                                          ensure_ascii=False)
            if bar is None:
                yield line
                continue
            with bar.aside():  # the line is printed where the bar was, then the bar again
                yield line
            bar(done, 0)


WORKER_COMMANDS: list[Command[Any]] = [
    Command(("worker",), "run queue entries with agents: lease, step to the end, complete or "
            "release",
            "uwf worker --session tmux:a --concurrency 2", WorkerArgs, _worker, streams=True,
            endless=lambda args: not args.once),
]
