"""Parse a declared command's argv: each command's `Args` Struct becomes its
argparse arguments, and the parsed values are converted back into that Struct
(`msgspec.convert`), so bounds are checked once, by the declaration. An invalid
value is one line naming the argument and what it accepts.
"""

from __future__ import annotations

import argparse
import operator
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec
import msgspec.inspect as mi

from uwf import __version__
from uwf.cli.context import GLOBAL_OPTIONS, process_redactor
from uwf.cli.spec import Command, Group
from uwf.config.args import Args
from uwf.errors import EXIT_USAGE

if TYPE_CHECKING:
    from uwf.redact import Redact

# What `arg(..., **extra)` may say about the command line.
_CLI_EXTRAS = {"positional", "short", "metavar", "expect", "alias", "ids"}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        binary = self.prog.split()[0]
        line = f"{binary}: error: {message}; see `{self.prog} --help`"
        # argv may hold a secret, or a character that would break the line
        sys.stderr.write(one_line(masked(line, process_redactor())) + "\n")
        raise SystemExit(EXIT_USAGE)


# -- the declaration, as the command line sees it ----------------------------------

class Param(msgspec.Struct, frozen=True):
    """One field of an `Args` Struct, read for the command line (a Struct: a dataclass
    would compile its methods at every start-up)."""

    name: str  # the field's encoded name: argparse's dest, the schema's property
    help: str
    kind: type  # str, int, float, bool, or list (of str)
    required: bool
    default: Any
    nullable: bool
    choices: tuple[Any, ...] | None
    positional: bool
    flags: tuple[str, ...]  # empty for a positional
    metavar: str | None
    bounds: tuple[tuple[str, float], ...]  # ("ge", 0), ("gt", 0), ...
    expect: str | None = None  # what a value that misses the pattern must be
    ids: str | None = None  # the kind of id it holds, made whole by uwf.cli.ids


_PARAMS: dict[type[Args], tuple[Param, ...]] = {}


def params(args: type[Args]) -> tuple[Param, ...]:
    """The arguments a command declares, in declaration order."""
    found = _PARAMS.get(args)
    if found is None:
        info = mi.type_info(args)
        assert isinstance(info, mi.StructType)
        found = _PARAMS[args] = tuple(_param(args, field) for field in info.fields)
    return found


def _param(args: type[Args], field: mi.Field) -> Param:
    where = f"{args.__name__}.{field.name}"
    help_text: str | None = None
    extra: dict[str, Any] = {}
    nullable = False
    kind_info: mi.Type = field.type
    while True:  # peel Annotated metadata and `| None`, outermost first
        if isinstance(kind_info, mi.Metadata):
            if help_text is None:
                help_text = (kind_info.extra_json_schema or {}).get("description")
            extra = {**(kind_info.extra or {}), **extra}
            kind_info = kind_info.type
        elif isinstance(kind_info, mi.UnionType):
            others = [t for t in kind_info.types if not isinstance(t, mi.NoneType)]
            if len(others) != 1 or len(others) == len(kind_info.types):
                raise TypeError(f"{where}: only `X | None` unions can be command arguments")
            nullable = True
            kind_info = others[0]
        else:
            break
    if not help_text:
        raise TypeError(f"{where}: every argument needs help: Annotated[..., arg('...')]")
    if unknown := set(extra) - _CLI_EXTRAS:
        raise TypeError(f"{where}: unknown command-line details {sorted(unknown)}")
    kind, choices, bounds = _kind(where, kind_info)
    if field.default is not msgspec.NODEFAULT:
        default = field.default
    elif field.default_factory is not msgspec.NODEFAULT:
        default = field.default_factory()
    else:
        default = None
    positional = bool(extra.get("positional"))
    if kind is bool and (positional or field.required or default is not False):
        raise TypeError(f"{where}: a bool argument is a flag defaulting to False")
    if positional:
        flags: tuple[str, ...] = ()
    else:
        long = f"--{field.encode_name.replace('_', '-')}"
        flags = (f"-{field.encode_name}",) if len(field.encode_name) == 1 else (long,)
        if short := extra.get("short"):
            flags = (short, *flags)
        if alias := extra.get("alias"):
            flags = (*flags, alias)
    return Param(field.encode_name, help_text, kind, field.required, default, nullable,
                 choices, positional, flags, extra.get("metavar"), bounds, extra.get("expect"),
                 extra.get("ids"))


def _kind(where: str, info: mi.Type) -> tuple[type, tuple[Any, ...] | None,
                                              tuple[tuple[str, float], ...]]:
    if isinstance(info, mi.IntType | mi.FloatType):
        bounds = tuple((name, value) for name in ("ge", "gt", "le", "lt")
                       if (value := getattr(info, name)) is not None)
        return (int if isinstance(info, mi.IntType) else float), None, bounds
    if isinstance(info, mi.StrType):
        return str, None, ()
    if isinstance(info, mi.BoolType):
        return bool, None, ()
    if isinstance(info, mi.LiteralType):
        kinds = {type(value) for value in info.values}
        if len(kinds) != 1 or not kinds <= {str, int}:
            raise TypeError(f"{where}: choices must all be strings or all integers")
        return kinds.pop(), info.values, ()
    if isinstance(info, mi.ListType) and isinstance(info.item_type, mi.StrType):
        return list, None, ()
    if (isinstance(info, mi.ListType) and isinstance(info.item_type, mi.LiteralType)
            and all(isinstance(value, str) for value in info.item_type.values)):
        return list, info.item_type.values, ()  # a repeatable flag of choices
    raise TypeError(f"{where}: a command argument is str, int, float, bool, list[str], a "
                    "Literal or a list of string Literals")


# -- argparse --------------------------------------------------------------------------

def build_parser(group: Group, only: Command[Any] | None = None) -> argparse.ArgumentParser:
    """The whole command line of `group`, each command's arguments from its Struct; with
    `only`, that command's branch alone: all a command line naming it needs (the whole
    tree costs tens of milliseconds of argparse and type inspection per process)."""
    commands = group.commands if only is None else [only]  # (only: no other imported)
    parser = _Parser(
        prog=group.prog,
        description=group.description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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


# The global options before a command, and whether each takes a value.
_GLOBALS = {"--store": True, "--json": False, "--format": True, "--now": True}


def named(group: Group, argv: Sequence[str]) -> Command[Any] | None:
    """The command `argv` names, read as argparse reads it (global options and their
    values first, abbreviated or not); None when that takes argparse itself (help, an
    unknown or incomplete command, anything unusual)."""
    at = 0
    while at < len(argv) and argv[at].startswith("-"):
        name, equals, _ = argv[at].partition("=")
        found = [option for option in _GLOBALS if option.startswith(name)]
        if len(name) < 3 or not name.startswith("--") or len(found) != 1:
            return None
        at += 2 if _GLOBALS[found[0]] and not equals else 1
    words = tuple(argv[at:at + 2])
    if not words:
        return None
    for command in group.named(words[0]):  # only the declarations that may hold it
        if words[:len(command.path)] == command.path:
            return command
    return None


def parse(group: Group, argv: Sequence[str] | None) -> tuple[Command[Any], Args,
                                                            argparse.Namespace]:
    """The command, its arguments as its Struct, and the global options; a usage
    error (one line, exit 2) for anything argparse or the Struct refuses."""
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


def flag_name(param: Param) -> str:
    """How the command line names an argument: `argument --limit/-n`."""
    return "argument " + ("/".join(param.flags) or param.metavar or param.name)


def invalid(exc: msgspec.ValidationError, declared: Sequence[Param],
            values: dict[str, Any], naming: Callable[[Param], str] = flag_name) -> str:
    """argparse's wording for a value the Struct refused: `argument -n: must be 0 or
    more, not -1`. `naming` says how the surface names an argument (an MCP tool names
    its parameter, as its input schema does)."""
    text = str(exc)
    if unknown := re.fullmatch(r"Object contains unknown field `(.+)`", text):
        known = ", ".join(p.name for p in declared) or "none"
        return f"unknown parameter {unknown[1]!r} (the parameters: {known})"
    match = re.search(r" - at `\$\.(\w+)(\[)?", text)
    param = next((p for p in declared if match and p.name == match[1]), None)
    if param is None:
        return text
    name = naming(param)
    value = values.get(param.name)
    if wrong := re.match(r"Expected `([^`]+)`, got `(\w+)`", text):  # not JSON's type
        expected = " or ".join(_KIND_WORDS.get(kind, kind) for kind in wrong[1].split(" | "))
        each = "each item " if match and match[2] else ""  # `$.tags[0]`: an item of a list
        return f"{name}: {each}must be {expected}, not {_shown(value)}"
    if "matching regex" in text and param.expect:
        return f"{name}: {value!r} is not {param.expect}"
    if "matching regex" in text and param.metavar:  # say what the pattern means
        return f"{name}: must be {param.metavar}, not {value!r}"
    if not param.bounds:
        return f"{name}: {text.partition(' - at ')[0]}"
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    text = f"{name}: {_violated(param.bounds, value)}, not {shown}"
    lower = [(op, limit) for op, limit in param.bounds if op in ("ge", "gt")]
    upper = [(op, limit) for op, limit in param.bounds if op in ("le", "lt")]
    # A float: name the whole range, as nan or inf break both ends.
    if lower and upper and isinstance(value, float):
        low = ("more than " if lower[0][0] == "gt" else "") + _number(lower[0][1])
        high = ("less than " if upper[0][0] == "lt" else "") + _number(upper[0][1])
        text += f" (range: {low} to {high})"
    return text


# msgspec's names of the JSON types a value was not, in words.
_KIND_WORDS = {"int": "an integer", "float": "a number", "str": "a string",
               "bool": "true or false", "array": "a list", "object": "an object",
               "null": "null"}


def _shown(value: Any) -> str:
    """A value a caller gave, shown as JSON writes it (`"many"`, `null`, `[1]`)."""
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


_BOUND_WORDS = {"ge": "{} or more", "gt": "more than {}", "le": "at most {}", "lt": "less than {}"}
_BOUND_HOLDS = {"ge": operator.ge, "gt": operator.gt, "le": operator.le, "lt": operator.lt}


def _violated(bounds: Sequence[tuple[str, float]], value: Any) -> str:
    """`must be 0 or more`: the first bound `value` breaks (nan breaks every one)."""
    for op, limit in bounds:
        if not (isinstance(value, int | float) and _BOUND_HOLDS[op](value, limit)):
            if (op, limit) == ("gt", 0):
                return "must be positive"
            return "must be " + _BOUND_WORDS[op].format(_number(limit))
    return "must be " + " and ".join(_BOUND_WORDS[op].format(_number(limit))
                                     for op, limit in bounds)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


_UNPRINTABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """`text` as one line: a control character a value brought in (a file name, an
    argument) is shown escaped, as Python writes it (`\\n`, `\\x1e`)."""
    return _UNPRINTABLE.sub(lambda found: repr(found[0])[1:-1], text)


def masked(text: str, redact: Redact | None) -> str:
    return redact(text) if redact is not None else text


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
