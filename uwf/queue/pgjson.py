"""The JSON msgspec writes for a struct, written by the server (issue 31).

A struct becomes a composite type on the server, generated from its msgspec definition:
one attribute a field, named as the field is in the JSON, in the struct's order, typed
as its values (a string `text`, an integer `bigint`, a boolean `boolean`, a list of
strings or integers an array, a nested struct its own composite type, an optional
value the type of what it holds). `json_populate_record` reads a stored value into a
record of that type, and `to_json` of the record prints what msgspec prints: every
field in order, compact, strings escaped alike (tests/contract/test_pgcalls.py holds the two to
the same bytes). Two calls where a field-by-field expression was set up again on every
call (a procedure's statements are prepared once a session, their expressions once a
transaction, and each call is one).

Each type's name holds a digest of its definition, so a changed struct is a new type,
and two versions of uwf side by side never replace each other's.
"""

from __future__ import annotations

import hashlib

import msgspec
from msgspec import inspect


def struct_info(kind: type[msgspec.Struct]) -> inspect.StructType:
    found = inspect.type_info(kind)
    assert isinstance(found, inspect.StructType)
    return found


def record_type(kind: type[msgspec.Struct]) -> tuple[str, list[str]]:
    """The composite type of `kind` on the server: its name, and the statements that
    create it and the types it holds (each doing nothing when the type is there)."""
    creates: list[str] = []
    return _struct_type(struct_info(kind), creates), creates


def _struct_type(kind: inspect.StructType, creates: list[str]) -> str:
    config = kind.cls.__struct_config__
    if config.omit_defaults or kind.array_like or kind.tag_field:
        raise TypeError(f"no composite type for {kind.cls.__name__}: msgspec leaves fields "
                        "out or writes it as an array")
    attributes = ", ".join(f'"{field.encode_name}" {_type(field.type, creates)}'
                           for field in kind.fields)
    digest = hashlib.sha256(attributes.encode()).hexdigest()[:10]
    name = f"uwf_r_{kind.cls.__name__.lower()}_{digest}"
    creates.append(f"DO $type$ BEGIN CREATE TYPE {name} AS ({attributes}); "
                   "EXCEPTION WHEN duplicate_object THEN NULL; END $type$")
    return name


def _type(kind: inspect.Type, creates: list[str]) -> str:
    if isinstance(kind, inspect.StrType):
        return "text"
    if isinstance(kind, inspect.IntType):
        return "bigint"
    if isinstance(kind, inspect.BoolType):
        return "boolean"
    if isinstance(kind, inspect.UnionType):
        others = [member for member in kind.types if not isinstance(member, inspect.NoneType)]
        if len(others) == 1:
            return _type(others[0], creates)
    if isinstance(kind, inspect.ListType) and isinstance(
            kind.item_type, inspect.StrType | inspect.IntType):
        return _type(kind.item_type, creates) + "[]"
    if isinstance(kind, inspect.StructType):
        return _struct_type(kind, creates)
    raise TypeError(f"no SQL type for a value of {kind!r}")


def json_text(kind: type[msgspec.Struct], values: dict[str, str]) -> str:
    """SQL text: the JSON msgspec writes for a `kind` whose fields (by attribute name)
    hold the SQL expressions `values`, concatenated in the struct's order: for a struct
    of strings, integers and booleans (or None), such as an event's data, where a record
    would be set up for four fields."""
    parts = []
    for number, field in enumerate(struct_info(kind).fields):
        expr = values[field.name]
        parts.append(f"'{'{' if number == 0 else ','}\"{field.encode_name}\":' || "
                     f"coalesce({_scalar(field.type, expr)}, 'null')")
    if set(values) - {field.name for field in struct_info(kind).fields}:
        raise TypeError(f"{kind.__name__} has no field {sorted(values)!r}")
    return "(" + " || ".join(parts) + " || '}')"


def _scalar(kind: inspect.Type, expr: str) -> str:
    if isinstance(kind, inspect.UnionType):
        others = [member for member in kind.types if not isinstance(member, inspect.NoneType)]
        if len(others) == 1:
            return _scalar(others[0], expr)
    if isinstance(kind, inspect.StrType):
        return f"to_json(({expr})::text)::text"
    if isinstance(kind, inspect.IntType):
        return f"(({expr})::bigint)::text"
    if isinstance(kind, inspect.BoolType):
        return f"(({expr})::boolean)::text"
    raise TypeError(f"no JSON by concatenation for a value of {kind!r}")
