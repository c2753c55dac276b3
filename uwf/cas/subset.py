"""json-cas's bootstrap meta-schema and the closed subset of JSON Schema it admits.

The meta-schema (`schemas/meta.json`, self-hash `56GP9CC0KVQF8`) is json-cas's own,
byte for byte: the same schema content therefore hashes here as in json-cas. It
lists the keywords a schema may use at its top level; where it says
`{"type": "object", "additionalProperties": false}` (inside `properties`,
`additionalProperties`, `items`, `anyOf`, `oneOf`) it stands for "a schema" —
json-cas applies the same subset to every nested schema, and so does this module.

So a schema refers to nothing outside itself: `$ref`, `$schema`, `$id`,
`definitions`, `pattern`... are not keywords of the subset, and validation never
fetches a URL nor reads a file. An empty `enum`, `type`, `anyOf` or `oneOf` list is
refused, nested too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from uwf.cas.limits import first_problem

# The built-in schemas shipped in the package (read as files: importlib.resources
# would load zipfile, 20 ms of every CLI call, for a package that is never zipped).
SCHEMAS = Path(__file__).parent / "schemas"

META_HASH = "56GP9CC0KVQF8"
# The draft-07 meta-schema's self-hash: the bootstrap of stores written before
# uwf adopted json-cas's (docs/json-cas.md#bootstrap). Such a store is refused.
DRAFT07_BOOTSTRAP = "CWJJZYAQ8BA62"
REF_FORMAT = "cas_ref"  # json-cas's marker of a string that holds a node's hash
# Keywords whose values are schemas (a map of them, one, or a list of them).
_SCHEMA_MAP = "properties"
_SCHEMA_ONE = ("additionalProperties", "items")
_SCHEMA_LIST = ("anyOf", "oneOf")
# Lists that must not be empty: no value matches an empty one, so a schema holding one
# refuses every payload. Refused at put (json-cas refuses an empty enum there too).
_NON_EMPTY = (("enum", "an enum must list at least one value"),
              ("type", "a type list must name at least one type"),
              ("anyOf", "an anyOf must list at least one schema"),
              ("oneOf", "a oneOf must list at least one schema"))


@cache
def meta_schema() -> dict[str, Any]:
    text = (SCHEMAS / "meta.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def keywords() -> tuple[str, ...]:
    return tuple(sorted(meta_schema()["properties"]))


@cache
def _one_level() -> Any:
    """A validator of one schema object's own keywords: the meta-schema with each
    nested "a schema" stand-in relaxed to any object (nested ones are checked in turn)."""
    import jsonschema_rs

    def relax(value: Any) -> Any:
        if value == {"type": "object", "additionalProperties": False}:
            return {"type": "object"}
        if isinstance(value, dict):
            return {key: relax(item) for key, item in value.items()}
        if isinstance(value, list):
            return [relax(item) for item in value]
        return value

    return jsonschema_rs.validator_for(relax(meta_schema()))


def schema_problems(schema: Any) -> list[str]:
    """Why `schema` is not a schema of json-cas's subset (empty when it is): the
    first reason found, `<where>: <why>`."""
    if (problem := first_problem(schema)) is not None:
        return [problem]
    for where, why in _findings(schema):
        return [f"{where or '(root)'}: {why}"]
    return []


def schema_findings(schema: Any) -> Iterator[tuple[str, str]]:
    """Every reason `schema` is not a schema of json-cas's subset, outermost first, as
    (where, why): `where` the dotted path inside the schema, "" for its root.

    A schema over the size limits yields that one reason: it is not walked.
    """
    if (problem := first_problem(schema)) is not None:
        yield "", problem
    else:
        yield from _findings(schema)


def _findings(schema: Any) -> Iterator[tuple[str, str]]:
    named: set[str] = set()  # paths a reason was given for
    for path, node in _schemas(schema):
        if not isinstance(node, dict):
            if path not in named:  # a nested one was named by its parent's check
                yield path, "a schema must be a JSON object"
            continue
        unknown = sorted(set(node) - set(keywords()))
        for keyword in unknown:
            yield path, (f"{keyword!r} is not a keyword of json-cas's schema subset "
                         f"(allowed: {', '.join(keywords())})")
        for error in _one_level().iter_errors(node):
            if unknown and not error.instance_path:
                continue  # "additional properties": the unknown keywords named above
            inner = "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                            for part in error.instance_path).lstrip(".")
            named.add(_join(path, inner))
            yield _join(path, inner), error.message
        for keyword, what in _NON_EMPTY:
            if node.get(keyword) == []:
                yield _join(path, keyword), what


def _schemas(schema: Any) -> Iterator[tuple[str, Any]]:
    """(path, schema) of the schema and every schema nested in it, outermost first."""
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        path, node = stack.pop()
        yield path, node
        if not isinstance(node, dict):
            continue
        children: list[tuple[str, Any]] = []
        properties = node.get(_SCHEMA_MAP)
        if isinstance(properties, dict):
            children.extend((_join(path, f"properties.{name}"), sub)
                            for name, sub in properties.items())
        for keyword in _SCHEMA_ONE:
            sub = node.get(keyword)
            if isinstance(sub, dict):
                children.append((_join(path, keyword), sub))
        for keyword in _SCHEMA_LIST:
            options = node.get(keyword)
            if isinstance(options, list):
                children.extend((_join(path, f"{keyword}[{index}]"), sub)
                                for index, sub in enumerate(options))
        stack.extend(reversed(children))


def _join(path: str, tail: str) -> str:
    if path and tail:
        return f"{path}{tail}" if tail.startswith("[") else f"{path}.{tail}"
    return path or tail
