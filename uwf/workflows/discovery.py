"""Which workflow `thread start WORKFLOW` and `workflow show WORKFLOW` mean.

In order: a workflow file (a path), registered first as `workflow put` does; a name
whose file is in the repo (`.workflow/NAME.yaml`, see `repo_workflow_file`), which
must agree with the version registered under that name and is registered on first
use; else a registered name or a Workflow hash. See docs/workflows.md#workflow-files-in-the-repo.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from uwf.cas.hashing import is_hash
from uwf.errors import NotFound, Rejected, UwfError
from uwf.store import Store
from uwf.workflows.results import WorkflowShown
from uwf.workflows.service import (
    CheckedWorkflow,
    check_workflow_file,
    put_workflow,
    register_workflow,
    resolve_workflow,
)

# What `thread start WORKFLOW` takes for a file rather than a name or a hash.
WORKFLOW_FILE_SUFFIXES = (".yaml", ".yml", ".json")
# Where a repo keeps its workflows, searched in this order, and the names a file there
# may have: `.workflow/NAME.yaml` wins over `.workflow/NAME.yml`, then `.workflows/`.
REPO_FOLDERS = (".workflow", ".workflows")
REPO_SUFFIXES = (".yaml", ".yml")
# A workflow name (uwf.language.compile): never a path, so a folder is never left.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)


def is_workflow_file(ref: str) -> bool:
    """`thread start WORKFLOW` names a file: a path with a folder, or a .yaml, .yml or
    .json name, that exists. Anything else is a workflow name or hash. (One that is not
    a regular file, a FIFO or a folder, is then refused by name as `workflow put` does.)"""
    looks_like_a_path = (os.sep in ref or "/" in ref
                         or ref.lower().endswith(WORKFLOW_FILE_SUFFIXES))
    return looks_like_a_path and _exists(Path(ref).expanduser())


def _exists(path: Path) -> bool:
    """`path` exists; False too when it cannot be a file's path (a name longer than
    the file system allows, a NUL): such a reference is a name or a hash, or nothing."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def repo_workflow_file(repo: Path, name: str) -> Path | None:
    """The file that holds the workflow `name` in `repo`: the first of
    `.workflow/NAME.yaml`, `.workflow/NAME.yml`, `.workflows/NAME.yaml`,
    `.workflows/NAME.yml` that exists; None for none, or for what cannot be a name."""
    if is_hash(name) or not _NAME.fullmatch(name):
        return None
    for folder in REPO_FOLDERS:
        for suffix in REPO_SUFFIXES:
            candidate = repo / folder / f"{name}{suffix}"
            if _exists(candidate):  # a folder or a FIFO of that name is refused when read
                return candidate
    return None


def use_workflow(store: Store, ref: str, repo: Path | None) -> tuple[str, dict[str, Any]]:
    """The hash and payload of the workflow `ref` means, registering a file it names
    (and only then appending `workflow.registered`). `repo`: where to look for
    `.workflow/NAME.yaml` (None: nowhere)."""
    if is_workflow_file(ref):
        registered = put_workflow(store, Path(ref).expanduser())
        return resolve_workflow(store, store.read(), registered.workflow)
    if repo is not None and (found := repo_workflow_file(repo, ref)) is not None:
        return _use_repo_file(store, ref, found)
    try:
        return resolve_workflow(store, store.read(), ref)
    except NotFound:
        if os.sep in ref or "/" in ref:  # never a name: a file that is not there
            raise NotFound(f"no workflow file {ref}",
                           "check the path, or give a workflow name or hash") from None
        raise


def _use_repo_file(store: Store, name: str, found: Path) -> tuple[str, dict[str, Any]]:
    """The workflow `name` from the repo's file `found`: the registered version when it
    is the same (nothing written), else registered now when the name is new; a name
    registered with other content is refused, naming both."""
    checked = check_workflow_file(store, found)
    if checked.name != name:
        raise Rejected(f"{found} holds the workflow {checked.name!r}, not {name!r}",
                       f"rename the file to {checked.name}{found.suffix}, or its "
                       f"`name:` to {name}")
    current = store.read().get("workflows", name)
    if current is not None and current.hash != checked.hash:
        raise _conflict(checked, found, current.hash)
    if current is None:
        register_workflow(store, checked,
                          conflict=lambda registered: _conflict(checked, found, registered))
    return resolve_workflow(store, store.read(), checked.hash)


def _conflict(checked: CheckedWorkflow, found: Path, registered: str) -> UwfError:
    return Rejected(
        f"workflow {checked.name!r} is registered as {registered}, but {found} holds "
        f"another version ({checked.hash})",
        f"register the file's version with `uwf workflow put {found}`, or make the file "
        f"match the registered one (`uwf workflow show {registered}`)")


def show_workflow(store: Store, ref: str, repo: str | Path | None = None) -> WorkflowShown:
    """A workflow by name (the registered version), by hash, or from a file: a path, or
    with `repo`, `NAME.yaml` in its `.workflow/` folder (found here), registered
    on first use."""
    workflow_hash, payload = use_workflow(store, ref, None if repo is None else Path(repo))
    return WorkflowShown(workflow=workflow_hash, name=payload["name"], definition=payload)
