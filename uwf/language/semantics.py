"""What a workflow means, beyond each edge: which roles a thread can reach, and which
output schemas route well. The checks united-workforce makes at registration, read
for uwf's language (docs/workflows.md#what-the-graph-means).

- A role wired into the graph (an edge leaves it or leads to it) that no path of
  edges from `$START` reaches never runs: a mistake, refused.
- A role in no edge at all is a draft, or left over: a warning.
- A role with edges for several statuses whose schema does not list its status
  values: whether every status it reports is routed cannot be checked (a warning).
- A schema whose `oneOf` / `anyOf` branches do not each say their `status` (an
  `enum` beside them, or none): an edge's prompt cannot be checked against the
  branch its status selects, only against all of them (a warning).

`for_status` is the other half of the last check: the part of an output schema a
status selects, which the prompt checks read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from uwf.language import outputs
from uwf.language.moderator import RESERVED

START = "$START"
END = "$END"
ANY_STATUS = "_"
_BRANCHES = ("anyOf", "oneOf")


@dataclass(frozen=True)
class Finding:
    path: str
    text: str
    error: bool  # refused at put; otherwise a warning


def targets(edges: Any) -> list[str]:
    """The roles an edge list or status map leads to (`$END` and non-strings left out)."""
    found = edges if isinstance(edges, list) else (
        list(edges.values()) if isinstance(edges, dict) else [])
    return [target["role"] for target in found if isinstance(target, dict)
            and isinstance(target.get("role"), str) and target["role"] != END]


def reach_findings(graph: dict[str, Any], roles: set[str]) -> Iterator[Finding]:
    """Roles no thread can reach: refused when wired into the graph, warned when in no
    edge at all. Nothing is said without `$START` (that is refused already, and every
    role would be unreachable)."""
    if START not in graph:
        return
    leads_to: dict[str, list[str]] = {}
    for source, edges in graph.items():
        for target in targets(edges):
            leads_to.setdefault(target, []).append(source)
    reached: set[str] = set()
    pending = [START]
    while pending:
        for target in targets(graph.get(pending.pop())):
            if target not in reached:
                reached.add(target)
                pending.append(target)
    for role in sorted(roles - reached):
        sources = sorted(set(leads_to.get(role, [])) - {role})
        if role not in graph and role not in leads_to:
            yield Finding(f"roles.{role}", "in no edge of the graph: no thread runs it (a "
                          "draft?); lead an edge to it, or remove it", False)
        elif not sources:
            yield Finding(f"graph.{role}", "unreachable: no edge from another role or "
                          f"{START} leads to it, so no thread runs it (lead one to it, or "
                          "remove it)", True)
        else:
            yield Finding(f"graph.{role}" if role in graph else f"roles.{role}",
                          f"unreachable from {START}: the edges leading to it leave "
                          f"{', '.join(sources)}, which no thread reaches", True)


def routing_findings(source: str, edges: dict[str, Any], schema: dict[str, Any]
                     ) -> Iterator[Finding]:
    """A status map's source whose schema does not let its statuses be checked."""
    statuses = [status for status in edges if status != ANY_STATUS and status not in RESERVED]
    if len(statuses) < 2:
        return
    where = f"roles.{source}.meta"
    if _undiscriminated(schema):  # says what to do about the next one too
        yield Finding(where, "its oneOf/anyOf branches do not each give `status` a "
                      "const (or enum) of their own, so an edge's prompt is checked "
                      "against every branch, not the one its status selects; give each "
                      "branch `properties: {status: {const: ...}}`", False)
    elif outputs.status_values(schema) is None:
        yield Finding(f"graph.{source}", f"routes the statuses {', '.join(statuses)}, but "
                      f"{where} does not list the status values, so whether each one it "
                      "reports has an edge is not checked; list them (`status: {enum: "
                      "[...]}`, or `oneOf` branches with `status: {const: ...}`)", False)


def for_status(schema: dict[str, Any], status: str) -> dict[str, Any]:
    """The schema an output reporting `status` matches: each top-level `oneOf` / `anyOf`
    narrowed to the branches that admit the status (a branch that does not list its
    status values admits any). The schema itself when no branch is left out, or when
    none would be left (the status is refused elsewhere then)."""
    if status == ANY_STATUS:
        return schema
    narrowed = dict(schema)
    for keyword in _BRANCHES:
        branches = schema.get(keyword)
        if not isinstance(branches, list) or not branches:
            continue
        kept = [branch for branch in branches
                if (values := outputs.status_values(branch)) is None or status in values]
        if kept and len(kept) < len(branches):
            narrowed[keyword] = kept
    return narrowed if narrowed != schema else schema


def _undiscriminated(schema: dict[str, Any]) -> bool:
    """Some top-level branch list of several branches has a branch that does not list
    its status values."""
    for keyword in _BRANCHES:
        branches = schema.get(keyword)
        if (isinstance(branches, list) and len(branches) > 1
                and any(outputs.status_values(branch) is None for branch in branches)):
            return True
    return False
