"""A stored struct's JSON edited by the server without parsing it (issue 31): the SQL
of `Splice`, a few fields replaced and read, every other byte kept as msgspec wrote it.

Used where a view's row is JSON msgspec wrote and the server reads or changes some of
its fields: a queue entry's overlay built into its JSON at read (uwf/engine/pgoverlay.py,
uwf/queue/pgentry.py), a lease reading an entry's attempts (uwf/queue/pgcalls.py).
Reading a whole entry into a composite type (`json_populate_record`) and printing it
(`to_json`) cost ~12 % of the server's instructions in a lease and a complete
(docs/benchmarks.md). What the server writes is msgspec's bytes: tests/unit/test_pgjson.py
and tests/contract/test_pgcalls.py hold the two to the same bytes, escapes, nested
records and integers past 32 bits included.
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


def union_members(kind: Any) -> tuple[Any, ...] | None:
    """The members of a union type (`X | None`, `Optional[X]`), else None."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return typing.get_args(kind)
    return None


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
        members = union_members(kind)
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
