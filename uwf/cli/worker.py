"""Declaration of `uwf worker`: lease queue entries and run them (docs/worker.md)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from uwf.cli.context import Context
from uwf.cli.spec import Command
from uwf.worker import commands as workers
from uwf.worker.commands import WorkerArgs

if TYPE_CHECKING:
    from uwf.worker.service import Worker


@contextlib.contextmanager
def _stopped_by_signals(worker: Worker) -> Iterator[None]:
    """While the worker runs, SIGTERM and Ctrl-C ask it to stop (release what it holds,
    exit 0) instead of unwinding the loop mid-write. Signal handlers belong to the main
    thread; elsewhere (main(argv) in a thread) none is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        worker.stop()

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM,
                                                                    signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _worker(args: WorkerArgs, ctx: Context) -> Iterator[str]:
    import json
    import sys

    from uwf.payload import to_payload

    worker = workers.worker(args, ctx.store)
    human = not ctx.json and sys.stdout.isatty()
    with _stopped_by_signals(worker):
        for result in worker.results():
            yield result.line() if human else json.dumps(to_payload(result.record()),
                                                         ensure_ascii=False)


WORKER_COMMANDS: list[Command[Any]] = [
    Command(("worker",), "run queue entries with agents: lease, step to the end, complete or "
            "release",
            "uwf worker --session tmux:a --concurrency 2", WorkerArgs, _worker, streams=True,
            endless=lambda args: not args.once),
]
