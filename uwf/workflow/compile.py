"""Compile a parsed workflow document into a Workflow payload: every problem, with
its YAML path, in one error (SPEC §6)."""

from __future__ import annotations

import re
from typing import Any

from uwf.cas.hashing import is_hash
from uwf.cas.store import Cas, meta_hash, schema_problems
from uwf.errors import Rejected
from uwf.workflow.templates import template_problem

START = "$START"
END = "$END"
_TOP_KEYS = {"version", "name", "description", "roles", "graph"}
_ROLE_TEXT = ("description", "goal", "procedure", "output")
_ROLE_KEYS = {*_ROLE_TEXT, "capabilities", "meta"}
_DEFAULT_META: dict[str, Any] = {"type": "object"}
# The Workflow schema's pattern for `name` (uwf/cas/schemas/Workflow.json): ASCII only,
# where str.isalnum() would let "café" through to be refused at the CAS put.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, problem: str) -> None:
        self.items.append(f"{path}: {problem}")


def compile_workflow(cas: Cas, document: Any) -> tuple[dict[str, Any], list[Any]]:
    """Check a parsed workflow; return its Workflow payload and the role schemas.

    Every problem is reported, each with its YAML path, in one Rejected error.
    """
    problems = _Problems()
    if not isinstance(document, dict):
        raise Rejected("workflow must be a YAML mapping", "see docs/workflows.md for the format")
    for key in sorted(set(document) - _TOP_KEYS, key=str):
        problems.add(str(key), f"unknown field (allowed: {', '.join(sorted(_TOP_KEYS))})")
    if "version" in document and document["version"] != 1:
        problems.add("version", f"unsupported version {document['version']!r} (only 1)")
    name = document.get("name")
    if not isinstance(name, str) or not name:
        problems.add("name", "required: a non-empty string")
    elif is_hash(name) or not _NAME.fullmatch(name):
        problems.add("name", f"{name!r} is not a valid name (ASCII letters, digits, . _ -, "
                     "starting with a letter or digit)")
    description = document.get("description", "")
    if not isinstance(description, str):
        problems.add("description", "must be a string")
    roles, schemas = _roles(cas, document.get("roles"), problems)
    graph = _graph(document.get("graph"), set(roles), problems)
    if problems.items:
        count = len(problems.items)
        raise Rejected(
            f"workflow has {count} problem{'s' if count > 1 else ''}: " + "; ".join(problems.items),
            "fix them and run `uwf workflow put` again",
        )
    payload = {"name": name, "description": description, "roles": roles, "graph": graph}
    return payload, schemas


def _roles(
    cas: Cas, raw: Any, problems: _Problems
) -> tuple[dict[str, Any], list[Any]]:
    roles: dict[str, Any] = {}
    schemas: list[Any] = []
    if not isinstance(raw, dict) or not raw:
        problems.add("roles", "required: a mapping of role name to role definition")
        return roles, schemas
    for role_name in raw:
        path = f"roles.{role_name}"
        if not isinstance(role_name, str) or not role_name or role_name.startswith("$"):
            problems.add(path, "a role name is a non-empty string not starting with $")
            continue
        spec = {} if raw[role_name] is None else raw[role_name]
        if not isinstance(spec, dict):
            problems.add(path, "must be a mapping")
            continue
        for key in sorted(set(spec) - _ROLE_KEYS, key=str):
            allowed = ", ".join(sorted(_ROLE_KEYS))
            problems.add(f"{path}.{key}", f"unknown field (allowed: {allowed})")
        role: dict[str, Any] = {}
        for key in _ROLE_TEXT:
            value = spec.get(key, "")
            if not isinstance(value, str):
                problems.add(f"{path}.{key}", "must be a string")
            role[key] = value
        capabilities = spec.get("capabilities", [])
        if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
            problems.add(f"{path}.capabilities", "must be a list of strings")
        role["capabilities"] = capabilities
        role["meta"] = _meta(cas, spec.get("meta", _DEFAULT_META), f"{path}.meta", problems,
                             schemas)
        roles[role_name] = role
    return roles, schemas


def _meta(cas: Cas, meta: Any, path: str, problems: _Problems, schemas: list[Any]) -> str:
    if isinstance(meta, str):
        if not is_hash(meta):
            problems.add(path, f"{meta!r} is neither an inline JSON Schema nor a schema hash")
        elif not cas.has(meta) or cas.get(meta).type != meta_hash():
            problems.add(path, f"schema {meta} is not a schema node in the store")
        return meta
    if (bad_key := _non_string_key(meta)) is not None:
        where, key = bad_key
        problems.add(f"{path}.{where}" if where else path,
                     f"key {key!r} is not a string: quote it")
        return ""
    found = schema_problems(meta)
    for problem in found:
        problems.add(path, f"invalid JSON Schema: {problem}")
    if found:
        return ""
    schemas.append(meta)
    from uwf.cas.hashing import node_hash

    return node_hash(meta_hash(), meta)


def _non_string_key(schema: Any) -> tuple[str, Any] | None:
    """(path, key) of a key that is not a string: YAML reads `1:` as a number, which the
    stored JSON would turn into "1" while the hash (over CBOR) keeps it a number."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, list):
            stack.extend((item, f"{path}[{index}]") for index, item in enumerate(value))
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return path, key
                stack.append((item, f"{path}.{key}" if path else key))
    return None


def _graph(raw: Any, roles: set[str], problems: _Problems) -> dict[str, Any]:
    graph: dict[str, Any] = {}
    if not isinstance(raw, dict):
        problems.add("graph", "required: a mapping of role to {status: target}")
        return graph
    if START not in raw:
        problems.add("graph", f"missing {START}: where the thread begins")
    for source, edges in raw.items():
        path = f"graph.{source}"
        if not isinstance(source, str):
            problems.add(path, f"{source!r} is not a string: quote it")
            continue
        if source != START and source not in roles:
            problems.add(path, f"{source!r} is not a role (roles: {', '.join(sorted(roles))})")
        if not isinstance(edges, dict) or not edges:
            problems.add(path, "must map each status to a target")
            continue
        if source == START and "_" not in edges:
            problems.add(path, "needs the status `_`: the first step's target")
        targets: dict[str, Any] = {}
        for status, raw_target in edges.items():
            edge_path = f"{path}.{status}"
            if not isinstance(status, str):
                problems.add(edge_path, f"status {status!r} is not a string (YAML reads "
                             "yes/no/on/off and numbers as other types: quote it)")
                continue
            shorthand = isinstance(raw_target, str)
            target = {"role": raw_target, "prompt": ""} if shorthand else raw_target
            if not isinstance(target, dict):
                problems.add(edge_path, "a target is a role name or {role, prompt}")
                continue
            for key in sorted(set(target) - {"role", "prompt"}, key=str):
                problems.add(f"{edge_path}.{key}", "unknown field (allowed: prompt, role)")
            role = target.get("role")
            prompt = target.get("prompt", "")
            if role != END and role not in roles:
                problems.add(f"{edge_path}.role", f"unknown role {role!r} (use a role or {END})")
            if not isinstance(prompt, str):
                problems.add(f"{edge_path}.prompt", "must be a string")
            elif (problem := template_problem(prompt)) is not None:
                problems.add(f"{edge_path}.prompt", problem)
            targets[str(status)] = {"role": role, "prompt": prompt}
        graph[str(source)] = targets
    return graph
