"""The common command line read without argparse: global options spelled out in full,
the command's words, then only its required string positionals (`uwf workflow show
NAME`, `uwf thread show ID`). Anything else (an option after the command, `--help`, an
abbreviation, a value argparse would refuse or convert) is `None` here, and
`uwf.cli.parsing` reads it with argparse as before, with argparse's help and errors.

argparse costs a read-only command more than its own work: importing it (and the
gettext and locale its messages bring) and building the command's branch of parsers
is about 20 million instructions, some 7 % of `uwf workflow show` (docs/benchmarks.md).
What this module returns is what argparse returns for the same argv: the same
command, the same `Args` (converted by `msgspec.convert` as `parse_with` does), the
same global options.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from uwf.invoker.params import params

if TYPE_CHECKING:
    from uwf.config.args import Args
    from uwf.invoker.spec import Command, Group

# The global options before a command, and whether each takes a value.
GLOBALS = {"--store": True, "--json": False, "--format": True, "--now": True}


class Options:
    """The global options given (as attributes; one not given is absent, as in the
    namespace argparse returns: `--store`, `--json`, `--format`, `--now`)."""

    def __init__(self, given: dict[str, Any]) -> None:
        self.__dict__.update(given)

    def __repr__(self) -> str:
        return f"Options({self.__dict__!r})"


def named(group: Group, argv: Sequence[str]) -> Command[Any] | None:
    """The command `argv` names, read as argparse reads it (global options and their
    values first, abbreviated or not); None when that takes argparse itself (help, an
    unknown or incomplete command, anything unusual)."""
    at = 0
    while at < len(argv) and argv[at].startswith("-"):
        name, equals, _ = argv[at].partition("=")
        found = [option for option in GLOBALS if option.startswith(name)]
        if len(name) < 3 or not name.startswith("--") or len(found) != 1:
            return None
        at += 2 if GLOBALS[found[0]] and not equals else 1
    words = tuple(argv[at:at + 2])
    if not words:
        return None
    for command in group.named(words[0]):  # only the declarations that may hold it
        if words[:len(command.path)] == command.path:
            return command
    return None


def _globals(argv: Sequence[str]) -> tuple[dict[str, Any], int] | None:
    """The global options at the start of `argv`, each spelled in full, and where the
    command starts; None for anything argparse should read."""
    given: dict[str, Any] = {}
    at = 0
    while at < len(argv) and argv[at].startswith("-"):
        name, equals, value = argv[at].partition("=")
        takes = GLOBALS.get(name)
        if takes is None:
            return None
        if not takes:
            if equals:
                return None
            given[name[2:]] = True
            at += 1
            continue
        if not equals:
            if at + 1 >= len(argv):
                return None
            value = argv[at + 1]
            at += 1
        if value.startswith("-") or (name == "--format" and value != "json"):
            return None
        given[name[2:]] = value
        at += 1
    return given, at


def quick_parse(group: Group, argv: Sequence[str]
                ) -> tuple[Command[Any], Args, Options] | None:
    """`argv` read as `uwf.cli.parsing.parse` reads it, when it is the plain shape this
    module reads; None otherwise (argparse reads it then, and says what is wrong)."""
    found = _globals(argv)
    if found is None:
        return None
    given, at = found
    command = named(group, argv[at:])
    if command is None:
        return None
    rest = argv[at + len(command.path):]
    if any(word.startswith("-") for word in rest):
        return None
    declared = params(command.args)
    positionals = [param for param in declared if param.positional]
    if len(rest) != len(positionals) or any(
            param.kind is not str or not param.required or param.choices is not None
            for param in positionals):
        return None
    if any(param.required and not param.positional for param in declared) or not all(
            _plain_text(word) for word in rest):
        return None
    # A flag not given is left out: argparse's default for it is the field's (`params`).
    values = {param.name: word for param, word in zip(positionals, rest, strict=True)}
    try:
        args = msgspec.convert(values, command.args)
    except msgspec.ValidationError:
        return None
    return command, args, Options(given)


def _plain_text(text: str) -> bool:
    """UTF-8 text without NUL (argparse's path refuses anything else, with its message)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
