"""Node hashes: XXH64 over the type hash and the deterministic CBOR of the payload.

Pure functions only. The CBOR is json-cas's, byte for byte: cborg's encoding with
its `rfc8949EncodeOptions` of the value JavaScript reads from the JSON. So a
number that is a safe integer (integral, |n| <= 2^53 - 1) is a CBOR integer in
its shortest head, and every other number is an 8-byte float64 (`fb`), never a
shorter float; -0 is integral and safe, so it is the integer 0. Map keys are
sorted by the bytes of their encoded form (shorter keys first). The text form is
the 64-bit value as 13 Crockford Base32 characters, big-endian, zero-padded, so
the first character is always 0-F.

The rule uwf used before (shortest floats, ±2^53 as integers) lives in
`legacy.py`: stores written with it are still read (docs/json-cas.md#old-stores).
"""

from __future__ import annotations

import re
import struct
from operator import itemgetter
from typing import Any

import xxhash

HASH_LENGTH = 13
HASH_RULE = "json-cas"  # the rule below, as a store records it (`Blobs.hash_rule`)
SAFE_INTEGER = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's Base32
_PAIRS = [first + second for first in _ALPHABET for second in _ALPHABET]
_HASH_RE = re.compile(r"[0-9A-F][0-9A-HJKMNP-TV-Z]{12}")

_UINT16 = struct.Struct(">BH").pack
_UINT32 = struct.Struct(">BI").pack
_UINT64 = struct.Struct(">BQ").pack
_FLOAT64 = struct.Struct(">Bd").pack
_TEXT, _ARRAY, _MAP, _NEGATIVE = 0x60, 0x80, 0xA0, 0x20


def is_hash(text: object) -> bool:
    """True for a well-formed hash; checked before any hash becomes a path."""
    return isinstance(text, str) and _HASH_RE.fullmatch(text) is not None


def js_number(number: int | float) -> int | float:
    """A number as JavaScript reads it from JSON and cborg encodes it: an int when it is
    a safe integer, else a float (an integer beyond 2^53 - 1 is the nearest double)."""
    if isinstance(number, int):
        return number if -SAFE_INTEGER <= number <= SAFE_INTEGER else float(number)
    if number.is_integer() and -SAFE_INTEGER <= number <= SAFE_INTEGER:
        return int(number)  # 2.0 and -0.0 are the integers 2 and 0
    return number


def normalize(value: Any) -> Any:
    """The JSON value as json-cas sees it: safe integers are ints, every other number
    a float. Validation sees this, so it agrees with the hash (`2**53 + 1` is 2^53)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, dict):
        return {key: normalize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(item) for item in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def deterministic_cbor(payload: Any) -> bytes:
    """json-cas's CBOR of a JSON value (the rule in the module docstring)."""
    out = bytearray()
    _emit(payload, out)
    return bytes(out)


def _head(out: bytearray, major: int, length: int) -> None:
    """A CBOR head in its shortest form."""
    if length < 24:
        out.append(major | length)
    elif length < 0x100:
        out.append(major | 24)
        out.append(length)
    elif length < 0x10000:
        out += _UINT16(major | 25, length)
    elif length < 0x100000000:
        out += _UINT32(major | 26, length)
    else:
        out += _UINT64(major | 27, length)


_first = itemgetter(0)
# Encoded object keys: the same few keys ("type", "start", "output"...) recur in every
# node, and encoding them is a third of the work. Bounded: keys may be any text.
_KEYS: dict[str, bytes] = {}
_KEYS_MAX = 4096


def _emit(value: Any, out: bytearray) -> None:
    """Append the CBOR of `value`. Exact types first: every read of a node hashes it."""
    kind = type(value)
    if kind is str:
        data = value.encode("utf-8")
        _head(out, _TEXT, len(data))
        out += data
    elif kind is dict:
        _head(out, _MAP, len(value))
        # RFC 8949 §4.2.1: keys in the bytewise order of their encoded form.
        keys = _KEYS
        pairs = [(keys.get(key) or _key(key), item) for key, item in value.items()]
        pairs.sort(key=_first)
        for encoded, item in pairs:
            out += encoded
            _emit(item, out)
    elif kind is list or kind is tuple:
        _head(out, _ARRAY, len(value))
        for item in value:
            _emit(item, out)
    elif value is None:
        out.append(0xF6)
    elif kind is bool:
        out.append(0xF5 if value else 0xF4)
    elif kind is int:
        if 0 <= value <= SAFE_INTEGER:
            _head(out, 0, value)
        elif -SAFE_INTEGER <= value < 0:
            _head(out, _NEGATIVE, -1 - value)
        else:
            out += _FLOAT64(0xFB, float(value))  # the nearest double, as JavaScript reads it
    elif kind is float:
        if value.is_integer() and -SAFE_INTEGER <= value <= SAFE_INTEGER:
            _emit(int(value), out)  # 2.0 is 2, and -0.0 is 0
        else:
            out += _FLOAT64(0xFB, value)
    else:
        _emit(_plain(value), out)


def _key(key: object) -> bytes:
    """An object key's encoded form (remembered while the table has room)."""
    if not isinstance(key, str):
        raise TypeError(f"an object key must be a string, not {type(key).__name__}")
    text = str.__str__(key)  # a str subclass as the plain text it holds
    data = text.encode("utf-8")
    head = bytearray()
    _head(head, _TEXT, len(data))
    encoded = bytes(head) + data
    if len(_KEYS) < _KEYS_MAX and len(data) <= 64 and type(key) is str:
        _KEYS[text] = encoded
    return encoded


def _plain(value: Any) -> Any:
    """A subclass of a JSON type (an IntEnum, a str subclass...) as its plain type."""
    for plain in (bool, int, float, str):
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list | tuple):
        return list(value)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def format_hash(value: int) -> str:
    """A 64-bit integer as 13 big-endian Crockford Base32 characters."""
    # The top 4 bits, then six 10-bit pairs from a table: every read of a node hashes
    # it, and this is 4 times faster than a character at a time.
    return "".join((_ALPHABET[value >> 60], _PAIRS[(value >> 50) & 1023],
                    _PAIRS[(value >> 40) & 1023], _PAIRS[(value >> 30) & 1023],
                    _PAIRS[(value >> 20) & 1023], _PAIRS[(value >> 10) & 1023],
                    _PAIRS[value & 1023]))


def hash_bytes(data: bytes) -> str:
    return format_hash(xxhash.xxh64_intdigest(data, seed=0))


def node_hash(type_hash: str, payload: Any) -> str:
    """The hash of a data or schema node of type `type_hash`."""
    return hash_bytes(type_hash.encode("ascii") + deterministic_cbor(payload))


def self_hash(payload: Any) -> str:
    """The hash of a self-typed node (the bootstrap meta-schema): CBOR alone."""
    return hash_bytes(deterministic_cbor(payload))
