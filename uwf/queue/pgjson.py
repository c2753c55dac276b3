"""The JSON msgspec writes for a struct, written by the server (issue 31).

`json_text`: a struct's JSON concatenated from SQL expressions, field by field in the
struct's order (an event's data). `Splice` (uwf/engine/pgsplice.py, where the view
store's overlays use it too): a stored struct's JSON edited without parsing it. What
the server writes is msgspec's bytes: tests/contract/test_pgcalls.py holds the two to
the same bytes, escapes, nested records and integers past 32 bits included.
"""

from __future__ import annotations

from typing import Any

import msgspec

from uwf.engine.pgsplice import Splice, struct_fields, union_members

__all__ = ["Splice", "json_text", "renamed_first", "struct_fields"]


def json_text(kind: type[msgspec.Struct], values: dict[str, str]) -> str:
    """SQL text: the JSON msgspec writes for a `kind` whose fields (by attribute name)
    hold the SQL expressions `values`, concatenated in the struct's order: for a struct
    of strings, integers and booleans (or None), such as an event's data, where a record
    would be set up for four fields."""
    parts = []
    fields = struct_fields(kind)
    for number, field in enumerate(fields):
        expr = values[field.name]
        parts.append(f"'{'{' if number == 0 else ','}\"{field.encode_name}\":' || "
                     f"coalesce({_scalar(field.type, expr)}, 'null')")
    if set(values) - {field.name for field in fields}:
        raise TypeError(f"{kind.__name__} has no field {sorted(values)!r}")
    return "(" + " || ".join(parts) + " || '}')"


def renamed_first(made: str, wanted: str, name: str) -> str:
    """SQL: `wanted` (a `json_text`) from the text `name` already holds, `made`'s, when
    the two differ only in their first field's name (the lease in the entry is the
    event's data, `leaseId` named `id`): its first name put before the rest of `name`,
    so the same values are not written into JSON twice."""
    first_made, first_wanted = made.split(":", 1)[0], wanted.split(":", 1)[0]
    rest = made[len(first_made):]
    if wanted != first_wanted + rest or not first_made.startswith("('{"):
        return wanted
    prefix = first_made[2:] + ":"  # the first name's bytes with its brace, as SQL text
    return f"({first_wanted[1:]}:' || substr({name}, {len(prefix) + 1}))"


def _scalar(kind: Any, expr: str) -> str:
    members = union_members(kind)
    if members is not None:
        others = [member for member in members if member is not type(None)]
        if len(others) == 1:
            return _scalar(others[0], expr)
    if kind is str:
        return f"to_json(({expr})::text)::text"
    if kind is int:
        return f"(({expr})::bigint)::text"
    if kind is bool:
        return f"(({expr})::boolean)::text"
    raise TypeError(f"no JSON by concatenation for a value of {kind!r}")
