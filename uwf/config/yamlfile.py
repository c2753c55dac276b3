"""Reading what a user wrote (YAML files, JSON input) within limits, into plain JSON values.

A YAML file is a regular file of at most `MAX_FILE_BYTES`; its aliases may not
expand it past `MAX_NODES` values (a 500-byte "billion laughs" file would otherwise cost
gigabytes), and nothing may nest deeper than `MAX_DEPTH` (deeper values exhaust
the recursion of the hashing and validation code). Only JSON's kinds of value
are accepted: YAML dates, `!!binary`, `!!set` and other tags are refused with
where they are, as are numbers outside float64 and strings UTF-8 cannot encode.
Errors name the file, line and column, or the value's path. The limits are
documented in docs/cli.md#limits.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

# One depth and one number range for every input, as the CAS stores them.
from uwf.cas.limits import MAX_DEPTH, MAX_NUMBER
from uwf.config.inputfile import LIMITS_DOC, read_input
from uwf.errors import Rejected, UsageError, UwfError

MAX_FILE_BYTES = 1 << 20  # 1 MiB
MAX_NODES = 100_000  # values of a YAML document, counted with its aliases expanded
SHORTEN = ("shorten it (store a large schema with `json-cas put` and give its hash); "
           + LIMITS_DOC)

_YAML = "tag:yaml.org,2002:"
_PLAIN_TAGS = {f"{_YAML}{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq",
                                             "merge")}
_TAG_WORDS = {
    "timestamp": "a date (YAML timestamp) is not a JSON value: quote it to keep it as text",
    "binary": "!!binary (bytes) is not a JSON value: give the text itself",
    "set": "!!set is not a JSON value: use a list",
    "omap": "!!omap is not a JSON value: use a mapping",
    "pairs": "!!pairs is not a JSON value: use a mapping",
}
# An integer of more digits is beyond float64 anyway (and int() refuses 4,300+ digits).
_MAX_INT_CHARS = 400


def load_yaml(path: Path, what: str = "", *, error: type[UwfError] = UsageError,
              named: str = "", too_big: str = SHORTEN, includes: bool = False) -> Any:
    """Parse a YAML file into plain JSON values; a syntax error names the file (as
    `what`), line and column, and a value beyond the limits says which limit.

    The file must be a regular file of at most MAX_FILE_BYTES (uwf.config.inputfile, which
    names it as `named`, `too_big` the next action past the limit); `error` is the class
    of that refusal and of text that is not UTF-8: a usage error for a file named on the
    command line, Rejected for the config. With `includes` (workflow files), each
    `!include PATH` is replaced by that file's nodes first (uwf.config.yamlinclude), so the
    limits hold for the whole, and the 1 MiB for every file read together.
    """
    import yaml

    data = read_input(path, MAX_FILE_BYTES, what=named, error=error, too_big=too_big)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"cannot read {named}{path}: {exc}", "give a UTF-8 YAML file") from None
    loader = _loader_class()(text)
    try:
        # Compose (cheap: an alias is the node it names, not a copy), check, then build.
        node = loader.get_single_node()
        if node is None:
            return None
        if includes:
            from uwf.config.yamlinclude import splice_includes

            node = splice_includes(node, path, MAX_FILE_BYTES - len(data), MAX_FILE_BYTES,
                                   _loader_class())
        if (found := _node_problem(node)) is not None:
            line, problem, action = found
            raise Rejected(f"{what}{path}: {line}{problem}", action)
        document = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        said = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise Rejected(f"{what}{path}: malformed YAML{where}: {said}", "fix the YAML") from None
    except RecursionError:  # the pure-Python parser on deep nesting (libyaml stops at 1,000)
        raise Rejected(f"{what}{path}: nested more than {MAX_DEPTH} deep", LIMITS_DOC) from None
    finally:
        loader.dispose()
    if (found_value := value_problem(document)) is not None:
        raise Rejected(f"{what}{path}: {found_value}", LIMITS_DOC)
    return document


def _node_problem(root: Any) -> tuple[str, str, str] | None:
    """(where, what, next action) for the first YAML node beyond the limits, or None.

    Sizes and heights are kept per node, so a node that many aliases name is
    measured once: the check costs the file's size, not its expansion's.
    """
    import yaml

    size: dict[int, int] = {}
    height: dict[int, int] = {}
    open_nodes: set[int] = set()  # being measured: the ancestors of the current node
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, measured = stack.pop()
        key = id(node)
        children = ([] if isinstance(node, yaml.ScalarNode) else node.value
                    if isinstance(node, yaml.SequenceNode) else
                    [part for pair in node.value for part in pair])
        if measured:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in children)
            height[key] = 1 + max((height[id(child)] for child in children), default=0)
            if size[key] > MAX_NODES:
                return ("", f"more than {MAX_NODES:,} nodes once aliases are expanded",
                        LIMITS_DOC)
            if height[key] > MAX_DEPTH:
                return (_at(node), f"nested more than {MAX_DEPTH} deep", LIMITS_DOC)
            continue
        if key in size:
            continue
        if key in open_nodes:
            return (_at(node), "an alias refers to a collection that contains it",
                    "an alias may only name a value defined apart from it")
        if node.tag not in _PLAIN_TAGS:
            name = node.tag.removeprefix(_YAML)
            words = _TAG_WORDS.get(name, f"the tag {node.tag} is not a JSON value: remove it")
            return (_at(node), words, "give plain JSON values (strings, numbers, true/false, "
                    "null, lists, mappings)")
        if isinstance(node, yaml.ScalarNode):
            if node.tag == f"{_YAML}int" and len(node.value) > _MAX_INT_CHARS:
                return (_at(node), f"a number of {len(node.value):,} digits is out of range",
                        LIMITS_DOC)
            size[key], height[key] = 1, 0
            continue
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children)
    return None


def _loader_class() -> Any:
    """PyYAML's safe loader (libyaml's when installed): plain YAML only, no objects."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _at(node: Any) -> str:
    mark = node.start_mark
    # A node of an included file: its marks are named after it (a loaded text's are
    # `<unicode string>`).
    of = "" if mark.name.startswith("<") else f" of {mark.name}"
    return f"at line {mark.line + 1}, column {mark.column + 1}{of}: "


def value_problem(value: Any) -> str | None:
    """Why `value` is not a plain JSON value within the limits, with its path; None when
    it is. Keys may be strings, numbers, booleans or null (YAML's keys; JSON's are
    strings). Iterative, so a deep value cannot exhaust the stack."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                return f"{_short(path)}: nested more than {MAX_DEPTH} deep"
            if isinstance(item, list):
                stack.extend((child, f"{path}[{index}]", depth + 1)
                             for index, child in enumerate(item))
                continue
            for key, child in item.items():
                child_path = f"{path}.{key}" if path else str(key)
                if isinstance(key, dict | list) or (problem := _scalar_problem(key)):
                    return f"{_short(child_path)}: the key: {problem or 'not a scalar'}"
                stack.append((child, child_path, depth + 1))
        elif (problem := _scalar_problem(item)) is not None:
            return f"{_short(path)}: {problem}"
    return None


def _short(path: str) -> str:
    """A path fit for one line: a value 200 deep has a path of 200 parts."""
    if not path:
        return "(root)"
    return path if len(path) <= 60 else f"{path[:28]}...{path[-28:]}"


def _scalar_problem(item: Any) -> str | None:
    if item is None or isinstance(item, bool):
        return None
    if isinstance(item, int):
        if abs(item) <= MAX_NUMBER:  # exact: Python compares int and float exactly
            return None
        digits = int(item.bit_length() * math.log10(2)) + 1  # str() refuses 4,300+ digits
        return f"a number of about {digits:,} digits is out of range"
    if isinstance(item, float):
        return None if math.isfinite(item) else f"the number {item!r} is out of range"
    if isinstance(item, str):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            return "a string holds a lone surrogate (such as \\ud800), which UTF-8 cannot encode"
        return None
    return f"a {type(item).__name__} is not a JSON value"
