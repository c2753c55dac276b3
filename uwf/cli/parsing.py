"""Parse a declared command's argv: each command's `Args` Struct becomes its
argparse arguments, and the parsed values are converted back into that Struct
(`msgspec.convert`), so bounds are checked once, by the declaration. An invalid
value is one line naming the argument and what it accepts.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from uwf import __version__
from uwf.cli.process import process_redactor
from uwf.cli.quickparse import named
from uwf.config.args import Args
from uwf.errors import EXIT_USAGE
from uwf.invoker.context import GLOBAL_OPTIONS
from uwf.invoker.params import Param, invalid, params
from uwf.invoker.text import masked, one_line

if TYPE_CHECKING:
    from uwf.invoker.spec import Command, Group



class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        binary = self.prog.split()[0]
        line = f"{binary}: error: {message}; see `{self.prog} --help`"
        # argv may hold a secret, or a character that would break the line
        sys.stderr.write(one_line(masked(line, process_redactor())) + "\n")
        raise SystemExit(EXIT_USAGE)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's raw-description help, its width found as `shutil.get_terminal_size`
    finds it (COLUMNS, then the terminal, then 80) without importing shutil: argparse
    makes a formatter for every argument added, and shutil brings bz2, lzma and zlib."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _columns() - 2 if width is None else width)


def _columns() -> int:
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


# -- argparse --------------------------------------------------------------------------

def build_parser(group: Group, only: Command[Any] | None = None) -> argparse.ArgumentParser:
    """The whole command line of `group`, each command's arguments from its Struct; with
    `only`, that command's branch alone: all a command line naming it needs (the whole
    tree costs tens of milliseconds of argparse and type inspection per process)."""
    commands = group.commands if only is None else [only]  # (only: no other imported)
    parser = _Parser(
        prog=group.prog,
        description=group.description,
        formatter_class=_Formatter,
        epilog="examples:\n" + "\n".join(f"  {c.example}" for c in commands[:4]),
    )
    _global_options(parser, argparse.SUPPRESS)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the program's name and version, and exit")
    top = parser.add_subparsers(dest="_group", metavar="COMMAND", parser_class=_Parser)
    top.required = True
    subgroups: dict[str, argparse._SubParsersAction[Any]] = {}
    for command in commands:
        if len(command.path) == 1:
            target = top
        else:
            name = command.path[0]
            if name not in subgroups:
                sub = top.add_parser(name, help=group.groups.get(name, ""),
                                     description=group.groups.get(name, ""),
                                     formatter_class=_Formatter)
                subgroups[name] = sub.add_subparsers(dest="_command", metavar="SUBCOMMAND",
                                                     parser_class=_Parser)
                subgroups[name].required = True
            target = subgroups[name]
        leaf = target.add_parser(
            command.path[-1],
            help=command.help,
            description=command.help,
            epilog=f"example:\n  {command.example}",
            formatter_class=_Formatter,
        )
        for param in params(command.args):
            if param.name in GLOBAL_OPTIONS or param.name.startswith("_"):
                raise TypeError(f"{command.name}: an argument may not be named {param.name}")
            _add_argument(leaf, param)
        _global_options(leaf, argparse.SUPPRESS, shown=False)
        leaf.set_defaults(_declared=command, _parser=leaf)
    return parser


def _add_argument(parser: argparse.ArgumentParser, param: Param) -> None:
    options: dict[str, Any] = {"help": param.help.replace("%", "%%")}
    if param.metavar is not None:
        options["metavar"] = param.metavar
    if param.kind is bool:
        options["action"] = "store_true"
    elif param.kind is list:
        if param.positional:
            options["nargs"] = "+" if param.required else "*"
        else:
            options["action"] = "append"  # a list flag is given once per item
        if param.choices is not None:
            options["choices"] = list(param.choices)  # checked per item
    else:
        if param.kind is not str:
            options["type"] = param.kind  # bounds are checked on conversion to the Struct
        if param.choices is not None:
            options["choices"] = list(param.choices)
    if param.positional:
        if not param.required:
            if param.kind is not list:
                options["nargs"] = "?"
            options["default"] = param.default
        parser.add_argument(param.name, **options)
        return
    if param.required:
        options["required"] = True
    elif param.kind is not list:  # an unused list flag stays None: the Struct's default
        options["default"] = param.default
    parser.add_argument(*param.flags, dest=param.name, **options)


def _global_options(parser: argparse.ArgumentParser, default: object,
                    shown: bool = True) -> None:
    """--store, --json and --now, accepted before or after the command."""
    def text(help_text: str) -> str:
        return help_text if shown else argparse.SUPPRESS

    parser.add_argument("--store", metavar="DIR", default=default,
                        help=text("store root (default: $UWF_HOME, $XDG_STATE_HOME/uwf, "
                                  "~/.local/state/uwf)"))
    parser.add_argument("--json", action="store_true", default=default,
                        help=text("print JSON even on a terminal"))
    parser.add_argument("--format", choices=["json"], default=default,
                        help=text("`--format json` is `--json` (the run registry's spelling)"))
    parser.add_argument("--now", metavar="TIME", default=default,
                        help=text("fix the clock (RFC 3339 or epoch ms); same as UWF_NOW"))


def command_parsers(group: Group) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Each command's own parser (its arguments as argparse sees them), by path."""
    parser = build_parser(group)
    leaves: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(node: argparse.ArgumentParser) -> None:
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    walk(child)
        declared = node.get_default("_declared")
        if declared is not None:
            leaves[declared.path] = node

    walk(parser)
    return leaves


def parse(group: Group, argv: Sequence[str] | None) -> tuple[Command[Any], Args,
                                                            argparse.Namespace]:
    """The command, its arguments as its Struct, and the global options; a usage
    error (one line, exit 2) for anything argparse or the Struct refuses. (The
    console reads the plain shapes without argparse first: `uwf.cli.quickparse`.)"""
    given = sys.argv[1:] if argv is None else list(argv)
    command = named(group, given)
    return parse_with(build_parser(group, command), given)


def parse_with(parser: argparse.ArgumentParser, argv: Sequence[str]
               ) -> tuple[Command[Any], Args, argparse.Namespace]:
    """`parse` with a parser built already (the whole tree, or a command's branch)."""
    if not argv:  # no command: say what there is
        sys.stderr.write(parser.format_help())
        raise SystemExit(EXIT_USAGE)
    namespace = parser.parse_args(argv)
    command: Command[Any] = namespace._declared
    leaf: argparse.ArgumentParser = namespace._parser
    declared = params(command.args)
    values = {}
    for param in declared:
        value = getattr(namespace, param.name)
        if value is None and not param.nullable:
            continue  # a list flag never given: the field's default
        for text in value if isinstance(value, list) else [value]:
            # What no real command line holds (main(argv) is called from Python too).
            if isinstance(text, str) and (not _is_utf8(text) or "\x00" in text):
                name = "/".join(param.flags) or param.metavar or param.name
                leaf.error(f"argument {name}: {text!r} is not UTF-8 text without NUL")
        values[param.name] = value
    try:
        args = msgspec.convert(values, command.args)
    except msgspec.ValidationError as exc:
        leaf.error(invalid(exc, declared, values))
    return command, args, namespace


def _is_utf8(text: str) -> bool:
    """False for a lone surrogate: how Python passes on argv bytes that are not UTF-8,
    which no log line, node or query can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
