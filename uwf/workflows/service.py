"""`uwf workflow put|show|list`: YAML in, a validated Workflow node out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from uwf.cas.builtins import builtin_hash, meta_hash
from uwf.cas.hashing import is_hash, node_hash
from uwf.cas.store import Cas
from uwf.config.yamlfile import load_yaml
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome, Views
from uwf.errors import NotFound, Rejected, UwfError
from uwf.payload import UNSET
from uwf.redact import redact_value
from uwf.store import Store
from uwf.workflows.decide import register
from uwf.workflows.results import Registered, WorkflowListed


class CheckedWorkflow(msgspec.Struct, frozen=True):
    """A workflow file read and checked, nothing written yet: what registering it
    would store and the hash its Workflow node will have."""

    payload: dict[str, Any]
    schemas: list[Any]
    hash: str
    warnings: list[str]

    @property
    def name(self) -> str:
        return str(self.payload["name"])


def put_workflow(store: Store, path: str | Path) -> Registered:
    """Register a workflow file; returns its hash and name, and its warnings (each
    `<YAML path>: <text>`) when there are any.

    Everything is checked before the first write, with the checks the CAS puts make,
    so a refused file leaves the CAS and the log as they were.
    """
    return register_workflow(store, check_workflow_file(store, path))


def check_workflow_file(store: Store, path: str | Path) -> CheckedWorkflow:
    """Read a workflow file (its `!include`s too) and check everything `put` checks;
    writes nothing."""
    # Compiling (templates, conditions, output checks) is only for a file being put: a
    # show or a list by name does not import it.
    from uwf.language.compile import compile_workflow, workflow_warnings

    document = load_yaml(Path(path), includes=True)
    if store.redact is not None:
        # As the CAS will store it: schema hashes are computed over the redacted text.
        document = redact_value(document, store.redact)
    payload, schemas = compile_workflow(store.cas, document)
    _check_nodes(store.cas, payload, schemas)
    warnings = workflow_warnings(store.cas, payload, schemas)
    return CheckedWorkflow(payload, schemas, node_hash(builtin_hash("Workflow"), payload),
                           warnings)


def register_workflow(store: Store, checked: CheckedWorkflow, *,
                      conflict: Callable[[str], UwfError] | None = None) -> Registered:
    """Store a checked workflow's nodes, then point its name at it (`workflow.registered`)
    unless the name already points there. With `conflict`, a name already pointing at
    another hash is refused instead, with `conflict(that hash)`."""
    # Nodes first, then the event that refers to them (durability order).
    workflow_hash = store_workflow(store.cas, checked)
    name = checked.name

    result = Registered(workflow=workflow_hash, name=name,
                        warnings=checked.warnings if checked.warnings else UNSET)

    def decide(views: Views) -> Outcome[Registered]:
        current = views.get("workflows", name)
        registered = register(current, name, workflow_hash)
        if registered is None:
            return Outcome((), result)  # already registered: idempotent, nothing to append
        if current is not None and conflict is not None:  # the caller's choice, not a rule
            raise conflict(current.hash)
        return Outcome([NewEvent(f"workflow/{name}", registered)], result)

    return store.journal.write(decide)


def store_workflow(cas: Cas, checked: CheckedWorkflow) -> str:
    """Store a checked workflow's nodes (its schemas, then the Workflow node) and
    return its hash; no event: a name is pointed at it by `register_workflow`, or a
    thread started on it names it."""
    cas.ensure_builtins()
    for schema in checked.schemas:
        cas.put_schema(schema)
    return cas.put(builtin_hash("Workflow"), checked.payload)


def _check_nodes(cas: Cas, payload: dict[str, Any], schemas: list[Any]) -> None:
    """Refuse, writing nothing, what `Cas.put` would refuse part way through the writes."""
    found = [f"role schema: {problem}" for schema in schemas
             for problem in cas.problems(meta_hash(), schema)]
    found += cas.problems(builtin_hash("Workflow"), payload)
    if found:
        raise Rejected(f"workflow does not match the Workflow schema: {'; '.join(found)}",
                       "fix it and run `uwf workflow put` again")


def resolve_workflow(cas: Cas, views: Views, ref: str) -> tuple[str, dict[str, Any]]:
    """A workflow's hash and payload from its registered name or its hash."""
    state = views.get("workflows", ref)
    workflow_hash = state.hash if state is not None else ref
    if state is None and not is_hash(ref):
        raise NotFound(f"no workflow named {ref!r}", "list them with `uwf workflow list`")
    try:
        node = cas.get(workflow_hash)
    except NotFound:
        raise NotFound(
            f"workflow {ref} not found", "list them with `uwf workflow list`"
        ) from None
    if node.type != builtin_hash("Workflow"):
        raise NotFound(f"{ref} is not a Workflow node", "give a workflow name or hash")
    payload: dict[str, Any] = node.payload
    return workflow_hash, payload


def list_workflows(views: Views) -> list[WorkflowListed]:
    """Every registered name with the hash it points at, by name."""
    return [WorkflowListed(name=state.name, workflow=state.hash,
                           registered_at=state.registered_at, versions=state.versions)
            for _, state in views.scan("workflows")]
