"""What a role's output schema says about its outputs, as far as `workflow put`'s
checks of the edges leaving the role need: the `status` values it lists, the fields
it requires, declares and admits.

A schema's `anyOf` / `oneOf` branches are alternatives: an output matches one (or
more) of them, so a value or field is possible when some branch allows it, and
required or listed only when every branch says so. json-cas's schema subset has no
`allOf`, `not` nor `$ref`, so these keywords and `const`, `enum`, `properties`,
`required` and `additionalProperties: false` are all that constrain a field here;
anything else (a `type`, a nested `additionalProperties` schema) is read as allowing
any value, so a check never refuses what the schema admits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_BRANCHES = ("anyOf", "oneOf")


def listed_values(schema: Any) -> list[Any] | None:
    """The values `schema` admits when it lists them, first listed first, else None.

    Listed by `const`, `enum`, or `anyOf` / `oneOf` branches that each list theirs
    (their union); with several of these, the values every one admits.
    """
    if not isinstance(schema, dict):
        return None
    lists: list[list[Any]] = []
    if "const" in schema:
        lists.append([schema["const"]])
    if isinstance(schema.get("enum"), list):
        lists.append(schema["enum"])
    for branches in _branch_lists(schema):
        found = [listed_values(branch) for branch in branches]
        if all(values is not None for values in found):
            lists.append([value for values in found if values is not None for value in values])
    return _common(lists)


def status_values(schema: Any) -> list[Any] | None:
    """The `status` values an output schema lists, or None when it leaves any open:
    from `properties.status`, and from every branch of a top-level `anyOf` / `oneOf`
    (each branch an output schema: a discriminated union)."""
    if not isinstance(schema, dict):
        return None
    lists: list[list[Any]] = []
    properties = schema.get("properties")
    if isinstance(properties, dict) and (values := listed_values(properties.get("status"))
                                         ) is not None:
        lists.append(values)
    for branches in _branch_lists(schema):
        found = [status_values(branch) for branch in branches]
        if all(values is not None for values in found):
            lists.append([value for values in found if values is not None for value in values])
    return _common(lists)


def requires(schema: Any, field: str) -> bool:
    """Whether every output the schema admits has `field`: it is `required`, or every
    branch of one of its `anyOf` / `oneOf` requires it."""
    if not isinstance(schema, dict):
        return False
    required = schema.get("required")
    if isinstance(required, list) and field in required:
        return True
    return any(all(requires(branch, field) for branch in branches)
               for branches in _branch_lists(schema))


def declared(schema: Any) -> set[str]:
    """The fields named in `properties`, the schema's or any branch's."""
    if not isinstance(schema, dict):
        return set()
    properties = schema.get("properties")
    names = set(properties) if isinstance(properties, dict) else set()
    for branches in _branch_lists(schema):
        for branch in branches:
            names |= declared(branch)
    return names


def admits(schema: Any, field: str) -> bool:
    """Whether an output the schema admits may have `field`: not when the schema is
    closed (`additionalProperties: false`) and does not declare it, nor when no
    branch of one of its `anyOf` / `oneOf` admits it."""
    if not isinstance(schema, dict):
        return True
    properties = schema.get("properties")
    if schema.get("additionalProperties") is False and not (
            isinstance(properties, dict) and field in properties):
        return False
    return all(any(admits(branch, field) for branch in branches)
               for branches in _branch_lists(schema))


def describes_fields(schema: Any) -> bool:
    """Whether the schema says anything about its fields (`properties`, or closed),
    itself or in a branch: a schema that does not (the default `{"type": "object"}`)
    leaves an edge prompt's names unchecked."""
    if not isinstance(schema, dict):
        return False
    if isinstance(schema.get("properties"), dict) or schema.get("additionalProperties") is False:
        return True
    return any(describes_fields(branch) for branches in _branch_lists(schema)
               for branch in branches)


def _branch_lists(schema: dict[str, Any]) -> Iterator[list[Any]]:
    for keyword in _BRANCHES:
        branches = schema.get(keyword)
        if isinstance(branches, list) and branches:
            yield branches


def _common(lists: list[list[Any]]) -> list[Any] | None:
    """The values in every list, once each, in the first list's order; None for none."""
    if not lists:
        return None
    first, *others = lists
    common: list[Any] = []
    for value in first:
        # `in` compares with ==: listed values may be objects or lists (unhashable).
        if value not in common and all(value in other for other in others):
            common.append(value)
    return common
