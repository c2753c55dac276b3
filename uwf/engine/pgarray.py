"""PostgreSQL arrays in the binary wire format, built in one pass (issue 31).

A one-call command (uwf/engine/pgwrite.py) sends its lines, subjects and rows as arrays.
psycopg's own list dumper is Python that, for every list, finds an item to choose the
element's dumper, measures the dimensions recursively and dumps each item through the
element's dumper: ~4 µs of the client's CPU a list, a dozen lists a command. These
build the same bytes (`array_recv`'s format: dimensions, flags, element type, then
each item's length and bytes, -1 for NULL) with one `struct` call a list; `register`
tells a connection to send them as they are, in binary, as their array type.

psycopg is imported by `register` only (uwf/engine/pgdb.py checks it is installed).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

_HEAD = struct.Struct("!iiiii")  # one dimension: ndim, has NULL, element oid, size, lower bound
_EMPTY = struct.Struct("!iii")  # no dimension: ndim 0, no NULL, element oid
BYTEA, TEXT, INT8 = 17, 25, 20


class Array(bytes):
    """An array's binary form; `oid` (a subclass's) is its array type's."""

    oid = 0


class ByteaArray(Array):
    oid = 1001


class TextArray(Array):
    oid = 1009


class Int8Array(Array):
    oid = 1016


def _items(element: int, items: Sequence[bytes | None]) -> bytes:
    if not items:
        return _EMPTY.pack(0, 0, element)
    nulls = any(item is None for item in items)
    parts = [_HEAD.pack(1, int(nulls), element, len(items), 1)]
    for item in items:
        if item is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(len(item).to_bytes(4, "big"))
            parts.append(item)
    return b"".join(parts)


def bytea(items: Sequence[bytes | None]) -> ByteaArray:
    return ByteaArray(_items(BYTEA, items))


def text(items: Sequence[str | None]) -> TextArray:
    return TextArray(_items(TEXT, [None if item is None else item.encode()
                                   for item in items]))


def int8(items: Sequence[int]) -> Int8Array:
    if not items:
        return Int8Array(_EMPTY.pack(0, 0, INT8))
    return Int8Array(_HEAD.pack(1, 0, INT8, len(items), 1) + struct.pack(
        "!" + "iq" * len(items), *[value for item in items for value in (8, item)]))


def register(connection: Any) -> None:
    """Make `connection` send `Array`s as they are, in binary, as their array type."""
    for kind in (ByteaArray, TextArray, Int8Array):
        connection.adapters.register_dumper(kind, _dumper(kind.oid))


def _dumper(oid: int) -> type:
    """A psycopg dumper sending an `Array` as it is, as the array type `oid`."""
    from psycopg import pq
    from psycopg.adapt import Dumper

    class Prebuilt(Dumper):
        format = pq.Format.BINARY

        def __init__(self, cls: type, context: Any = None) -> None:
            super().__init__(cls, context)
            self.oid = oid

        def dump(self, obj: Any) -> Any:
            return obj  # bytes already

    return Prebuilt
