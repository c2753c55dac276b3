"""Declaration of `uwf worker`: lease queue entries and run them (docs/worker.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from uwf.cli.common import until_signalled
from uwf.cli.context import Context
from uwf.cli.spec import Command
from uwf.worker import commands as workers
from uwf.worker.commands import WorkerArgs

if TYPE_CHECKING:
    pass


def _worker(args: WorkerArgs, ctx: Context) -> Iterator[str]:
    import json
    import sys

    from uwf.payload import to_payload

    worker = workers.worker(args, ctx.store)
    human = not ctx.json and sys.stdout.isatty()
    with until_signalled(worker.stop):
        for result in worker.results():
            yield result.line() if human else json.dumps(to_payload(result.record()),
                                                         ensure_ascii=False)


WORKER_COMMANDS: list[Command[Any]] = [
    Command(("worker",), "run queue entries with agents: lease, step to the end, complete or "
            "release",
            "uwf worker --session tmux:a --concurrency 2", WorkerArgs, _worker, streams=True,
            endless=lambda args: not args.once),
]
