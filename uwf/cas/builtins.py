"""The built-in schemas (`subset.SCHEMAS`): their names, nodes and hashes, which every
store holds (`Cas.ensure_builtins`), and which of them a thread's step may be."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from uwf.cas.hashing import node_hash, self_hash
from uwf.cas.subset import SCHEMAS, meta_schema

BUILTIN_NAMES = ("Workflow", "StartNode", "StepNode", "Text", "RetriedStepNode")
# A thread's step is a node of either type: a RetriedStepNode is a StepNode with
# upstream's `previousAttempts` (the StepNodes refused for the step before it), a type
# of its own so that a StepNode without them hashes as it always has.
STEP_NODE_NAMES = ("StepNode", "RetriedStepNode")


@cache
def meta_hash() -> str:
    """The bootstrap meta-schema's hash: XXH64 over its CBOR alone."""
    return self_hash(meta_schema())


@cache
def builtin_schema(name: str) -> dict[str, Any]:
    text = (SCHEMAS / f"{name}.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def builtin_hash(name: str) -> str:
    return node_hash(meta_hash(), builtin_schema(name))


def is_step_node_type(type_hash: str) -> bool:
    """Is `type_hash` a thread step's type (StepNode, or RetriedStepNode)?"""
    return type_hash in _step_hashes()


@cache
def _step_hashes() -> frozenset[str]:
    return frozenset(builtin_hash(name) for name in STEP_NODE_NAMES)


@cache
def _builtin_hashes() -> dict[str, str]:
    return {builtin_hash(name): name for name in BUILTIN_NAMES}
