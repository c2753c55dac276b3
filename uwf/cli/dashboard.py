"""Declaration of `uwf dashboard`: the web UI, read-only unless a token is set
(docs/dashboard.md); the server is `uwf.dashboard.server`, loaded only when the
command runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from uwf.dashboard.commands import DashboardArgs
from uwf.invoker.context import Context
from uwf.invoker.spec import Command


def _dashboard(args: DashboardArgs, ctx: Context) -> Iterator[str]:
    from uwf.dashboard.server import serve

    yield from serve(args, ctx)


DASHBOARD_COMMANDS: list[Command[Any]] = [
    Command(("dashboard",), "serve a web dashboard of the runs, the queue, the log and its "
            "checks, on loopback (until stopped); read-only unless a token is set",
            "uwf dashboard --port 8765 --open", DashboardArgs, _dashboard, streams=True,
            read_only=True, stops_on_signal=lambda args: True, endless=lambda args: True,
            mcp=False),
]
