"""The console scripts' SIGTERM handler (`uwf.cli.entry`).

The handler is installed first thing, before the commands' modules are imported
(tens of milliseconds): a SIGTERM that comes while they load waits, as one that
comes while the command line is read does, until the command is known; then it
ends the command as SIGTERM does (exit 0 for one that stops on signals, such as
`archive sync --follow`; else 143). This module imports only `_signal` and `sys`.
`main(argv)` (uwf.cli.main, uwf.cli.jsoncas) installs nothing: it runs in-process.

It takes the handler's calls from `_signal`, the C module under `signal` that every
interpreter loads at start-up: `import signal` makes an enum of every signal, handler
and mask (about 3 million instructions, 1 % of `uwf workflow show`), and the handler
needs none of them.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub: signal's C part
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uwf.config.args import Args
    from uwf.invoker.spec import Command


class Terminated(SystemExit):
    """SIGTERM, unwinding the command like Ctrl-C (exit 128 + the signal)."""

    def exit_code(self, command: Command[Any] | None, args: Args | None) -> int:
        """0 when the command stops cleanly on a signal with these arguments."""
        if command is not None and command.stops_on_signal is not None and (
                command.stops_on_signal(args)):
            return 0
        return self.code if isinstance(self.code, int) else 128 + _signal.SIGTERM


class Termination:
    """The console scripts' SIGTERM handler. While `deferred` (from the start until the
    command line is parsed) it only remembers the signal; afterwards it raises
    Terminated, which a command that stops on signals turns into exit 0."""

    def __init__(self) -> None:
        self.deferred = False
        self.pending = 0
        # The last signal raised as Terminated. Kept: the raise may land where exceptions
        # are ignored (an import's module-lock callback, a finalizer), and a command that
        # stops on signals must still stop (`until_signalled` reads it).
        self.received = 0

    def __call__(self, signum: int, frame: object) -> None:
        if self.deferred:
            self.pending = signum
            return
        self.received = signum
        raise Terminated(128 + signum)

    def release(self) -> int:
        """End the deferral; the signal that came meanwhile (0: none)."""
        self.deferred = False
        pending, self.pending = self.pending, 0
        return pending


TERMINATION = Termination()


def install_termination() -> None:
    """Handle SIGTERM with `TERMINATION`, deferred until the command is known (once per
    process: a second call changes nothing)."""
    if _signal.getsignal(_signal.SIGTERM) is TERMINATION:
        return
    TERMINATION.deferred = True
    _signal.signal(_signal.SIGTERM, TERMINATION)
    sys.unraisablehook = quiet_termination(sys.unraisablehook)


def quiet_termination(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """`hook`, but silent for a Terminated raised where Python ignores exceptions (an
    import's module-lock callback): no traceback on stderr; the handler kept the signal
    (`Termination.received`)."""
    def quiet(raised: Any) -> object:
        if isinstance(raised.exc_value, Terminated):
            return None
        return hook(raised)
    return quiet
