"""Declaration of `uwf worker`: lease queue entries and run them (docs/worker.md)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from uwf.cli.archive import FOLDER_EXPECT, FolderName
from uwf.cli.context import Context
from uwf.cli.spec import Command
from uwf.config.args import Args, Count, arg

if TYPE_CHECKING:
    from uwf.worker.service import Worker

# Entries one worker runs at once: threads, each waiting on an agent subprocess.
MAX_CONCURRENCY = 1000
Concurrency = Annotated[int, msgspec.Meta(ge=1, le=MAX_CONCURRENCY)]
PollSeconds = Annotated[float, msgspec.Meta(ge=0.05, le=3600)]


class WorkerArgs(Args, frozen=True, kw_only=True):
    session: Annotated[str | None, arg("lease only this session label's entries (default: "
                                       "any)", metavar="LABEL")] = None
    concurrency: Annotated[Concurrency, arg("entries run at once (default 1; the policy's "
                                            "maxConcurrent still holds)", metavar="N")] = 1
    once: Annotated[bool, arg("run what is eligible now, then exit (exit 3 when nothing "
                              "was)")] = False
    poll: Annotated[PollSeconds, arg("seconds between lease attempts that found nothing "
                                     "(default 2)", metavar="SEC")] = 2.0
    archive: Annotated[FolderName | None, arg("keep this per-run archive folder in sync: at "
                                              "start and after each entry (as `uwf archive "
                                              "sync DIR`)", metavar="DIR",
                                              expect=FOLDER_EXPECT)] = None
    anchors: Annotated[FolderName | None, arg("write a signed anchor of the log's head into "
                                              "this folder each time the log grew by "
                                              "--anchor-every events (checked after each "
                                              "entry)", metavar="DIR",
                                              expect=FOLDER_EXPECT)] = None
    anchor_every: Annotated[Count | None, arg("events between two anchors (default 1000)",
                                              metavar="N")] = None
    anchor_key: Annotated[str | None, arg("the key to sign anchors with (default as `uwf "
                                          "log anchor`)", metavar="FILE")] = None
    allow_entry_commands: Annotated[bool, arg(
        "run an entry's --agent that is a command line, not an agent alias of the config "
        "(whoever can queue an entry then runs code on this host)")] = False


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

    from uwf.config.configfile import load_config
    from uwf.worker.service import DEFAULT_ANCHOR_EVERY, Worker, WorkerOptions

    if args.anchors is None and (args.anchor_key is not None or args.anchor_every):
        from uwf.errors import UsageError

        raise UsageError("--anchor-every and --anchor-key go with --anchors DIR",
                         "add --anchors DIR")
    options = WorkerOptions(args.session, args.concurrency, args.once, args.poll,
                            archive=args.archive, anchors=args.anchors,
                            anchor_every=args.anchor_every or DEFAULT_ANCHOR_EVERY,
                            anchor_key=Path(args.anchor_key).expanduser()
                            if args.anchor_key else None,
                            allow_entry_commands=args.allow_entry_commands)
    worker = Worker(ctx.store, load_config(ctx.settings.config_path), options)
    human = not ctx.json and sys.stdout.isatty()
    with _stopped_by_signals(worker):
        for result in worker.results():
            yield result.line() if human else json.dumps(result.record(), ensure_ascii=False)


WORKER_COMMANDS: list[Command[Any]] = [
    Command(("worker",), "run queue entries with agents: lease, step to the end, complete or "
            "release",
            "uwf worker --session tmux:a --concurrency 2", WorkerArgs, _worker, streams=True),
]
