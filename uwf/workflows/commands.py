"""The arguments of `uwf workflow ...` and the operations every surface calls.

Cheap to import (msgspec and the argument base only): the services load when an
operation runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from uwf.config.args import Args, NoArgs, arg

if TYPE_CHECKING:
    from uwf.store import Store
    from uwf.workflows.results import Registered, WorkflowListed, WorkflowShown


class WorkflowPut(Args, frozen=True, kw_only=True):
    file: Annotated[str, arg("workflow YAML file", positional=True)]


class WorkflowShow(Args, frozen=True, kw_only=True):
    ref: Annotated[str, arg("workflow name or hash, or a workflow file (registered on first "
                            "use); a name is also looked for in .workflows/ and .workflow/ "
                            "folders, here and up to the repo's top", positional=True,
                            metavar="NAME|HASH|FILE")]


def put(args: WorkflowPut, store: Store) -> Registered:
    """Validate a workflow file and register it."""
    from uwf.workflows.service import put_workflow

    return put_workflow(store, store.settings.path(args.file))


def show(args: WorkflowShow, store: Store) -> WorkflowShown:
    """A workflow by name, hash or file; a name looked for in the working folder's repo."""
    from uwf.config.repo import search_folders
    from uwf.workflows.discovery import show_workflow

    return show_workflow(store, args.ref, search_folders(None, store.settings),
                         path=store.settings.path(args.ref))


def list_all(args: NoArgs, store: Store) -> list[WorkflowListed]:
    """Every registered workflow by name."""
    from uwf.workflows.service import list_workflows

    return list_workflows(store.read())
