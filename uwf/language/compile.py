"""Compile a parsed workflow document into a Workflow payload: every problem, with
its YAML path, in one error (SPEC §6); and the warnings a registered workflow
still deserves (`workflow_warnings`).

Beyond the document's shape, each edge is checked against the schema of the role
it leaves (`_edge_findings`, reading the schema through outputs.py): statuses
against the values the role's `status` lists (an enum, a const, or `oneOf` /
`anyOf` branches of them), an edge prompt's Mustache names against the fields the
role's output may have, and an edge prompt that would reach its agent as nothing
but whitespace.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

from uwf.cas.builtins import meta_hash
from uwf.cas.hashing import is_hash, node_hash
from uwf.cas.store import Cas
from uwf.cas.subset import schema_findings
from uwf.errors import Rejected
from uwf.language import outputs
from uwf.language.conditions import expression_problem
from uwf.language.moderator import ANY_STATUS, RESERVED, render
from uwf.language.semantics import Finding, for_status, reach_findings, routing_findings
from uwf.language.templates import template_names, template_problem

START = "$START"
END = "$END"
_TOP_KEYS = {"version", "name", "description", "roles", "conditions", "graph"}
_CONDITION_KEYS = {"description", "expression"}
_ENTRY_KEYS = {"role", "condition", "prompt"}
_ROLE_TEXT = ("description", "goal", "procedure", "output")
_ROLE_KEYS = {*_ROLE_TEXT, "capabilities", "meta"}
_DEFAULT_META: dict[str, Any] = {"type": "object"}
# A workflow's (and a condition's) name: ASCII only, where str.isalnum() would let
# "café" through. A condition is never named `_`, the fallback's status.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)
# The prompt check renders with every combination of a template's required fields
# present and empty: 2**this renders at most; beyond it the check is skipped.
_MAX_RENDERED_FIELDS = 6


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, problem: str) -> None:
        self.items.append(f"{path}: {problem}")


def compile_workflow(cas: Cas, document: Any) -> tuple[dict[str, Any], list[Any]]:
    """Check a parsed workflow; return its Workflow payload and the role schemas.

    Every problem is reported, each with its YAML path, in one Rejected error.
    `conditions` is in the payload only when the document has it.
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
    conditions = (_conditions(document["conditions"], problems) if "conditions" in document
                  else None)
    role_names = _role_names(document.get("roles"), roles)
    graph = _graph(document.get("graph"), role_names, conditions or {}, problems)
    # Who reaches whom is judged on a graph whose edges are all sound: one refused for
    # its shape would make its target look unreachable, the same mistake told twice.
    sound = not any(item.startswith("graph") for item in problems.items)
    for finding in _edge_findings(graph, conditions or {}, _role_schemas(cas, roles, schemas),
                                  role_names if sound else None):
        if finding.error:
            problems.add(finding.path, finding.text)
    if problems.items:
        count = len(problems.items)
        raise Rejected(
            f"workflow has {count} problem{'s' if count > 1 else ''}: " + "; ".join(problems.items),
            "fix them and run `uwf workflow put` again",
        )
    payload = {"name": name, "description": description, "roles": roles, "graph": graph}
    if conditions is not None:
        payload["conditions"] = conditions
    return payload, schemas


def workflow_warnings(cas: Cas, payload: dict[str, Any], schemas: list[Any]) -> list[str]:
    """What `put` accepts but reports, one `<YAML path>: <text>` each: an enum status
    with no edge, a Mustache name the (open) schema does not declare, a list entry
    after the fallback, a condition no entry uses."""
    role_schemas = _role_schemas(cas, payload.get("roles", {}), schemas)
    findings = _edge_findings(payload.get("graph", {}), payload.get("conditions", {}),
                              role_schemas, set(payload.get("roles", {})))
    return [f"{finding.path}: {finding.text}" for finding in findings if not finding.error]


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


def _role_names(raw: Any, roles: dict[str, Any]) -> set[str]:
    """The roles the graph may name: a role refused for its definition is still one,
    so that its mistake is reported once, not again at every edge naming it."""
    if not isinstance(raw, dict):
        return set(roles)
    return {name for name in raw if isinstance(name, str) and name and not name.startswith("$")}


def _meta(cas: Cas, meta: Any, path: str, problems: _Problems, schemas: list[Any]) -> str:
    if isinstance(meta, str):
        if not is_hash(meta):
            problems.add(path, f"{meta!r} is neither an inline JSON Schema nor a schema hash")
        elif not cas.has(meta) or cas.get(meta).type != meta_hash():
            problems.add(path, f"schema {meta} is not a schema node in the store")
        return meta
    bad_keys = list(_non_string_keys(meta))
    for where, key in bad_keys:
        problems.add(f"{path}.{where}" if where else path,
                     f"key {key!r} is not a string: quote it")
    if bad_keys:
        return ""
    found = list(schema_findings(meta))
    for where, problem in found:
        problems.add(_join(path, where), f"invalid JSON Schema: {problem}")
    if found:
        return ""
    schemas.append(meta)
    return node_hash(meta_hash(), meta)


def _join(path: str, inner: str) -> str:
    """A YAML path and a path inside the value it names (`properties.a`, `[0]`, "")."""
    if not inner:
        return path
    return f"{path}{inner}" if inner.startswith("[") else f"{path}.{inner}"


def _non_string_keys(schema: Any) -> Iterator[tuple[str, Any]]:
    """(path, key) of each key that is not a string, outermost first: YAML reads `1:` as
    a number, which the stored JSON would turn into "1" while the hash (over CBOR)
    keeps it a number."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        value, path = stack.pop()
        children: list[tuple[Any, str]] = []
        if isinstance(value, list):
            children = [(item, f"{path}[{index}]") for index, item in enumerate(value)]
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    yield path, key
                else:
                    children.append((item, f"{path}.{key}" if path else key))
        stack.extend(reversed(children))


def _conditions(raw: Any, problems: _Problems) -> dict[str, Any]:
    """`conditions`: name -> {description, expression}, each expression JSONata."""
    conditions: dict[str, Any] = {}
    if not isinstance(raw, dict):
        problems.add("conditions", "must be a mapping of condition name to "
                     "{description, expression}")
        return conditions
    for name, spec in raw.items():
        path = f"conditions.{name}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.add(path, f"{name!r} is not a valid condition name (ASCII letters, "
                         "digits, . _ -, starting with a letter or digit)")
            continue
        if not isinstance(spec, dict):
            problems.add(path, "must be a mapping {description, expression}")
            continue
        for key in sorted(set(spec) - _CONDITION_KEYS, key=str):
            problems.add(f"{path}.{key}", "unknown field (allowed: description, expression)")
        description = spec.get("description", "")
        if not isinstance(description, str):
            problems.add(f"{path}.description", "must be a string")
        expression = spec.get("expression")
        if not isinstance(expression, str) or not expression.strip():
            problems.add(f"{path}.expression", "required: a JSONata expression (a string)")
        elif (problem := expression_problem(expression)) is not None:
            problems.add(f"{path}.expression", problem)
        conditions[name] = {"description": description, "expression": expression}
    return conditions


def _graph(raw: Any, roles: set[str], conditions: dict[str, Any], problems: _Problems
           ) -> dict[str, Any]:
    graph: dict[str, Any] = {}
    if not isinstance(raw, dict):
        problems.add("graph", "required: a mapping of role to {status: target} or to a list "
                     "of {role, condition, prompt}")
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
        if isinstance(edges, list) and edges:
            graph[source] = _entries(edges, path, roles, conditions, problems)
            continue
        if not isinstance(edges, dict) or not edges:
            problems.add(path, "must map each status to a target, or list "
                         "{role, condition, prompt} entries")
            continue
        if source == START and ANY_STATUS not in edges:
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
            targets[status] = _target(target, edge_path, roles, problems)
        graph[source] = targets
    return graph


def _entries(raw: list[Any], path: str, roles: set[str], conditions: dict[str, Any],
             problems: _Problems) -> list[dict[str, Any]]:
    """A list-form source: `{role, condition, prompt}` entries, tried in order."""
    entries: list[dict[str, Any]] = []
    for index, entry in enumerate(raw):
        entry_path = f"{path}[{index}]"
        if not isinstance(entry, dict):
            problems.add(entry_path, "an entry is {role, condition, prompt}")
            continue
        for key in sorted(set(entry) - _ENTRY_KEYS, key=str):
            problems.add(f"{entry_path}.{key}", "unknown field (allowed: condition, prompt, role)")
        condition = entry.get("condition")
        if "condition" not in entry:
            problems.add(f"{entry_path}.condition",
                         "required: a condition's name, or null for the fallback")
        elif condition is not None and not isinstance(condition, str):
            problems.add(f"{entry_path}.condition", "must be a condition's name or null")
        elif condition is not None and condition not in conditions:
            known = ", ".join(sorted(conditions)) or "none are defined"
            problems.add(f"{entry_path}.condition",
                         f"unknown condition {condition!r} (conditions: {known})")
        entries.append({**_target(entry, entry_path, roles, problems), "condition": condition})
    return entries


def _target(target: dict[Any, Any], path: str, roles: set[str], problems: _Problems
            ) -> dict[str, Any]:
    role = target.get("role")
    prompt = target.get("prompt", "")
    if role != END and not (isinstance(role, str) and role in roles):  # YAML: any value
        problems.add(f"{path}.role", f"unknown role {role!r} (use a role or {END})")
    if not isinstance(prompt, str):
        problems.add(f"{path}.prompt", "must be a string")
    elif (problem := template_problem(prompt)) is not None:
        problems.add(f"{path}.prompt", problem)
    return {"role": role, "prompt": prompt}


# -- edges against the schemas of the roles they leave -------------------------------

def _role_schemas(cas: Cas, roles: dict[str, Any], schemas: list[Any]) -> dict[str, Any]:
    """Each role's output schema: an inline one, or the stored node its hash names."""
    inline = {node_hash(meta_hash(), schema): schema for schema in schemas}
    found: dict[str, Any] = {}
    for role, spec in roles.items():
        meta = spec.get("meta") if isinstance(spec, dict) else None
        if meta in inline:
            found[role] = inline[meta]
        elif (isinstance(meta, str) and is_hash(meta) and cas.has(meta)
              and (node := cas.get(meta)).type == meta_hash()):
            found[role] = node.payload
    return found


def _edge_findings(graph: dict[str, Any], conditions: dict[str, Any],
                   role_schemas: dict[str, Any], roles: set[str] | None) -> list[Finding]:
    """Problems and warnings of each edge, given what its source role outputs, then
    of the graph as a whole (semantics.py). Edges that are already refused for their
    shape (an unknown role, a prompt that does not parse) are passed over; `roles`
    None: the graph's reach is not judged."""
    findings: list[Finding] = []
    used: set[str] = set()
    for source, edges in graph.items():
        schema = role_schemas.get(source)
        schema = schema if isinstance(schema, dict) else None
        if isinstance(edges, list):
            fallback = None
            for index, entry in enumerate(edges):
                path = f"graph.{source}[{index}]"
                if fallback is not None:
                    findings.append(Finding(path, f"unreachable: the fallback {fallback} "
                                             "(condition null) comes first", False))
                if entry["condition"] is None:
                    fallback = fallback or path
                else:
                    used.add(str(entry["condition"]))
                findings += _prompt_findings(f"{path}.prompt", entry, source, schema)
        else:
            if schema is not None and source != START:
                findings += _status_findings(source, edges, schema)
                findings += routing_findings(source, edges, schema)
            for status, target in edges.items():
                # A reserved status's prompt reads the question and its answer, not the
                # role's own fields (uwf/language/asking.py): its names are not checked.
                selected = (None if schema is None or status in RESERVED
                            else for_status(schema, str(status)))
                findings += _prompt_findings(f"graph.{source}.{status}.prompt", target,
                                             source, selected,
                                             "" if selected is schema else str(status))
    findings += [Finding(f"conditions.{name}", "not used by any graph entry", False)
                 for name in conditions if name not in used]
    if roles is not None:
        findings += reach_findings(graph, roles)
    return findings


def _status_findings(source: str, edges: dict[str, Any], schema: dict[str, Any]
                     ) -> Iterator[Finding]:
    """Statuses the role's schema cannot produce (refused), and statuses it can
    produce with no edge (warned): when the schema lists its `status` values, by
    `enum`, `const` or `oneOf` / `anyOf` branches of them (outputs.status_values)."""
    values = outputs.status_values(schema)
    if values is None:
        return
    strings = [value for value in values if isinstance(value, str)]
    shown = ", ".join(strings) or "none"
    # `_` is the status of an output without a string status.
    bare = not outputs.requires(schema, "status") or len(strings) < len(values)
    where = f"roles.{source}.meta"
    for status in edges:
        if status in strings or status in RESERVED or (status == ANY_STATUS and bare):
            continue  # a reserved status ($ASK, $TIMEOUT) is the moderator's, not the schema's
        if status == ANY_STATUS:
            yield Finding(f"graph.{source}.{status}", f"never taken: {where} requires a "
                           f"string status ({shown}), so it is never `_`", True)
        else:
            yield Finding(f"graph.{source}.{status}", f"status {status!r} is not one that "
                           f"{where} allows ({shown})", True)
    for status in strings:
        if status not in edges:
            yield Finding(f"graph.{source}", f"status {status!r} (allowed by {where}) has "
                           f"no edge: a thread whose {source} reports it will block", False)


def _prompt_findings(path: str, target: dict[str, Any], source: str,
                     schema: dict[str, Any] | None, status: str = "") -> Iterator[Finding]:
    """An edge prompt's Mustache names against the fields the source role outputs
    (after `$START`, only `prompt`), and a prompt that renders to whitespace.

    `{{prompt}}` is the one name the renderer always provides (the user's prompt,
    unless the output has a field of that name), so it is never flagged. `status`:
    the status `schema` was narrowed to (its branches that admit it: semantics.
    for_status), "" when it is the whole schema.
    """
    prompt = target.get("prompt")
    if not isinstance(prompt, str) or not prompt or template_problem(prompt) is not None:
        return
    names = template_names(prompt)
    where = f"roles.{source}.meta" + (f" for status {status!r}" if status else "")
    for name in sorted(names - {"prompt"}):
        if source == START:
            yield Finding(path, f"{{{{{name}}}}} is not available after {START}: there "
                           "is no output yet, only {{prompt}}", True)
        elif schema is None or not outputs.describes_fields(schema):
            continue  # nothing said about the output's fields: nothing to check
        elif not outputs.admits(schema, name):
            # No "; " in a problem: the refusal joins them with it.
            available = ", ".join(f"{{{{{field}}}}}" for field in sorted(
                {"prompt"} | {field for field in outputs.declared(schema)
                              if outputs.admits(schema, field)}))
            yield Finding(path, f"{{{{{name}}}}} is not a field of {where}, which "
                           f"allows no others (available: {available})", True)
        elif name not in outputs.declared(schema):
            yield Finding(path, f"{{{{{name}}}}} is not a property of {where}: it "
                           "renders empty unless the output has it", False)
    if target.get("role") != END and (blank := _blank(prompt, names, source, schema)):
        yield Finding(path, blank, True)


def _blank(prompt: str, names: set[str], source: str, schema: dict[str, Any] | None
           ) -> str | None:
    """Why the prompt can reach its agent as nothing but whitespace, or None.

    It is rendered with `{{prompt}}` (never empty) present, each of the source
    schema's required fields it reads present or empty (every combination), and
    every other field absent; blank every time means blank whatever the output
    holds, short of the optional fields.
    """
    use = 'or use "" for no edge prompt'
    if not prompt.strip():
        return f"is only whitespace: write the instruction, {use}"
    fields = ([] if schema is None or source == START
              else sorted(name for name in names if outputs.requires(schema, name)))
    if len(fields) > _MAX_RENDERED_FIELDS:
        return None
    for values in itertools.product(("x", ""), repeat=len(fields)):
        scope: dict[str, Any] = {"prompt": "x", **dict(zip(fields, values, strict=True))}
        if render(prompt, scope).strip():
            return None
    optional = sorted(names - set(fields) - {"prompt"})
    if not optional or not render(prompt, dict.fromkeys(names, "x")).strip():
        return f"renders to nothing but whitespace whatever the output holds: {use}"
    shown = ", ".join(f"{{{{{name}}}}}" for name in optional)
    it = "it" if len(optional) == 1 else "them"
    return (f"renders to nothing but whitespace when the output lacks {shown}, which "
            f"roles.{source}.meta does not require: put text around {it}, require {it}, "
            f"{use}" if source != START else
            f"renders to nothing but whitespace: {shown} is never set after {START}; {use}")
