"""A page's data: the CLI's own commands, called by name, their `--json` payloads.

The dashboard calls the declared commands it is given (those `uwf dashboard` was
called among: `Context.commands`, uwf's) through the invoker the CLI and `uwf mcp` use
(`uwf.invoker.invoke`): the arguments converted into the command's `Args` (from a
query string, so `"50"` may be the integer 50), the command run with the server's one
context, the result made the payload `--json` prints (`to_payload`, secrets masked as
the CLI masks them). A refused call is its one-line error and exit code, as a tool
error is, and the same refusal in the page's words (`words`) for the page to show. The
pages call only commands that change nothing; the actions (`WRITES`) are loaded only
for a server with a token.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from uwf.dashboard import words
from uwf.errors import EXIT_REJECTED, NotFound, Rejected, UsageError, UwfError
from uwf.invoker import invoke as invoker
from uwf.invoker.context import Context
from uwf.invoker.spec import Command
from uwf.invoker.text import masked, one_line
from uwf.payload import to_payload

# The commands a page may call. `workflow show` is not marked read-only because it
# may be given a file; the dashboard gives it a registered workflow's hash.
READS = frozenset({"run search", "run counts", "history", "run show", "thread log",
                   "workflow show", "queue list", "sched plan", "log tail", "log verify",
                   "registry verify", "queue counts", "thread list", "thread show"})
# The commands the actions call (`uwf.dashboard.actions`), behind the token.
WRITES = frozenset({"queue cancel", "sched reset", "run rerun", "thread kill",
                    "thread answer"})


@dataclass(frozen=True)
class Called:
    """What one command gave: its name, the payload `--json` prints (or
    `{"error": line, "exitCode": n}`), the HTTP status a page answers with, and a
    refusal in the page's words."""

    command: str
    payload: Any
    status: int = 200
    said: str | None = None

    @property
    def error(self) -> str | None:
        """The refusal as the page shows it (None when the command did not refuse)."""
        if self.status != 200 and isinstance(self.payload, dict):
            return self.said or str(self.payload.get("error", ""))
        return None


class Caller:
    """The read commands (and, with `actions`, the actions' commands) of `commands`
    (by default the context's), called one at a time against one context's store."""

    def __init__(self, context: Context, *, actions: bool = False,
                 commands: Iterable[Command[Any]] | None = None) -> None:
        if commands is None:
            commands = context.commands
        if commands is None:
            raise UsageError("the dashboard calls the commands it is started among, and "
                             "was given none", "run it as `uwf dashboard`")
        wanted = READS | WRITES if actions else READS
        self.context = context
        self.commands: dict[str, Command[Any]] = {
            command.name: command for command in commands if command.name in wanted}
        assert set(self.commands) == wanted, wanted - set(self.commands)
        self._lock = threading.Lock()

    def call(self, name: str, arguments: Mapping[str, Any] | None = None,
             labels: Mapping[str, str] | None = None) -> Called:
        """Run the command `name` with `arguments` (None values left out); a value it
        refuses is named by `labels` (the page's word for each argument) on the page."""
        command = self.commands[name]
        given = {key: value for key, value in (arguments or {}).items() if value is not None}
        with self._lock:
            try:
                # A node deleted or altered since the last page is seen so, never as live.
                self.context.store.cas.forget_checked()
                try:
                    args = invoker.arguments(command, given, strict=False)
                except invoker.Invalid as exc:  # the page names each argument its way
                    said = exc.worded(lambda param: (labels or {}).get(param.name, param.name))
                    return self._failed(name, exc, 400, f"{said}; change it and try again")
                return Called(name, self._payload(invoker.invoke(command, args, self.context)))
            except NotFound as exc:
                return self._failed(name, exc, 404)
            except UsageError as exc:
                return self._failed(name, exc, 400)
            except Rejected as exc:
                return self._failed(name, exc, 409)
            except UwfError as exc:
                return self._failed(name, exc, 500)
            except Exception as exc:  # a bug: said, and the server serves the next page
                line = f"internal error ({type(exc).__name__}: {exc}); report it"
                return Called(name, {"error": self._line(line), "exitCode": EXIT_REJECTED},
                              500, one_line(masked(line, self.context.redact)))

    def _payload(self, result: Any) -> Any:
        payload = to_payload(result)
        if self.context.redact is not None:
            from uwf.redact import redact_value

            payload = redact_value(payload, self.context.redact)
        return payload

    def _failed(self, name: str, exc: UwfError, status: int, said: str | None = None
                ) -> Called:
        page_line = said if said is not None else words.refusal(exc.what, exc.next_action)
        return Called(name, {"error": self._line(exc.line()), "exitCode": exc.exit_code},
                      status, one_line(masked(page_line, self.context.redact)))

    def _line(self, line: str) -> str:
        return one_line(masked(f"uwf: error: {line}", self.context.redact))

