"""A CAS node as stored ({type, payload, timestamp} under its hash), the hash its content
gives, and what is wrong with a node record of the log (`log verify`)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from uwf.cas.hashing import is_hash, node_hash, self_hash


class Node(msgspec.Struct, frozen=True):
    hash: str
    type: str
    payload: Any
    timestamp: int


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
