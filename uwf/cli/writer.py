"""Declaration of `uwf writer`: a folder store's resident writer (docs/writer.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from uwf.config.args import NoArgs
from uwf.invoker.context import Context
from uwf.invoker.spec import Command


def _writer(args: NoArgs, ctx: Context) -> Iterator[str]:
    """A line when it listens, a line of what it served when stopped (SIGTERM, Ctrl-C)."""
    import json
    import os
    import sys

    from uwf.cli.common import until_signalled
    from uwf.payload import to_payload
    from uwf.writer.server import Writer

    human = not ctx.json and sys.stdout.isatty()
    writer = Writer(ctx.store)
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
    Command(("writer",), "serve this folder store's leases, renewals, completions and "
            "releases from one process, over a Unix socket in the store's folder: many "
            "commands to one fsync (until stopped); clients find it themselves",
            "uwf writer", NoArgs, _writer, streams=True, stops_on_signal=lambda args: True,
            endless=lambda args: True, mcp=False),
]
