"""Where a payload names other nodes, as its type's schema says (`"format": "cas_ref"`),
and the payload as json-cas sees its numbers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from uwf.cas.hashing import is_hash, normalize
from uwf.cas.subset import REF_FORMAT


def js_view(value: Any) -> Any:
    """`value` with its numbers as json-cas sees them; as it is when it is not a JSON
    value within the limits (`put` refuses it then, naming why)."""
    try:
        return normalize(value)
    except (TypeError, OverflowError, RecursionError):
        return value


def schema_refs(schema: Any, value: Any, path: str) -> Iterator[tuple[str, str]]:
    if not isinstance(schema, dict):
        return
    if schema.get("format") == REF_FORMAT and is_hash(value):
        yield path, value
    for combinator in ("anyOf", "oneOf"):
        for option in schema.get(combinator, ()):
            yield from schema_refs(option, value, path)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra)
            yield from schema_refs(sub, item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        items = schema.get("items")
        for index, item in enumerate(value):
            yield from schema_refs(items, item, f"{path}[{index}]")
