"""Node hashes: XXH64 over the type hash and the deterministic CBOR of the payload.

Pure functions only. The text form is the 64-bit value as 13 Crockford Base32
characters, big-endian, zero-padded, so the first character is always 0-F.
"""

from __future__ import annotations

import re
from typing import Any

import cbor2
import xxhash

HASH_LENGTH = 13
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's Base32
_PAIRS = [first + second for first in _ALPHABET for second in _ALPHABET]
_HASH_RE = re.compile(r"[0-9A-F][0-9A-HJKMNP-TV-Z]{12}")
_SAFE_INTEGER = 2**53


def is_hash(text: object) -> bool:
    """True for a well-formed hash; checked before any hash becomes a path."""
    return isinstance(text, str) and _HASH_RE.fullmatch(text) is not None


def normalize(value: Any) -> Any:
    """The JSON value as JavaScript sees it: integral numbers within ±2^53 are
    integers, larger integers are doubles."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
        return value
    if isinstance(value, int | float):
        number = float(value)  # a larger integer is a double to JavaScript
        if number.is_integer() and -_SAFE_INTEGER <= number <= _SAFE_INTEGER:
            return int(number)
        return number
    if isinstance(value, dict):
        return {key: normalize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(item) for item in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def deterministic_cbor(payload: Any) -> bytes:
    """RFC 8949 core deterministic encoding: sorted keys, shortest heads and floats."""
    return bytes(cbor2.dumps(normalize(payload), canonical=True))


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
