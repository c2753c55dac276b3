"""What a command returns: a typed result every surface renders the same way.

A service returns a `Result` (a msgspec Struct whose fields are the payload's keys,
in the order they print) or a `Plain` string. `to_payload` turns either into the
JSON-ready value `<cmd> --json` prints and an MCP tool returns, so the two cannot
differ. A field left `UNSET` is absent from the payload (a key only some results
carry); `None` prints as null. A leaf: msgspec only.
"""

from __future__ import annotations

from typing import Any

import msgspec

UNSET = msgspec.UNSET
UnsetType = msgspec.UnsetType


class Result(msgspec.Struct, kw_only=True, rename="camel"):
    """A command's result; subclasses declare the payload's keys as snake_case fields,
    printed in camelCase (`log_seq` is `logSeq`). Mutable, so a service can fill it in."""


class Plain(str):
    """A payload printed as is, for `$(...)`, when the arguments ask for it (`queue add
    --quiet`); a command whose payload is always one such string sets `plain`."""
    __slots__ = ()


def to_payload(result: Any) -> Any:
    """The JSON-ready value of `result`: Structs become dicts in field order (UNSET fields
    left out), tuples lists; dicts, lists, strings and numbers are kept as they are."""
    if isinstance(result, str | int | float | bool | None):
        return result
    return msgspec.to_builtins(result, str_keys=True)
