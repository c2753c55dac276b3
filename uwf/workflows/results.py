"""What `uwf workflow ...` returns: the payloads `--json` prints, typed."""

from __future__ import annotations

from typing import Any

from uwf.payload import UNSET, Result, UnsetType


class Registered(Result):
    """`workflow put`: the Workflow node's hash and its name, with what is worth a
    look (each `<YAML path>: <text>`) when there is any."""

    workflow: str
    name: str
    warnings: list[str] | UnsetType = UNSET


class WorkflowShown(Result):
    """`workflow show`: the node's hash, its name and its whole definition; `source`,
    the repo file it came from when one holds the name (without it, the store's
    registered version was used), and `storeVersion`, the name's registered version
    when the file's is another."""

    workflow: str
    name: str
    definition: dict[str, Any]
    source: str | UnsetType = UNSET
    store_version: str | UnsetType = UNSET


class WorkflowListed(Result):
    """One row of `workflow list`: a registered name and the hash it points at."""

    name: str
    workflow: str
    registered_at: str
    versions: int
