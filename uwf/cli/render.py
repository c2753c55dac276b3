"""Render declared commands to argparse, run one, and print its result.

stdout carries the result (JSON with --json or when not a terminal, a terse
panel on a terminal); stderr carries one-line errors `<prog>: error: <what>;
<next action>` with the spec's exit codes, and never a traceback unless
UWF_DEBUG=1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from uwf.cli.spec import Command, Group
from uwf.errors import EXIT_REJECTED, EXIT_USAGE, UwfError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        binary = self.prog.split()[0]
        sys.stderr.write(f"{binary}: error: {message}; see `{self.prog} --help`\n")
        raise SystemExit(EXIT_USAGE)


def build_parser(group: Group) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=group.prog,
        description=group.description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n" + "\n".join(f"  {c.example}" for c in group.commands[:4]),
    )
    _global_options(parser, argparse.SUPPRESS)
    top = parser.add_subparsers(dest="_group", metavar="COMMAND", parser_class=_Parser)
    top.required = True
    subgroups: dict[str, argparse._SubParsersAction[Any]] = {}
    for command in group.commands:
        if len(command.path) == 1:
            target = top
        else:
            name = command.path[0]
            if name not in subgroups:
                sub = top.add_parser(name, help=group.groups.get(name, ""),
                                     description=group.groups.get(name, ""))
                subgroups[name] = sub.add_subparsers(dest="_command", metavar="SUBCOMMAND",
                                                     parser_class=_Parser)
                subgroups[name].required = True
            target = subgroups[name]
        leaf = target.add_parser(
            command.path[-1],
            help=command.help,
            description=command.help,
            epilog=f"example:\n  {command.example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        for spec in command.args:
            leaf.add_argument(*spec.flags, help=spec.help, **spec.options)
        _global_options(leaf, argparse.SUPPRESS, shown=False)
        leaf.set_defaults(_declared=command)
    return parser


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
    parser.add_argument("--now", metavar="TIME", default=default,
                        help=text("fix the clock (RFC 3339 or epoch ms); same as UWF_NOW"))


def _is_terminal() -> bool:
    return sys.stdout.isatty()


def dump_json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, indent=2)


def panel(payload: Any) -> str:
    """A terse human rendering of any payload: key/value lines or a table."""
    if isinstance(payload, list):
        return table(payload)
    if isinstance(payload, dict):
        width = max((len(str(key)) for key in payload), default=0)
        lines = []
        for key, value in payload.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"{key:<{width}}  {shown}")
        return "\n".join(lines)
    return str(payload)


def table(rows: Sequence[Any]) -> str:
    if not rows:
        return "(none)"
    if not all(isinstance(row, dict) for row in rows):
        return "\n".join(str(row) for row in rows)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in
              enumerate(columns)]
    head = "  ".join(column.upper().ljust(widths[i]) for i, column in enumerate(columns))
    body = ["  ".join(value.ljust(widths[i]) for i, value in enumerate(line)) for line in cells]
    return "\n".join([head.rstrip(), *(line.rstrip() for line in body)])


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def run(group: Group, argv: Sequence[str] | None = None) -> int:
    """Parse, dispatch, print; return the exit code."""
    parser = build_parser(group)
    args = parser.parse_args(argv)
    for name, default in (("store", None), ("json", False), ("now", None)):
        if not hasattr(args, name):
            setattr(args, name, default)
    command: Command = args._declared
    if args.now:
        os.environ["UWF_NOW"] = args.now
    as_json = args.json or not _is_terminal()
    # SIGTERM unwinds like Ctrl-C, so a running step kills its agent and says so.
    signal.signal(signal.SIGTERM, _terminate)
    try:
        if os.environ.get("UWF_NOW"):
            from uwf.engine.clock import clock_from

            clock_from(None, os.environ)  # a malformed --now / UWF_NOW: a usage error now
        result = command.handler(args)
        if command.streams:
            _stream(result)
            return 0
        if command.plain:
            text = str(result)
        elif as_json or command.human is None:
            text = dump_json(result) if as_json else panel(result)
        else:
            text = command.human(result)
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        if command.ok_exit and isinstance(result, dict) and result.get("ok") is False:
            return EXIT_REJECTED
        return 0
    except UwfError as exc:
        if os.environ.get("UWF_DEBUG") == "1":
            raise
        sys.stderr.write(f"{group.prog}: error: {exc.line()}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except Exception as exc:
        if os.environ.get("UWF_DEBUG") == "1":
            raise
        sys.stderr.write(
            f"{group.prog}: error: internal error ({type(exc).__name__}: {exc}); "
            "rerun with UWF_DEBUG=1 and report it\n"
        )
        return EXIT_REJECTED


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _stream(lines: Iterable[str]) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _silence_stdout() -> None:
    # Python flushes stdout at exit; point it at /dev/null so a closed pipe stays quiet.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
