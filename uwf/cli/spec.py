"""A command, declared once: name, arguments, help, example, and a handler.

The handler takes the parsed arguments and returns a JSON-serialisable payload;
the CLI renders it, and other surfaces (an MCP server) can call the same handler.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Arg:
    """One argument, in argparse's terms."""

    flags: tuple[str, ...]
    help: str
    options: dict[str, Any] = field(default_factory=dict)


def arg(*flags: str, help: str, **options: Any) -> Arg:
    return Arg(flags, help, options)


Handler = Callable[[argparse.Namespace], Any]


@dataclass(frozen=True)
class Command:
    """A command: `path` such as ("workflow", "put")."""

    path: tuple[str, ...]
    help: str
    example: str
    handler: Handler
    args: tuple[Arg, ...] = ()
    # Human panel renderer for a terminal; the JSON payload otherwise.
    human: Callable[[Any], str] | None = None
    # Exit 1 when the payload says {"ok": false} (verify commands).
    ok_exit: bool = False
    # The handler yields lines to print as they come (log tail --follow).
    streams: bool = False
    # The payload is one string (a hash) printed as is, for `$(json-cas put ...)`.
    plain: bool = False


@dataclass
class Group:
    """Commands under one binary, with the help of each group."""

    prog: str
    description: str
    groups: dict[str, str]
    commands: list[Command]

    def __iter__(self) -> Iterator[Command]:
        return iter(self.commands)
