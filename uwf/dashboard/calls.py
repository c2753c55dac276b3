"""A page's data: the CLI's own commands, called by name, their `--json` payloads.

The dashboard calls the declared commands (`uwf.cli.main.COMMANDS`) as `uwf mcp`
does: the arguments converted into the command's `Args` (from a query string, so
`"50"` may be the integer 50), the handler run with the server's one context, the
result made the payload `--json` prints (`to_payload`, secrets masked as the CLI
masks them). A refused call is its one-line error and exit code, as a tool error
is. Only commands that change nothing may be called: the dashboard is read-only.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from uwf.cli.context import Context
from uwf.cli.parsing import collect, invalid, masked, one_line, params
from uwf.cli.spec import Command
from uwf.errors import EXIT_REJECTED, NotFound, UsageError, UwfError
from uwf.payload import to_payload

# The commands a page may call. `workflow show` is not marked read-only because it
# may be given a file; the dashboard gives it a registered workflow's hash.
READS = frozenset({"run search", "run counts", "history", "run show", "thread log",
                   "workflow show", "queue list", "sched plan", "log tail", "log verify",
                   "registry verify"})


@dataclass(frozen=True)
class Called:
    """What one command gave: its name, the payload `--json` prints (or
    `{"error": line, "exitCode": n}`), and the HTTP status a page answers with."""

    command: str
    payload: Any
    status: int = 200

    @property
    def error(self) -> str | None:
        if self.status != 200 and isinstance(self.payload, dict):
            return str(self.payload.get("error", ""))
        return None


class Caller:
    """The read commands, called one at a time against one context's store."""

    def __init__(self, context: Context) -> None:
        from uwf.cli.main import COMMANDS

        self.context = context
        self.commands: dict[str, Command[Any]] = {
            command.name: command for command in COMMANDS if command.name in READS}
        assert set(self.commands) == READS, READS - set(self.commands)
        self._lock = threading.Lock()

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> Called:
        """Run the command `name` with `arguments` (None values left out)."""
        command = self.commands[name]
        given = {key: value for key, value in (arguments or {}).items() if value is not None}
        with self._lock:
            try:
                # A node deleted or altered since the last page is seen so, never as live.
                self.context.store.cas.forget_checked()
                args = _convert(command, given)
                result = command.call(args, self.context)
                if command.streams:
                    result = collect(result)
                return Called(name, self._payload(result))
            except NotFound as exc:
                return self._failed(name, exc, 404)
            except UsageError as exc:
                return self._failed(name, exc, 400)
            except UwfError as exc:
                return self._failed(name, exc, 500)
            except Exception as exc:  # a bug: said, and the server serves the next page
                line = f"internal error ({type(exc).__name__}: {exc}); report it"
                return Called(name, {"error": self._line(line), "exitCode": EXIT_REJECTED},
                              500)

    def _payload(self, result: Any) -> Any:
        payload = to_payload(result)
        if self.context.redact is not None:
            from uwf.redact import redact_value

            payload = redact_value(payload, self.context.redact)
        return payload

    def _failed(self, name: str, exc: UwfError, status: int) -> Called:
        return Called(name, {"error": self._line(exc.line()), "exitCode": exc.exit_code},
                      status)

    def _line(self, line: str) -> str:
        return one_line(masked(f"uwf: error: {line}", self.context.redact))


def _convert(command: Command[Any], arguments: dict[str, Any]) -> Any:
    """The command's Args from a query's strings; what they refuse is said as the command
    line says it."""
    try:
        return msgspec.convert(arguments, command.args, strict=False)
    except msgspec.ValidationError as exc:
        raise UsageError(invalid(exc, params(command.args), arguments),
                         f"see `uwf {command.name} --help`") from None


