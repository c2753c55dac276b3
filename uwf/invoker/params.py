"""A command's arguments as every surface sees them: each field of its `Args` Struct
read once (`Param`: its name, help, kind, bounds, flags), and a value the Struct
refused said in one line (`invalid`), naming the argument as the surface names it
(the command line `argument --limit/-n`, an MCP tool `parameter limit`, a page its
own label).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import msgspec.inspect as mi

from uwf.config.args import Args

# What `arg(..., **extra)` may say about the command line.
_CLI_EXTRAS = {"positional", "short", "metavar", "expect", "alias", "ids"}


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
    ids: str | None = None  # the kind of id it holds, made whole by uwf.invoker.ids


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

