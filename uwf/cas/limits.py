"""What a node may hold (docs/json-cas.md#limits).

A payload is a JSON value: objects with string keys, arrays, strings UTF-8 can
encode, finite numbers within float64 (JSON has no NaN or Infinity; JavaScript
reads a larger number as Infinity), true, false, null. It nests at most
`MAX_DEPTH` objects and arrays deep, so hashing, validation and JSON decoding
never meet Python's recursion limit; and it is at most `MAX_NODE_BYTES` as
compact JSON. (What a schema may say is json-cas's subset: `subset.py`.)

The check walks with an explicit stack: a hostile value cannot exhaust it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec

from uwf.errors import Rejected

MAX_NODE_BYTES = 16 * 1024 * 1024  # a payload as compact UTF-8 JSON
MAX_DEPTH = 200  # objects and arrays inside each other
MAX_NUMBER = 1.7976931348623157e308  # float64's largest; ints are compared exactly
LIMITS_DOC = "see the limits in docs/json-cas.md#limits"


def check_payload(value: Any, what: str = "payload") -> None:
    """Refuse (Rejected) a value that is not a JSON value within the limits, naming where.

    Call it before anything recursive (redaction, hashing, validation) sees the value.
    """
    problem = first_problem(value, what)
    if problem is not None:
        raise Rejected(problem, LIMITS_DOC)


def first_problem(value: Any, what: str = "payload") -> str | None:
    """Why `value` is not a JSON value within the limits (`<what> at <path>: ...`), or
    None when it is."""
    found = _first_problem(value)
    if found is None:
        return None
    where, words = found
    return f"{what} at {where}: {words}" if where else f"{what}: {words}"


def check_size(payload: Any, what: str = "payload") -> None:
    """Refuse a payload (already through `check_payload`) over `MAX_NODE_BYTES`."""
    try:  # msgspec spells the same compact UTF-8 JSON within a few bytes a number
        if len(msgspec.json.encode(payload)) * 2 < MAX_NODE_BYTES:
            return  # far below the limit however the two spell a number
    except (TypeError, OverflowError, ValueError):
        pass  # an int beyond 64 bits, say: measured as json spells it
    size = len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if size > MAX_NODE_BYTES:
        raise Rejected(
            f"{what} is {size:,} bytes of JSON, over the node limit of 16 MiB "
            f"({MAX_NODE_BYTES:,} bytes)",
            "split it into several nodes that refer to each other; " + LIMITS_DOC,
        )


def _first_problem(value: Any) -> tuple[str, str] | None:
    """(path, what is wrong) of a value beyond the limits, or None."""
    # Each entry: (value, depth of its container nesting, (parent link, key) or None).
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    while stack:
        item, depth, link = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii() and not _encodable(item):
                return _path(link), "a string holds a lone surrogate (such as \\ud800), " \
                    "which UTF-8 cannot encode"
        elif kind is dict or kind is list or kind is tuple:
            if depth >= MAX_DEPTH:
                return _path(link), f"nested more than {MAX_DEPTH} deep"
            if kind is dict:
                for key, child in item.items():
                    if type(key) is not str:
                        return _path((link, key)), f"the key {key!r} is not a string"
                    if not key.isascii() and not _encodable(key):
                        return _path((link, key)), "the key holds a lone surrogate, " \
                            "which UTF-8 cannot encode"
                    stack.append((child, depth + 1, (link, key)))
            else:
                stack.extend((child, depth + 1, (link, index))
                             for index, child in enumerate(item))
        elif item is None or kind is bool:
            continue
        elif kind is int:
            if not -MAX_NUMBER <= item <= MAX_NUMBER:  # exact, and never str() of it
                digits = int(item.bit_length() * math.log10(2)) + 1
                return _path(link), f"a number of about {digits:,} digits is out of range " \
                    "(beyond float64)"
        elif kind is float:
            if not math.isfinite(item):
                return _path(link), f"{_number_name(item)} is not a JSON number"
        else:
            return _path(link), f"a {kind.__name__} is not a JSON value"
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _number_name(number: float) -> str:
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def _path(link: Any) -> str:
    """`a.b[2]` from the (parent link, key) chain, root first."""
    keys: list[str | int] = []
    while link is not None:
        link, key = link
        keys.append(key)
    text = ""
    for key in reversed(keys):
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text[:200]
