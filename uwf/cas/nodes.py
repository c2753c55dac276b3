"""A CAS node as stored ({type, payload, timestamp} under its hash): its bytes (a loose
file's, a record's) and the node read back from them, the hash its content gives, and
what is wrong with a node record of the log (`log verify`)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from uwf.cas.hashing import is_hash, node_hash, self_hash
from uwf.errors import Corrupt


class Node(msgspec.Struct, frozen=True):
    hash: str
    type: str
    payload: Any
    timestamp: int


def compact_node(type_hash: str, payload: Any, timestamp: int) -> bytes:
    """The node on one line: what a node record holds (`records.compact` of the stored
    form, `uwf.cas.store.encode_node`'s bytes, made without indenting them first)."""
    return _COMPACT({"type": type_hash, "payload": payload, "timestamp": timestamp}
                    ).encode("utf-8")


# `json.dumps(node, ensure_ascii=False, separators=(",", ":"))`'s encoder, made once (the
# call makes one each time); an encoder keeps nothing from one call to the next.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def parsed(hash_: str, raw: bytes) -> Node:
    """The node a file (or record) holds, unchecked against its name."""
    try:
        node = json.loads(raw)
        loaded = Node(hash_, node["type"], node["payload"], int(node["timestamp"]))
    except (ValueError, KeyError, TypeError, RecursionError,
            OverflowError):  # int() of a timestamp of 1e400 (inf)
        raise Corrupt(
            f"node {hash_} is not a valid node file", "run `json-cas verify`"
        ) from None
    if not is_hash(loaded.type):
        raise Corrupt(f"node {hash_} is not a valid node file", "run `json-cas verify`")
    return loaded


def gathered(hash_: str, data: bytes) -> Node:
    """`parsed` of what `compact_node` just made of a checked payload (`Cas.put`), read
    by msgspec's decoder (~5 x json's): the same values, numbers too (a checked payload
    holds no lone surrogate, no NaN, nothing nested over 200 deep); else json's reading."""
    try:
        node = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return parsed(hash_, data)
    return Node(hash_, node["type"], node["payload"], node["timestamp"])


def record_problem(hash_: str, data: bytes) -> str | None:
    """What is wrong with a node record naming `hash_` whose node JSON is `data`
    (`log verify`): not a node, or content that does not hash to its name."""
    try:
        node = json.loads(data)
        loaded = Node(hash_, node["type"], node["payload"], int(node["timestamp"]))
    except (ValueError, KeyError, TypeError, RecursionError, OverflowError):
        return f"node record {hash_} does not hold a node {{type, payload, timestamp}}"
    if not is_hash(hash_) or not is_hash(loaded.type):
        return f"node record {hash_} names a hash or type that is not a hash"
    actual = content_hash(loaded)
    if actual != hash_:
        return f"node record {hash_} holds content that hashes to {actual}"
    return None


def content_hash(node: Node) -> str | None:
    """The hash a node's content gives (self-typed: its payload alone); None when the
    content cannot be hashed (a hand-edited file: too deep, a number beyond float64)."""
    try:
        if node.type == node.hash:
            return self_hash(node.payload)
        return node_hash(node.type, node.payload)
    except (ValueError, TypeError, OverflowError, RecursionError):
        return None
