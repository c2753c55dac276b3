"""Run one declared command and print its result (its argv is parsed by
`uwf.cli.parsing`).

stdout carries the result (JSON with --json or when
not a terminal, a terse panel on a terminal); stderr carries one-line errors
`<prog>: error: <what>; <next action>` with the spec's exit codes, and never a
traceback unless UWF_DEBUG=1. Secret values are masked in both.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from uwf.cli.process import process_redactor, working_folder
from uwf.cli.termination import TERMINATION as _TERMINATION
from uwf.cli.termination import Terminated, install_termination
from uwf.config.args import Args
from uwf.errors import EXIT_REJECTED, EXIT_USAGE, UwfError
from uwf.invoker.context import Context
from uwf.invoker.invoke import invoke
from uwf.invoker.spec import Command, Group
from uwf.payload import Plain, to_payload

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from uwf.cli.progress import Bars
    from uwf.engine.feature import Feature
    from uwf.redact import Redact

from uwf.cli.quickparse import Options, quick_parse
from uwf.invoker.text import masked, one_line

# -- output ----------------------------------------------------------------------------

def _is_terminal() -> bool:
    return sys.stdout.isatty()


def terminal_bars(environ: Mapping[str, str]) -> Bars | None:
    """Progress bars on stderr when it is a terminal (uwf.cli.progress, imported only
    then), drawn after UWF_PROGRESS_DELAY seconds (default 0.5); None, and nothing
    drawn, when it is piped."""
    try:
        on_terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return None
    if not on_terminal:
        return None
    from uwf.cli.progress import DELAY, Bars

    try:
        delay = float(environ.get("UWF_PROGRESS_DELAY", DELAY))
    except ValueError:
        delay = DELAY
    return Bars(sys.stderr, max(0.0, delay))


def dump_json(payload: Any) -> str:
    """`json.dumps(payload, ensure_ascii=False, indent=2)`, written by msgspec when that
    gives the same text (plain JSON values: no float in exponent form, no NaN, no key
    but a string, nothing but dict, list, str, int, bool, None); `json` (about 5 million
    instructions to import) only for the rest."""
    if _msgspec_writes_alike(payload):
        try:
            return msgspec.json.format(msgspec.json.encode(payload), indent=2).decode()
        except (TypeError, ValueError, msgspec.EncodeError):  # a lone surrogate, ...
            pass
    import json

    return json.dumps(payload, ensure_ascii=False, indent=2)


_PLAIN = frozenset((str, int, bool, type(None)))


def _msgspec_writes_alike(value: Any) -> bool:
    """Whether msgspec writes `value` as `json.dumps` does (they differ in a float's
    exponent, `1e16` against `1e+16`, and in NaN, which json writes and msgspec nulls)."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is float:
        return math.isfinite(value) and "e" not in repr(value)
    if kind is list or kind is tuple:
        return all(_msgspec_writes_alike(item) for item in value)
    if kind is dict:
        return all(type(key) is str and _msgspec_writes_alike(item)
                   for key, item in value.items())
    return False


def panel(payload: Any, indent: str = "") -> str:
    """A terse human rendering of any payload: key/value lines, a nested object as an
    indented block under its key, a list of objects as a table (or, when they nest
    further, a block each); `-` for null, never `None`."""
    if isinstance(payload, list):
        return "\n".join(_items(payload, indent))
    if isinstance(payload, dict):
        return "\n".join(_pairs(payload, indent))
    return indent + scalar(payload)


def _pairs(mapping: dict[Any, Any], indent: str) -> list[str]:
    if not mapping:
        return [indent + "(none)"]
    width = max(len(str(key)) for key in mapping)
    lines = []
    for key, value in mapping.items():
        if _inline(value):
            lines.append(f"{indent}{key!s:<{width}}  {inline(value)}".rstrip())
        else:  # an object, or a list of them: a block under its key
            lines.append(f"{indent}{key}")
            lines.extend(panel(value, indent + "  ").split("\n"))
    return lines


def _items(rows: list[Any], indent: str) -> list[str]:
    """A list: a table of flat objects, a block per object that nests, else a line each."""
    if not rows:
        return [indent + "(none)"]
    if not all(isinstance(row, dict) for row in rows):
        return [indent + inline(row) for row in rows]
    if all(_inline(value) for row in rows for value in row.values()):
        return [indent + line for line in table(rows).split("\n")]
    lines = []
    for row in rows:
        block = _pairs(row, indent + "  ")
        lines.append(indent + "- " + block[0][len(indent) + 2:])
        lines.extend(block[1:])
    return lines


def _inline(value: Any) -> bool:
    """Whether `value` fits on its key's line: a scalar, an empty object or list, or a
    list of scalars."""
    if isinstance(value, dict):
        return not value
    if isinstance(value, list):
        return all(not isinstance(item, dict | list) for item in value)
    return True


def inline(value: Any) -> str:
    """`value` on one line: a scalar as text, a list of scalars comma-separated, a small
    object as `key=value` pairs (a table cell)."""
    if isinstance(value, list):
        return ", ".join(inline(item) for item in value) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{key}={inline(item)}" for key, item in value.items()) or "(none)"
    return scalar(value)


def scalar(value: Any) -> str:
    """A string as is; null as `-`; true, false and numbers as JSON writes them."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    import json  # a terminal's panel only

    return json.dumps(value, ensure_ascii=False)


def table(rows: Sequence[Any]) -> str:
    if not rows:
        return "(none)"
    if not all(isinstance(row, dict) for row in rows):
        return "\n".join(inline(row) for row in rows)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[inline(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in
              enumerate(columns)]
    head = "  ".join(column.upper().ljust(widths[i]) for i, column in enumerate(columns))
    body = ["  ".join(value.ljust(widths[i]) for i, value in enumerate(line)) for line in cells]
    return "\n".join([head.rstrip(), *(line.rstrip() for line in body)])


def page_footer(total: int, offset: int, shown: int, nouns: tuple[str, str],
                note: str = "") -> str:
    """Where a page is in the whole: `showing 1-50 of 10,009 entries; next page:
    --offset 50` (`nouns`: one, many; `note` follows them, as ` (home)`)."""
    noun = nouns[0] if total == 1 else nouns[1]
    if not shown:
        return f"{total:,} {noun}{note}" + (f"; none from --offset {offset}"
                                            if offset and total else "")
    text = f"showing {offset + 1:,}-{offset + shown:,} of {total:,} {noun}{note}"
    if offset + shown < total:
        text += f"; next page: --offset {offset + shown}"
    return text


def render_text(command: Command[Any], result: Any, as_json: bool, redact: Redact | None
                ) -> str:
    """The text of `result`, a payload (`to_payload`'s): plain, JSON or a panel."""
    plain = command.plain or isinstance(result, Plain)
    if command.exact and as_json:
        redact = None  # stored content, printed for a pipe: exactly as stored
    if redact is not None:
        from uwf.redact import redact_value

        # The payload first (a secret JSON escapes would slip past the text), then the text.
        result = redact_value(result, redact)
    if plain:
        text = str(result)
    elif as_json or command.human is None:
        text = dump_json(result) if as_json else panel(result)
    else:
        text = command.human(result)
    return masked(text, redact)


# -- running ---------------------------------------------------------------------------

def run(group: Group, argv: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        features: Sequence[Feature] | None = None, cwd: Path | None = None) -> int:
    """Parse, dispatch, print; return the exit code.

    Touches no process-wide state (environment, signal handlers), so it can run
    many commands in one process; `console` is the console scripts' entry point.
    `environ` is the command's environment (default: a copy of this process's);
    `features` the features of the store it opens (default: uwf's, `uwf.features`);
    `cwd` its working folder (default: this process's), which its relative paths are of.
    """
    command: Command[Any] | None = None
    args: Args | None = None
    try:
        try:
            command, args, options = _parse(group, argv)
        except SystemExit as exc:  # --help, or a usage error printed: no exception leaks
            if isinstance(exc, Terminated):
                raise
            code = exc.code if isinstance(exc.code, int) else EXIT_USAGE if exc.code else 0
            signum = _TERMINATION.release()
            return 128 + signum if signum else code
        if signum := _TERMINATION.release():  # it came before the command was known
            raise Terminated(128 + signum)
        return _run(command, args, options, group, environ=environ, features=features,
                    cwd=cwd)
    except Terminated as exc:
        return exc.exit_code(command, args)


def _parse(group: Group, argv: Sequence[str] | None
           ) -> tuple[Command[Any], Args, Options | argparse.Namespace]:
    """The command line read: its plain shapes without argparse (`uwf.cli.quickparse`),
    the rest by argparse (`uwf.cli.parsing`, imported only then)."""
    given = sys.argv[1:] if argv is None else list(argv)
    if (quick := quick_parse(group, given)) is not None:
        return quick
    from uwf.cli.parsing import parse

    return parse(group, given)


def _run(command: Command[Any], args: Args, options: Options | argparse.Namespace,
         group: Group, *,
         environ: Mapping[str, str] | None = None,
         features: Sequence[Feature] | None = None, cwd: Path | None = None) -> int:
    json_flag = getattr(options, "json", False) is True or _option(options, "format") == "json"
    as_json = json_flag or not _is_terminal()
    context: Context | None = None
    # The command's environment (UWF_DEBUG, the bars'), never the process's behind it.
    environ = dict(os.environ) if environ is None else environ
    debug = environ.get("UWF_DEBUG") == "1"
    # None unless stderr is a terminal: then nothing is drawn.
    bars = terminal_bars(environ)
    try:
        # A malformed --now / UWF_NOW is a usage error here, before any work.
        context = Context(store_root=_option(options, "store"), json=json_flag,
                          now=_option(options, "now"), terminal=not as_json,
                          progress=bars.bar("rebuilding views") if bars else None, bars=bars,
                          environ=dict(os.environ) if environ is None else environ,
                          cwd=working_folder() if cwd is None else cwd, features=features,
                          commands=group)
        try:
            result = invoke(command, args, context,
                            each_line=_printer(context) if command.streams else None)
            if command.streams:
                return 0
            result = to_payload(result)  # what --json prints: a typed result's dict
            text = render_text(command, result, as_json, context.redact)
            if not as_json and command.after is not None and not isinstance(result, Plain):
                more = command.after(args, context, result)
                if more:
                    text += "\n\n" + masked(more, context.redact)
        finally:
            if bars is not None:
                bars.close()
            context.close()
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return EXIT_REJECTED if command.failed(result) else 0
    except UwfError as exc:
        if debug:
            raise
        _error(f"{group.prog}: error: {exc.line()}", context)
        return exc.exit_code
    except KeyboardInterrupt:
        return 0 if command.stops_on_signal is not None and command.stops_on_signal(args) else 130
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except Exception as exc:
        if debug:
            raise
        _error(f"{group.prog}: error: internal error ({type(exc).__name__}: {exc}); "
               "rerun with UWF_DEBUG=1 and report it", context)
        return EXIT_REJECTED


def console(group: Group, argv: Sequence[str] | None = None,
            environ: Mapping[str, str] | None = None,
            features: Sequence[Feature] | None = None, cwd: Path | None = None) -> int:
    """A console script's `main`: with `argv` None (the `uwf` / `json-cas` executable)
    install the SIGTERM handler and exit; with `argv`, run in-process (in `environ`,
    default this process's environment, on a store of `features`, default uwf's, in
    the working folder `cwd`, default this process's) and return."""
    if argv is not None:
        return run(group, argv, environ, features, cwd)
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (uwf.cli.completion)
        from uwf.cli.completion import answer

        answer(group)
    # SIGTERM unwinds like Ctrl-C, so a running step kills its agent and says so; one
    # that comes while the command line is read waits until the command is known. The
    # console scripts (uwf.cli.entry) install it before this module is even imported.
    install_termination()
    sys.exit(run(group, None, environ, features))


def _option(options: Options | argparse.Namespace, name: str) -> str | None:
    value = getattr(options, name, None)
    return value if isinstance(value, str) else None


def _error(line: str, context: Context | None) -> None:
    redact = context.redact if context is not None else process_redactor()
    sys.stderr.write(one_line(masked(line, redact)) + "\n")


def _printer(context: Context) -> Callable[[str], None]:
    """A streaming command's lines printed as they come, secrets masked."""

    def print_line(line: str) -> None:
        sys.stdout.write(masked(line, context.redact) + "\n")
        sys.stdout.flush()

    return print_line


def _silence_stdout() -> None:
    # Python flushes stdout at exit; point it at /dev/null so a closed pipe stays quiet.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
