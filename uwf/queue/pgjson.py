"""The JSON msgspec writes for a struct, written by the server (issue 31).

`json_text`: a struct's JSON concatenated from SQL expressions, field by field in the
struct's order (an event's data). `Splice`: a stored struct's JSON edited in place, a
few fields replaced and read, every other byte kept (a queue entry's row), with no
parse of the JSON and no record printed back: reading an entry into a composite type
(`json_populate_record`) and printing it (`to_json`) cost ~12 % of the server's
instructions in a lease and a complete (docs/benchmarks.md). What the server writes
is msgspec's bytes: tests/contract/test_pgcalls.py holds the two to the same bytes,
escapes, nested records and integers past 32 bits included.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any

import msgspec
from msgspec.structs import FieldInfo


@functools.cache
def struct_fields(kind: type[msgspec.Struct]) -> tuple[FieldInfo, ...]:
    """A struct's fields, in its order, each with its name in the JSON and its type
    (`msgspec.structs.fields`, kept: its annotations are evaluated once a process, not
    `msgspec.inspect`'s full translation on every call: a process's first lease made
    the two procedures' text in 2.4 ms of CPU with it, 1.0 without)."""
    return msgspec.structs.fields(kind)


def _members(kind: Any) -> tuple[Any, ...] | None:
    """The members of a union type (`X | None`, `Optional[X]`), else None."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return typing.get_args(kind)
    return None


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
    members = _members(kind)
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


class Splice:
    """SQL editing, in the server, the JSON msgspec wrote for a `kind` (a `bytea`
    expression `raw`) without parsing it: the fields `changed` are replaced and the
    fields `read` read, every other byte kept as it was (issue 31: reading a whole
    entry into a record and printing it back cost ~12 % of a lease and a complete).

    msgspec writes every field (no defaults left out: such a struct is refused), in the
    struct's order, compact, so each field but the first starts with
    `,"name":`. Those bytes cannot occur inside a string (its quotes are escaped), so
    the first occurrence of a top-level field's is that field, as long as no nested
    record before it has a field of that name: the fields searched for are checked
    against those before them. `positions()` is the byte offsets of the fields needed
    (an `int[]` assigned to the variable `at`; one is 0 when the value is not such
    JSON); `read` and `value` use them."""

    def __init__(self, kind: type[msgspec.Struct], raw: str, at: str, *,
                 changed: tuple[str, ...], read: tuple[str, ...]) -> None:
        self.raw, self.at = raw, at
        config = kind.__struct_config__
        if config.omit_defaults or config.array_like or config.tag_field is not None:
            raise TypeError(f"no splice of {kind.__name__}: msgspec leaves fields out or "
                            "writes it as an array")
        fields = struct_fields(kind)
        self._names = [field.encode_name for field in fields]
        self._index = {field.name: number for number, field in enumerate(fields)}
        self._changed = set(changed)
        marks = set()
        for name in changed:  # a run of changed fields: where it starts and what follows
            number = self._index[name]
            if number == 0 or fields[number - 1].name not in self._changed:
                marks.add(number)
            if number + 1 == len(fields) or fields[number + 1].name not in self._changed:
                marks.add(number + 1)
        for name in read:
            marks.update((self._index[name], self._index[name] + 1))
        marks.discard(len(fields))  # the end: the closing brace
        if 0 in marks:
            raise TypeError(f"{kind.__name__}'s first field has no `,` before it to find")
        for number in marks:  # no nested record before it has a field of its name
            for earlier in fields[:number]:
                if self._name_in(earlier.type, self._names[number]):
                    raise TypeError(f"{kind.__name__}.{earlier.name} may hold a field "
                                    f"named {self._names[number]!r}")
        self._marks = sorted(marks)
        self._count = len(fields)

    def _name_in(self, kind: Any, name: str) -> bool:
        members = _members(kind)
        if members is not None:
            return any(self._name_in(member, name) for member in members)
        if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
            return any(field.encode_name == name or self._name_in(field.type, name)
                       for field in struct_fields(kind))
        if typing.get_origin(kind) in (list, tuple, set, frozenset):
            return any(self._name_in(item, name) for item in typing.get_args(kind))
        return False

    @staticmethod
    def _marker(name: str) -> str:
        return f"'\\x{(',' + chr(34) + name + chr(34) + ':').encode().hex()}'::bytea"

    def positions(self) -> str:
        return "ARRAY[" + ", ".join(f"position({self._marker(self._names[number])} in "
                                    f"{self.raw})" for number in self._marks) + "]"

    def _pos(self, number: int) -> str:
        if number == self._count:
            return f"octet_length({self.raw})"
        return f"{self.at}[{self._marks.index(number) + 1}]"

    def read(self, name: str) -> str:
        """SQL: the field's JSON text, as stored."""
        number = self._index[name]
        skip = len(self._names[number]) + 4  # ,"name":
        return (f"convert_from(substring({self.raw} from {self._pos(number)} + {skip} for "
                f"{self._pos(number + 1)} - {self._pos(number)} - {skip}), 'UTF8')")

    def value(self, values: dict[str, str]) -> str:
        """SQL: the new bytes, each changed field (by attribute name) holding the JSON
        text of the SQL expression `values[name]` (NULL: null)."""
        if set(values) != self._changed:
            raise TypeError(f"values for {sorted(values)}, not {sorted(self._changed)}")
        pieces, kept, number = [], "1", 0
        by_number = {self._index[name]: expr for name, expr in values.items()}
        while number < self._count:
            if number not in by_number:
                number += 1
                continue
            pieces.append(f"substring({self.raw} from {kept} for {self._pos(number)} - {kept})")
            text = []
            while number in by_number:
                text.append(f"',\"{self._names[number]}\":' || "
                            f"coalesce(({by_number[number]}), 'null')")
                number += 1
            pieces.append(f"convert_to({' || '.join(text)}, 'UTF8')")
            kept = self._pos(number)
        pieces.append(f"substring({self.raw} from {kept})")
        return " || ".join(pieces)

    def starts(self, name: str, text: str) -> str:
        """SQL: whether the field's JSON begins with the SQL text expression `text`."""
        number = self._index[name]
        if number not in self._marks:
            raise TypeError(f"{name} is not found: name it in `read` or `changed`")
        skip = len(self._names[number]) + 4
        return (f"substring({self.raw} from {self._pos(number)} + {skip} for "
                f"octet_length(convert_to({text}, 'UTF8'))) = convert_to({text}, 'UTF8')")
