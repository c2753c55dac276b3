"""The hash rule uwf used before it encoded numbers as json-cas does: read old stores.

Until then uwf hashed cbor2's RFC 8949 core deterministic encoding, which writes a
float in the shortest of half, single or double precision that keeps its value
(1.5 was `f93e00`, json-cas writes `fb3ff8000000000000`), and treated ±2^53 as
integers (json-cas: doubles). Every other value encodes the same under both rules,
so only nodes holding such numbers have a different name under each.

A store created before the rule was recorded (`Cas.hash_rule`) may hold nodes named
by this rule: they are still read and verified under it; nothing new is written
with it. Pure functions, as `hashing.py`.
"""

from __future__ import annotations

from typing import Any

from uwf.cas.hashing import hash_bytes

LEGACY_RULE = "uwf-legacy"  # never recorded: a store without a record uses it
_OLD_SAFE = 2**53  # the old bound was inclusive of ±2^53


def legacy_normalize(value: Any) -> Any:
    """Numbers as the old rule read them: integral numbers within ±2^53 are ints."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and -_OLD_SAFE <= value <= _OLD_SAFE:
        return value
    if isinstance(value, int | float):
        number = float(value)
        if number.is_integer() and -_OLD_SAFE <= number <= _OLD_SAFE:
            return int(number)
        return number
    if isinstance(value, dict):
        return {key: legacy_normalize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [legacy_normalize(item) for item in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def legacy_cbor(payload: Any) -> bytes:
    """The old encoding: cbor2's core deterministic encoding, shortest floats (cbor2
    loaded here: only an old store's node needs it, and a read should not pay for it)."""
    import cbor2

    return bytes(cbor2.dumps(legacy_normalize(payload), canonical=True))


def legacy_node_hash(type_hash: str, payload: Any) -> str:
    return hash_bytes(type_hash.encode("ascii") + legacy_cbor(payload))


def legacy_self_hash(payload: Any) -> str:
    return hash_bytes(legacy_cbor(payload))
