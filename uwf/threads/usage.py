"""What a step's agent spent (`usage`): taken out of the output, kept in the detail.

An agent reports `usage: {inputTokens, outputTokens, cost}` as a top-level field of
its output (the JSON it submits, or the front matter `uwf-exec` reads). The output
is validated against the role's schema and routed on, so usage is not left in it
(unless the schema itself declares a `usage` property: then it is the role's own
field and stays). It is kept in the step's detail instead: the Text detail starts
with a YAML front matter block holding it. When `uwf thread step` accepts the
StepNode it reads that block and records the usage in `thread.stepped`, so the run
index sums it without reading a node (docs/agents.md#usage).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from typing import Any

import msgspec

from uwf.cas.builtins import builtin_hash
from uwf.cas.store import Cas
from uwf.errors import Rejected
from uwf.threads.events import Usage

USAGE_FIELD = "usage"
# YAML front matter at the very start of a detail text (as `uwf-exec` reads an answer).
_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_OWN = re.compile(r"\Ausage: (\{[^\n]*\})\Z")


def parse_usage(value: Any, where: str = "usage") -> Usage:
    """`value` as a Usage: an object of `inputTokens`, `outputTokens` (integers) and
    `cost` (a number), each 0 or more and each optional, nothing else. Rejected (exit
    1) naming what is wrong otherwise."""
    hint = ("report usage as {inputTokens: N, outputTokens: N, cost: X} (each optional, "
            "0 or more)")
    if not isinstance(value, dict) or not value:
        raise Rejected(f"{where} must be a non-empty object", hint)
    cost = value.get("cost")
    if isinstance(cost, float) and not math.isfinite(cost):
        raise Rejected(f"{where}.cost must be a finite number", hint)
    try:
        return msgspec.convert(value, Usage)
    except msgspec.ValidationError as exc:
        raise Rejected(f"{where} is not a usage: {exc}", hint) from None


def split_usage(output: Any, schema: Any) -> tuple[Any, Usage | None]:
    """The output without its top-level `usage` field, and that usage parsed; the
    output unchanged when it has none, or when the role's schema declares `usage`
    (then it is the role's own field)."""
    if not isinstance(output, dict) or USAGE_FIELD not in output:
        return output, None
    declared = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(declared, dict) and USAGE_FIELD in declared:
        return output, None
    rest = {key: value for key, value in output.items() if key != USAGE_FIELD}
    return rest, parse_usage(output[USAGE_FIELD], "the output's usage")


def with_usage(detail: str, usage: Usage) -> str:
    """The detail text with a front matter block holding `usage` before it."""
    fields = json.dumps(msgspec.to_builtins(usage), separators=(", ", ": "))
    return f"---\nusage: {fields}\n---\n{detail}"


def usage_of_detail(text: str) -> Usage | None:
    """The usage a detail text's front matter reports (None: no front matter, or one
    without `usage`). A `usage` that is not one is Rejected: never read as none."""
    front = _FRONT.match(text)
    if front is None:
        return None
    own = _OWN.match(front.group(1))
    if own is not None:  # the header `with_usage` writes: JSON (PyYAML reads 1e-05 as text)
        with contextlib.suppress(json.JSONDecodeError):
            return parse_usage(json.loads(own.group(1)), "the detail's usage")
    import yaml

    try:
        header = yaml.safe_load(front.group(1))
    except yaml.YAMLError:
        return None  # a detail that merely starts with `---`: text, not a header
    if not isinstance(header, dict) or USAGE_FIELD not in header:
        return None
    return parse_usage(header[USAGE_FIELD], "the detail's usage")


def step_usage(cas: Cas, step: dict[str, Any]) -> Usage | None:
    """The usage a StepNode's detail reports: only a Text detail can (a detail that is
    another node, such as a sub-workflow's terminal StepNode, reports none)."""
    node = cas.get(step["detail"])
    if node.type != builtin_hash("Text") or not isinstance(node.payload, str):
        return None
    return usage_of_detail(node.payload)
