"""A command, declared once: name, help, example, typed arguments and a handler.

A command's arguments are one frozen msgspec Struct (a subclass of `Args`):
each field's type says what it holds (`str`, `int`, `float`, `bool`,
`list[str]`, `Literal[...]` for choices, `X | None` when optional) and its
`Annotated[..., arg(...)]` metadata gives the help text, bounds and the few
details only a command line needs (positional or flag, a short flag, a
metavar). From that one declaration the CLI renders argparse
(`uwf.cli.render`) and any other surface (an MCP server) derives a JSON Schema
(`command_schemas`); every surface calls the same handler,
`handler(args, ctx) -> payload`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar

import msgspec

from uwf.config.limits import MAX_TIMEOUT_S

if TYPE_CHECKING:
    from uwf.cli.context import Context


class Args(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The arguments of a command; subclasses declare them as fields."""


class NoArgs(Args, frozen=True, kw_only=True):
    """A command that takes no arguments."""


# Bounds shared by several commands; an optional field is `Annotated[Count | None, arg(...)]`
# because msgspec checks bounds on the number type itself, not on `int | None`.
# At most SQLite's largest INTEGER: a count or page beyond it is a usage error, not an
# overflow deep in a query.
MAX_COUNT = 2**63 - 1
NonNegative = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Count = Annotated[int, msgspec.Meta(ge=1, le=MAX_COUNT)]
# A duration: finite (the bounds refuse nan and inf) and at most a year, so that
# now + duration is a date every clock function can still print (docs/cli.md#limits).
MAX_SECONDS = MAX_TIMEOUT_S
Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_SECONDS)]
Age = Annotated[float, msgspec.Meta(ge=0, le=100 * MAX_SECONDS)]


def arg(help: str, *, positional: bool = False, short: str | None = None,
        metavar: str | None = None, expect: str | None = None,
        alias: str | None = None) -> msgspec.Meta:
    """The metadata of one argument: its help text (the schema's `description`) and the
    command-line details kept in `extra`: `positional` (else it is a `--flag`), a
    `short` alias such as `-p`, another long flag (`alias`, such as `--app`), the
    `metavar` shown in usage, and for a string with a pattern what a value must be
    (`expect`), said when one does not match."""
    extra: dict[str, Any] = {}
    if positional:
        extra["positional"] = True
    if short is not None:
        extra["short"] = short
    if metavar is not None:
        extra["metavar"] = metavar
    if expect is not None:
        extra["expect"] = expect
    if alias is not None:  # another long flag for the same argument (`--app`)
        extra["alias"] = alias
    return msgspec.Meta(description=help, extra=extra or None)


A = TypeVar("A", bound=Args)


class Plain(str):
    """A payload printed as is, for `$(...)`, when the arguments ask for it (`queue add
    --quiet`); a command whose payload is always one such string sets `plain`."""
    __slots__ = ()


@dataclass(frozen=True)
class Command(Generic[A]):
    """A command: `path` such as ("workflow", "put"), its arguments and its handler."""

    path: tuple[str, ...]
    help: str
    example: str
    args: type[A]
    # Takes the parsed arguments and the global options; returns a JSON-serialisable payload.
    handler: Callable[[A, Context], Any]
    # Human panel renderer for a terminal; the JSON payload otherwise.
    human: Callable[[Any], str] | None = None
    # Exit 1 when the payload says {"ok": false} (verify commands).
    ok_exit: bool = False
    # Exit 1, the payload printed all the same, when this says it shows damage (thread
    # list's threads whose head node is missing).
    fails: Callable[[Any], bool] | None = None
    # The handler yields lines to print as they come (log tail --follow).
    streams: bool = False
    # The payload is one string (a hash) printed as is, for `$(json-cas put ...)`.
    plain: bool = False
    # True for the arguments with which SIGTERM (or Ctrl-C) ends the command cleanly,
    # exit 0, whenever it comes (`archive sync --follow`); else SIGTERM exits 143.
    stops_on_signal: Callable[[Any], bool] | None = None

    @property
    def name(self) -> str:
        """`workflow put`: the path as one string."""
        return " ".join(self.path)


@dataclass
class Group:
    """Commands under one binary, with the help of each group."""

    prog: str
    description: str
    groups: dict[str, str]
    commands: list[Command[Any]]

    def __iter__(self) -> Iterator[Command[Any]]:
        return iter(self.commands)


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
