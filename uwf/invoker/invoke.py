"""One way to run a declared command, whatever the surface: argument values in, the
command's typed result out, or a classified refusal (a `uwf.errors.UwfError`) raised;
progress as a callback.

The command line (`uwf.cli.render`), the MCP server (`uwf.cli.mcp`) and the web
dashboard (`uwf.dashboard.calls`) each call `invoke` and render what it gives in
their own way: text or JSON on stdout and a line on stderr, a tool result, a page.
A refusal's wording is the refusal's own (`UwfError.line()`); argument values a
command's Struct refuses are an `Invalid` refusal, which each surface says naming
the argument in its own terms (`Invalid.worded`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from uwf.errors import UsageError
from uwf.invoker.params import Param, flag_name, invalid, params

if TYPE_CHECKING:
    from uwf.config.args import Args
    from uwf.invoker.context import Context
    from uwf.invoker.spec import Command

# How far a long call is: (done so far, the total or None, what is being done).
Progress = Callable[[float, float | None, str | None], None]


class Invalid(UsageError):
    """Argument values the command's `Args` Struct refused. Its line names the argument
    as the command line does (`argument --limit/-n: must be 0 or more, not -1`);
    `worded(naming)` says the same in another surface's terms."""

    def __init__(self, command: Command[Any], exc: msgspec.ValidationError,
                 values: Mapping[str, Any]) -> None:
        self.command = command
        self.error = exc
        self.values = dict(values)
        super().__init__(self.worded(flag_name), f"see `uwf {command.name} --help`")

    def worded(self, naming: Callable[[Param], str]) -> str:
        """What was refused, each argument named by `naming`."""
        return invalid(self.error, params(self.command.args), self.values, naming)


def arguments(command: Command[Any], values: Mapping[str, Any], *,
              strict: bool = True) -> Args:
    """The command's `Args` from argument values (JSON's types; with `strict` False,
    strings that read as the type, as a query string's `"50"`), or `Invalid`."""
    try:
        converted: Args = msgspec.convert(dict(values), command.args, strict=strict)
    except msgspec.ValidationError as exc:
        raise Invalid(command, exc, values) from None
    return converted


def invoke(command: Command[Any], args: Args, context: Context, *,
           progress: Progress | None = None,
           each_line: Callable[[str], None] | None = None) -> Any:
    """Run `command` with `args` against `context`: its id arguments made whole (any
    case, a unique prefix: `uwf.invoker.ids`), its handler called, its result returned
    (a typed result, a `Plain` string or JSON-ready data), or its refusal raised.

    A streaming command's lines are told to `each_line` as they come when it is given
    (the CLI prints them; none is kept, as `log tail --follow` never ends), else
    collected into a list, each JSON line parsed. With `progress`, the store's catch-up,
    the steps taken and each line collected are said to it, numbered so that the count
    only grows."""
    notify = _Notifier(progress)
    store = context.store if progress is not None else None
    if store is not None:
        saved = store.progress, store.steps
        store.progress = notify.counting("views caught up")
        store.steps = notify.counting("steps taken")
    try:
        if any(param.ids for param in params(command.args)):  # else ids stay unloaded
            from uwf.invoker.ids import whole_ids

            args = whole_ids(args, context)
        result = command.handler(args, context)
        if not command.streams:
            return result
        if each_line is not None:
            for line in result:
                each_line(line)
            return None
        return collect(result, notify.say if progress is not None else None)
    finally:
        if store is not None:
            store.progress, store.steps = saved


def collect(lines: Iterable[str], each: Callable[[str], None] | None = None) -> list[Any]:
    """A streaming command's lines (`thread log`, `log tail`) as one list, each JSON line
    parsed (any other kept as text): what `uwf mcp` and the dashboard return for them.
    `each` is told every line as it comes."""
    import json

    collected: list[Any] = []
    for line in lines:
        try:
            collected.append(json.loads(line))
        except ValueError:
            collected.append(line)
        if each is not None:
            each(line)
    return collected


class _Notifier:
    """A call's progress, numbered so that it only grows (as MCP wants) whoever reports:
    the store's catch-up, its steps, a command's lines."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.count = 0

    def say(self, message: str) -> None:
        if self.progress is not None:
            self.count += 1
            self.progress(self.count, None, message)

    def counting(self, what: str) -> Callable[[int, int], None]:
        """A store's callback (done, total or 0), said as `<what>: done of total`."""
        return lambda done, total: self.say(
            f"{what}: {done}" + (f" of {total}" if total else ""))
