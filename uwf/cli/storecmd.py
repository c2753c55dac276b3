"""Declaration of `uwf store copy`: a whole store into an empty one, a folder or a
PostgreSQL database either side (docs/hosts.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uwf.invoker.spec import Command
from uwf.storecopy import commands as storecopy
from uwf.storecopy.commands import StoreCopy

if TYPE_CHECKING:
    from uwf.invoker.context import Bars, Context
    from uwf.storecopy.results import Copied


def _copy(args: StoreCopy, ctx: Context) -> Copied:
    """Copy with the command's settings; on a terminal, a bar of the events copied (each
    checked as `log verify` checks it and folded into the new views as it is written),
    then one of its views verified (compared with the rows that fold wrote). The store
    of --store / UWF_HOME is not opened."""
    return storecopy.copy(args, ctx.settings, _bars(ctx.bars) if ctx.bars is not None else None,
                          ctx.features)


def _bars(bars: Bars) -> Callable[[int, int], None]:
    """A bar for each phase in turn: the next starts once one is full."""
    phases = iter((bars.bar("copying, verifying and folding the log"),
                   bars.bar("verifying its views", unit="rows")))
    current = next(phases)

    def bar(done: int, total: int) -> None:
        nonlocal current
        current(done, total)
        if done >= total:
            current = next(phases, current)

    return bar


def _copied_panel(payload: dict[str, Any]) -> str:
    events, nodes = payload["events"], payload["nodes"]
    return (f"copied {events} event{'' if events == 1 else 's'} and {nodes} "
            f"node{'' if nodes == 1 else 's'} from {payload['from']} to {payload['to']}; "
            "the copy verifies (log verify, registry verify)")


STORE_COMMANDS: list[Command[Any]] = [
    Command(("store", "copy"), "Copy a store (a folder or a postgresql:// URL) into an empty "
            "one: the log line for line, the nodes it reaches; then rebuild the views and "
            "verify the copy (exit 1 when it does not; a store with events is refused).",
            "uwf store copy ~/.local/state/uwf postgresql://uwf@db.example/uwf", StoreCopy,
            _copy, human=_copied_panel),
]
