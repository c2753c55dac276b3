"""Declaration of `uwf writer`: a folder store's resident writer (docs/writer.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from uwf.invoker.context import Context
from uwf.invoker.spec import Command
from uwf.writer.commands import WriterArgs


def _writer(args: WriterArgs, ctx: Context) -> Iterator[str]:
    """A line when it listens, a line of what it served when stopped (SIGTERM, Ctrl-C);
    `--check`: one line, where it would listen."""
    import json
    import os
    import sys

    from uwf.cli.common import until_signalled
    from uwf.payload import to_payload
    from uwf.writer.server import Writer

    human = not ctx.json and sys.stdout.isatty()
    writer = Writer(ctx.store)
    if args.check:
        try:
            writer.start()
        finally:
            writer.close()
        yield (f"{writer.root} can be served on {writer.served.socket}" if human
               else json.dumps({"ready": writer.served.socket}))
        return
    # The handlers first: a SIGTERM sent once the line below is read stops the loop.
    with until_signalled() as stop:
        try:
            writer.start()
            listening = writer.served
            yield (f"serving {writer.root} on {listening.socket}" if human
                   else json.dumps({"listening": listening.socket, "pid": os.getpid()}))
            served = writer.serve(stop.is_set)
        finally:
            writer.close()
    yield (f"served {served.calls} calls in {served.rounds} rounds, {served.fsyncs} fsyncs"
           if human else json.dumps(to_payload(served), ensure_ascii=False))


WRITER_COMMANDS: list[Command[Any]] = [
    Command(("writer",), "decide this folder store's leases, renewals, completions and "
            "releases in one process, many to an fsync (until stopped)",
            "uwf writer", WriterArgs, _writer, streams=True,
            stops_on_signal=lambda args: not args.check, endless=lambda args: not args.check,
            mcp=False),
]
