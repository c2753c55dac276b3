"""Which workflow `thread start WORKFLOW` and `workflow show WORKFLOW` mean.

In order: a workflow file (a path), registered first as `workflow put` does; a name
whose file is in the repo (`.workflows/NAME.yaml` and the other layouts of
`repo_workflow_file`, in the working folder or a parent up to the repo's top), which
is used over the version registered under that name, and registered on first use;
else a registered name or a Workflow hash. See
docs/workflows.md#workflow-files-in-the-repo.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from uwf.cas.hashing import is_hash
from uwf.errors import NotFound, Rejected, UwfError
from uwf.payload import UNSET
from uwf.store import Store
from uwf.workflows.results import WorkflowShown
from uwf.workflows.service import (
    check_workflow_file,
    put_workflow,
    register_workflow,
    resolve_workflow,
    store_workflow,
)

# What `thread start WORKFLOW` takes for a file rather than a name or a hash.
WORKFLOW_FILE_SUFFIXES = (".yaml", ".yml", ".json")
# Where a folder keeps its workflows, the preferred first (upstream's `.workflows/`;
# `.workflow/` is its older spelling), and the files that may hold NAME in each, in
# the order they are tried.
REPO_FOLDERS = (".workflows", ".workflow")
REPO_LAYOUTS = ("{name}.yaml", "{name}.yml", "{name}/index.yaml", "{name}/index.yml")
# A workflow name (uwf.language.compile): never a path, so a folder is never left.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)


class Chosen(msgspec.Struct, frozen=True):
    """The workflow a reference means: its hash and payload, and, when a repo file was
    used, that file and the name's registered version when it was another."""

    hash: str
    payload: dict[str, Any]
    file: str | None = None
    store_version: str | None = None


def is_workflow_file(ref: str, path: Path) -> bool:
    """`thread start WORKFLOW` names a file: a path with a folder, or a .yaml, .yml or
    .json name, that exists (at `path`: `ref` resolved by the command's settings).
    Anything else is a workflow name or hash. (One that is not a regular file, a FIFO
    or a folder, is then refused by name as `workflow put` does.)"""
    looks_like_a_path = (os.sep in ref or "/" in ref
                         or ref.lower().endswith(WORKFLOW_FILE_SUFFIXES))
    return looks_like_a_path and _exists(path)


def _exists(path: Path) -> bool:
    """`path` exists; False too when it cannot be a file's path (a name longer than
    the file system allows, a NUL): such a reference is a name or a hash, or nothing."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def repo_workflow_file(folders: Path | Iterable[Path], name: str) -> Path | None:
    """The file that holds the workflow `name`, looked for in each of `folders`,
    nearest first (the working folder, then its parents up to the repo's top): in its
    `.workflows/` folder, then its `.workflow/` folder, as `NAME.yaml`, `NAME.yml`,
    `NAME/index.yaml` or `NAME/index.yml`; the first that exists. None for none, or
    for what cannot be a name."""
    if is_hash(name) or not _NAME.fullmatch(name):
        return None
    for folder in [folders] if isinstance(folders, Path) else folders:
        for kept in REPO_FOLDERS:
            for layout in REPO_LAYOUTS:
                candidate = folder / kept / layout.format(name=name)
                if _exists(candidate):  # a folder or a FIFO of that name is refused when read
                    return candidate
    return None


def use_workflow(store: Store, ref: str, folders: Sequence[Path] | Path | None, *,
                 path: Path) -> Chosen:
    """The workflow `ref` means, registering a file it names (and only then appending
    `workflow.registered`). `folders`: where to look for a repo file holding the name
    `ref`, nearest first (None or empty: nowhere); `path`: `ref` read as a file's path,
    resolved by the command (its working folder, its home)."""
    if is_workflow_file(ref, path):
        registered = put_workflow(store, path)
        return Chosen(*resolve_workflow(store.cas, store.read(), registered.workflow))
    if folders is not None and (found := repo_workflow_file(folders, ref)) is not None:
        return _use_repo_file(store, ref, found)
    try:
        return Chosen(*resolve_workflow(store.cas, store.read(), ref))
    except NotFound:
        if os.sep in ref or "/" in ref:  # never a name: a file that is not there
            raise NotFound(f"no workflow file {ref}",
                           "check the path, or give a workflow name or hash") from None
        raise


def _use_repo_file(store: Store, name: str, found: Path) -> Chosen:
    """The workflow `name` from the repo's file `found`, which wins over the store: the
    registered version when it is the same (nothing written); registered now when the
    name is new; when the name is registered with other content, the file's version,
    its nodes stored but the name left where it points (another repo may use it)."""
    checked = check_workflow_file(store, found)
    if checked.name != name:
        layout = (f"the file to {checked.name}{found.suffix}"
                  if found.parent.name in REPO_FOLDERS  # else NAME/index.yaml
                  else f"its folder to {checked.name}")
        raise Rejected(f"{found} holds the workflow {checked.name!r}, not {name!r}",
                       f"rename {layout}, or its `name:` to {name}")
    current = store.read().get("workflows", name)
    registered = None if current is None else current.hash
    if registered is None:
        # Registered on first use; when another command registers the name meanwhile,
        # the name is left to it and this one still uses the file's version.
        try:
            register_workflow(store, checked, conflict=_Taken)
        except _Taken as taken:
            registered = taken.registered
    elif registered != checked.hash:
        store_workflow(store.cas, checked)
    workflow_hash, payload = resolve_workflow(store.cas, store.read(), checked.hash)
    return Chosen(workflow_hash, payload, str(found),
                  None if registered == checked.hash else registered)


class _Taken(UwfError):
    """The name was registered, with other content, by another command meanwhile."""

    def __init__(self, registered: str) -> None:
        super().__init__(f"registered meanwhile as {registered}")
        self.registered = registered


def show_workflow(store: Store, ref: str,
                  folders: Sequence[str | Path] | str | Path | None = None, *,
                  path: Path) -> WorkflowShown:
    """A workflow by name (the repo's file holding it, when `folders` has one, else the
    registered version), by hash, or from a file (a path); a file is registered on
    first use. `source` says which repo file was used, `storeVersion` the registered
    version it was preferred over. `path`: `ref` read as a file's path."""
    where = ([Path(folders)] if isinstance(folders, str | Path)
             else None if folders is None else [Path(folder) for folder in folders])
    chosen = use_workflow(store, ref, where, path=path)
    return WorkflowShown(workflow=chosen.hash, name=chosen.payload["name"],
                         definition=chosen.payload,
                         source=UNSET if chosen.file is None else chosen.file,
                         store_version=UNSET if chosen.store_version is None
                         else chosen.store_version)
