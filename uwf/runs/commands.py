"""The arguments of `uwf run ...`, `uwf history` and `uwf registry ...` and the
operations every surface calls (the run registry: docs/runs.md).

Cheap to import (msgspec, the argument base and the run registry's words): the
services load when an operation runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from uwf.config.args import Args, NoArgs, NonNegative, Seconds, arg
from uwf.runs.terms import DEFAULT_LIMIT, DEFAULT_RECENT, Derived, Lifecycle, Scope

if TYPE_CHECKING:
    from uwf.runs.results import (
        Driven,
        Rebuilt,
        Refreshed,
        RegistryShown,
        Rerun,
        Resumed,
        Retained,
        RunCounts,
        RunPage,
        RunShown,
        SnapshotKept,
        Verified,
    )
    from uwf.store import Store

RunId = Annotated[str, arg("run id (a thread's ULID, in any case, or its first characters)",
                          positional=True, metavar="RUN", ids="runs")]


class RunSearch(Args, frozen=True, kw_only=True):
    workflow: Annotated[str | None, arg("runs of this workflow: a name (any version) or a "
                                        "hash", alias="--app", metavar="NAME|HASH")] = None
    status: Annotated[Lifecycle | None, arg("lifecycle (archived runs match their derived "
                                            "lifecycle too)")] = None
    text: Annotated[str | None, arg("words that must all appear in the run id, workflow, "
                                    "title, repo, lifecycle or prompt (case-insensitive)",
                                    metavar="WORDS")] = None
    repo: Annotated[str | None, arg("runs of this repo (its git top level)",
                                    metavar="PATH")] = None
    since: Annotated[str | None, arg("created at or after (RFC 3339 or epoch ms)",
                                     metavar="TIME")] = None
    until: Annotated[str | None, arg("created at or before (RFC 3339 or epoch ms)",
                                     metavar="TIME")] = None
    limit: Annotated[NonNegative, arg(f"at most N runs (default {DEFAULT_LIMIT})",
                               metavar="N")] = DEFAULT_LIMIT
    offset: Annotated[NonNegative, arg("skip the first N runs", metavar="N")] = 0
    scope: Annotated[Scope, arg("home: every repo (default); repo: the current repo "
                                "only")] = "home"
    include_archived: Annotated[Literal["true", "false"], arg(
        "include archived runs (default true)")] = "true"


class History(Args, frozen=True, kw_only=True):
    workflow: Annotated[str | None, arg("runs of this workflow: a name or a hash",
                                        alias="--app", metavar="NAME|HASH")] = None
    status: Annotated[Lifecycle | None, arg("lifecycle")] = None
    limit: Annotated[NonNegative, arg(f"at most N runs (default {DEFAULT_LIMIT})",
                               metavar="N")] = DEFAULT_LIMIT
    offset: Annotated[NonNegative, arg("skip the first N runs", metavar="N")] = 0
    scope: Annotated[Scope, arg("home: every repo (default); repo: the current repo "
                                "only")] = "home"


class RunShow(Args, frozen=True, kw_only=True):
    run: RunId
    scope: Annotated[Scope, arg("home: a run of any repo (default); repo: only a run of "
                                "the current repo")] = "home"


class RunResume(Args, frozen=True, kw_only=True):
    run: RunId
    limit: Annotated[NonNegative, arg(f"show the last N steps (default {DEFAULT_RECENT})",
                                      metavar="N")] = DEFAULT_RECENT
    once: Annotated[bool, arg("run one step through the thread engine")] = False
    drive: Annotated[bool, arg("step the run to its end with the configured agents")] = False
    agent: Annotated[str | None, arg("with --once or --drive: the agent, as in `thread "
                                     "step --agent`")] = None
    timeout: Annotated[Seconds, arg("with --once or --drive: seconds each agent may run "
                                    "(default 3600)")] = 3600.0


class RunArchive(Args, frozen=True, kw_only=True):
    run: Annotated[str | None, arg("run id (or its first characters); or give "
                                   "--older-than-days", positional=True, metavar="RUN",
                                   ids="runs")] = None
    reason: Annotated[str | None, arg("why, recorded in the event")] = None
    unarchive: Annotated[bool, arg("clear the archive mark")] = False
    older_than_days: Annotated[NonNegative | None, arg(
        "retention: archive every run with no activity for N days (0: none)",
        metavar="N")] = None
    state: Annotated[list[Derived] | None, arg(
        "retention: only runs in this derived lifecycle (repeatable)")] = None


class RunRerun(Args, frozen=True, kw_only=True):
    run: RunId
    reason: Annotated[str | None, arg("why, recorded in the provenance")] = None
    incremental: Annotated[bool, arg("take over each step whose inputs are unchanged "
                                     "(role, edge prompt, previous output, agent)")] = False
    workflow: Annotated[str | None, arg("rerun under this workflow (name, hash or file) "
                                        "instead of the original's", metavar="REF")] = None
    drive: Annotated[bool, arg("step the new run to its end with the configured "
                               "agents")] = False


class Scoped(Args, frozen=True, kw_only=True):
    scope: Annotated[Scope,
                     arg("home (all repos, default) or repo (the current repo)")] = "home"


# -- runs ------------------------------------------------------------------------------

def _here(scope: str, store: Store) -> str | None:
    """The current repo (the command's working folder's git top level) for scope
    `repo`: resolved here, at the edge, with the command's own settings."""
    if scope != "repo":
        return None
    from uwf.config.repo import find_repo

    return find_repo(None, store.settings)


def search(args: RunSearch, store: Store) -> RunPage:
    """Runs by workflow, lifecycle, words, repo and time, oldest first."""
    from uwf.config.repo import find_repo
    from uwf.runs.service import RunFilter
    from uwf.runs.service import search as search_runs

    repo = None if args.repo is None else find_repo(args.repo, store.settings)
    filters = RunFilter(args.workflow, args.status, args.text, repo, _here(args.scope, store),
                        args.since, args.until, args.scope, args.include_archived == "true")
    return search_runs(store, filters, args.limit, args.offset)


def counts(args: Scoped, store: Store) -> RunCounts:
    """Runs per lifecycle: kept counts, whatever the number of runs."""
    from uwf.runs.service import counts as count_runs

    return count_runs(store.read(), args.scope, _here(args.scope, store))


def history(args: History, store: Store) -> RunPage:
    """The runs of every repo (or the current one), newest first."""
    from uwf.runs.service import RunFilter
    from uwf.runs.service import search as search_runs

    filters = RunFilter(workflow=args.workflow, status=args.status,
                        here=_here(args.scope, store), scope=args.scope)
    return search_runs(store, filters, args.limit, args.offset, newest_first=True)


def show(args: RunShow, store: Store) -> RunShown:
    """One run's record."""
    from uwf.runs.service import show as show_run

    return show_run(store, args.run, _here(args.scope, store))


def resume(args: RunResume, store: Store) -> Resumed | Driven:
    """What runs next (read-only); with `once` or `drive`, the run stepped."""
    from uwf.errors import UsageError
    from uwf.runs.rerun import drive
    from uwf.runs.rerun import resume as resume_run

    if args.once and args.drive:
        raise UsageError("--once and --drive exclude each other", "give one of them")
    if args.once or args.drive:
        return drive(store, args.run, once=args.once, settings=store.settings,
                     agent=args.agent, timeout=args.timeout)
    return resume_run(store, args.run, args.limit, store.settings.config_path)


def archive(args: RunArchive, store: Store) -> RunShown | Retained:
    """Archive a run or clear its mark; or archive the runs idle longer than a window."""
    from uwf.errors import UsageError
    from uwf.runs.service import archive as archive_run
    from uwf.runs.service import retain

    if args.older_than_days is not None:
        if args.run is not None or args.unarchive:
            raise UsageError("--older-than-days archives by age: it takes no RUN and no "
                             "--unarchive", "give either a run id or --older-than-days")
        return retain(store, args.older_than_days, args.state or ())
    if args.run is None:
        raise UsageError("give a run id, or --older-than-days N", "see `uwf run archive -h`")
    if args.state:
        raise UsageError("--state selects runs for retention", "give --older-than-days too")
    return archive_run(store, args.run, args.reason or "", unarchive=args.unarchive)


def rerun(args: RunRerun, store: Store) -> Rerun:
    """A new run linked to the original; with `drive`, stepped to its end."""
    from uwf.runs.rerun import drive
    from uwf.runs.rerun import rerun as rerun_run

    config_path = store.settings.config_path
    result = rerun_run(store, args.run, config_path=config_path, reason=args.reason or "",
                       incremental=args.incremental, workflow=args.workflow,
                       workflow_path=None if args.workflow is None
                       else store.settings.path(args.workflow))
    if args.drive and result.run.lifecycle != "completed":
        result.run = drive(store, result.run_id, once=False, settings=store.settings).run
    return result


# -- registry --------------------------------------------------------------------------

def registry_show(args: Scoped, store: Store) -> RegistryShown:
    """Each view's freshness, rows, durability and the next action."""
    from uwf.runs import registry

    return registry.show(store, args.scope, _here(args.scope, store))


def registry_refresh(args: Scoped, store: Store) -> Refreshed:
    """Catch the views up with the log (showing `store.progress`)."""
    from uwf.runs import registry

    return registry.refresh(store.journal, store.progress)


def registry_rebuild(args: Scoped, store: Store) -> Rebuilt:
    """Drop the views and replay the whole log (showing `store.progress`)."""
    from uwf.runs import registry

    return registry.rebuild(store, store.progress)


def registry_snapshot(args: NoArgs, store: Store) -> SnapshotKept:
    """Catch the views up and keep a snapshot of them beside them."""
    from uwf.runs import registry

    return registry.snapshot(store.journal)


def registry_verify(args: NoArgs, store: Store) -> Verified:
    """Replay into a scratch copy and compare with the persisted views."""
    from uwf.runs import registry

    return registry.verify(store)
