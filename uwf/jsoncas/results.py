"""What `json-cas ...` returns: the payloads `--json` prints, typed (`put` and `hash`
print a hash as is)."""

from __future__ import annotations

from typing import Any

from uwf.payload import UNSET, Result, UnsetType


class NodeShown(Result):
    """`get`: a node's type, payload and first-stored time (ms since the epoch)."""

    type: str
    payload: Any
    timestamp: int


class Present(Result):
    """`has`: the node is in the store (an absent one is an error, exit 1)."""

    hash: str
    present: bool


class NodeProblem(Result):
    """What is wrong with a node."""

    hash: str
    problem: str


class CasVerified(Result):
    """`verify`: ok when no node checked has a problem."""

    ok: bool
    checked: int
    problems: list[NodeProblem]


class Walked(Result):
    """One node of `walk`: its hash and type, how deep and by which path it was
    reached, and whether it is missing (a dangling reference; its type is then "")."""

    hash: str
    type: str
    depth: int
    path: str
    missing: bool


class SchemaListed(Result):
    """One row of `schema list`: a schema node's hash and title."""

    hash: str
    title: str


class Collected(Result, kw_only=True):
    """`gc`: the unreachable nodes, `removed` with --yes, `unreachable` with
    --dry-run, and how many."""

    removed: list[str] | UnsetType = UNSET
    unreachable: list[str] | UnsetType = UNSET
    count: int
