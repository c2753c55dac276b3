"""A command, declared once: name, help, example, typed arguments and a handler.

A command's arguments are one frozen msgspec Struct (a subclass of
`uwf.config.args.Args`, declared in the feature's `commands` module). From that
one declaration the CLI renders argparse (`uwf.cli.parsing`) and any other
surface (an MCP server) derives a JSON Schema (`command_schemas`); every surface
runs it through the one invoker (`uwf.invoker.invoke`), which calls its handler,
`handler(args, ctx) -> result`, and renders the result with
`uwf.payload.to_payload`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from uwf.config.args import Args

if TYPE_CHECKING:
    from uwf.invoker.context import Context
    from uwf.store import Store

A = TypeVar("A", bound=Args)
R = TypeVar("R")


def on_store(operation: Callable[[A, Store], R]) -> Callable[[A, Context], R]:
    """The handler of a command that needs only the store: a feature's operation
    `operation(args, store)`, called with the context's store."""

    def handler(args: A, ctx: Context) -> R:
        return operation(args, ctx.store)

    handler.__name__ = handler.__qualname__ = getattr(operation, "__name__", "handler")
    handler.__doc__ = operation.__doc__
    return handler


class Command(msgspec.Struct, Generic[A], frozen=True):
    """A command: `path` such as ("workflow", "put"), its arguments and its handler.

    A frozen Struct, not a dataclass: every process declares some sixty of these
    classes' instances, and a dataclass compiles its methods at start-up."""

    path: tuple[str, ...]
    help: str
    example: str
    args: type[A]
    # Takes the parsed arguments and the global options; returns the result: a
    # `uwf.payload.Result`, a `Plain` string or JSON-ready data (`to_payload` renders it).
    handler: Callable[[A, Context], Any]
    # Human panel renderer for a terminal; the JSON payload otherwise.
    human: Callable[[Any], str] | None = None
    # On a terminal only, more lines after the panel, read through the context while the
    # store is open (`thread show`'s timeline): `after(args, ctx, payload)`, None for none.
    after: Callable[[A, Context, Any], str | None] | None = None
    # Exit 1 when the payload says {"ok": false} (verify commands).
    ok_exit: bool = False
    # Exit 1, the payload printed all the same, when this says it shows damage (thread
    # list's threads whose head node is missing).
    fails: Callable[[Any], bool] | None = None
    # The handler yields lines to print as they come (log tail --follow).
    streams: bool = False
    # The payload is one string (a hash) printed as is, for `$(json-cas put ...)`.
    plain: bool = False
    # The payload is stored content (`json-cas get`'s node): its JSON, piped or with
    # --json, is printed exactly, so `get | put` copies it; only a panel is masked.
    exact: bool = False
    # True for the arguments with which SIGTERM (or Ctrl-C) ends the command cleanly,
    # exit 0, whenever it comes (`archive sync --follow`); else SIGTERM exits 143.
    stops_on_signal: Callable[[Any], bool] | None = None
    # Changes nothing whatever its arguments (an MCP client may call it freely).
    read_only: bool = False
    # True for the arguments with which it runs until stopped (`--follow`, a worker
    # without `--once`): a tool call, which must end, refuses them.
    endless: Callable[[Any], bool] | None = None
    # Offered as an MCP tool (`uwf mcp`): every command but the server itself.
    mcp: bool = True

    def failed(self, payload: Any) -> bool:
        """Whether `payload` (what `--json` prints) makes the command exit 1 though it
        is printed: a verify's `{"ok": false}`, or what `fails` says is damage."""
        return bool((self.ok_exit and isinstance(payload, dict) and payload.get("ok") is False)
                    or (self.fails is not None and self.fails(payload)))

    @property
    def name(self) -> str:
        """`workflow put`: the path as one string."""
        return " ".join(self.path)


class Lazy(msgspec.Struct, frozen=True):
    """Commands declared in a module that is imported only when a command line names
    one of `words` (the first word of each of their paths), or when every command is
    wanted (`--help`, an MCP server): `uwf workflow show` does not import the queue's,
    the archive's or the worker's declarations."""

    words: tuple[str, ...]
    load: Callable[[], Sequence[Command[Any]]]


class Group:
    """Commands under one binary, with the help of each group. `declared` holds
    commands, and `Lazy` blocks of them, in the order `--help` lists them."""

    def __init__(self, prog: str, description: str, groups: dict[str, str],
                 commands: Sequence[Command[Any] | Lazy]) -> None:
        self.prog = prog
        self.description = description
        self.groups = groups
        self.declared = list(commands)
        self._loaded: list[Command[Any]] | None = None

    @property
    def commands(self) -> list[Command[Any]]:
        """Every command, each lazy block imported (once)."""
        if self._loaded is None:
            self._loaded = [command for entry in self.declared for command in _each(entry)]
        return self._loaded

    def named(self, word: str) -> list[Command[Any]]:
        """The commands whose path may start with `word`: the ones declared here and the
        lazy blocks that say they hold `word`, the others not imported."""
        if self._loaded is not None:
            return self._loaded
        return [command for entry in self.declared
                if not isinstance(entry, Lazy) or word in entry.words
                for command in _each(entry)]

    def __iter__(self) -> Iterator[Command[Any]]:
        return iter(self.commands)


def _each(entry: Command[Any] | Lazy) -> Sequence[Command[Any]]:
    if not isinstance(entry, Lazy):
        return (entry,)
    commands = entry.load()
    if stray := [command.name for command in commands if command.path[0] not in entry.words]:
        raise TypeError(f"commands {stray} are not under {entry.words}: add their first "
                        "word to the Lazy block that declares them")
    return commands


def command_schemas(group: Group) -> dict[str, dict[str, Any]]:
    """A JSON Schema of each command's arguments, by command name (`workflow put`).

    Derived from the same Structs argparse is rendered from, so another surface
    (an MCP server) offers exactly the CLI's arguments, types, bounds and defaults.
    """
    _, components = msgspec.json.schema_components([command.args for command in group])
    schemas = {}
    for command in group:
        schema = dict(components[command.args.__name__])
        schema.pop("title", None)
        schema["description"] = command.help
        schemas[command.name] = schema
    return schemas
