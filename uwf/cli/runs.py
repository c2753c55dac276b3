"""Declarations of `uwf run ...` and `uwf history`: the run registry (docs/runs.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from uwf.cli.context import Context
from uwf.cli.spec import Command
from uwf.config.args import Args, NonNegative, Seconds, arg
from uwf.runs.terms import Derived, Lifecycle, Scope

RunId = Annotated[str, arg("run id (a thread's ULID)", positional=True, metavar="RUN")]
DEFAULT_LIMIT = 50


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
    limit: Annotated[NonNegative, arg("show the last N steps (default 5)",
                                      metavar="N")] = 5
    once: Annotated[bool, arg("run one step through the thread engine")] = False
    drive: Annotated[bool, arg("step the run to its end with the configured agents")] = False
    agent: Annotated[str | None, arg("with --once or --drive: the agent, as in `thread "
                                     "step --agent`")] = None
    timeout: Annotated[Seconds, arg("with --once or --drive: seconds each agent may run "
                                    "(default 3600)")] = 3600.0


class RunArchive(Args, frozen=True, kw_only=True):
    run: Annotated[str | None, arg("run id; or give --older-than-days", positional=True,
                                   metavar="RUN")] = None
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


def _search(args: RunSearch, ctx: Context) -> Any:
    from uwf.runs.service import RunFilter, search

    filters = RunFilter(args.workflow, args.status, args.text, args.repo, args.since,
                        args.until, args.scope, args.include_archived == "true")
    return search(ctx.store, filters, args.limit, args.offset)


def _history(args: History, ctx: Context) -> Any:
    from uwf.runs.service import RunFilter, search

    filters = RunFilter(workflow=args.workflow, status=args.status, scope=args.scope)
    return search(ctx.store, filters, args.limit, args.offset, newest_first=True)


def _show(args: RunShow, ctx: Context) -> Any:
    from uwf.runs.service import show

    return show(ctx.store, args.run, args.scope)


def _resume(args: RunResume, ctx: Context) -> Any:
    from uwf.errors import UsageError
    from uwf.runs.rerun import drive, resume

    if args.once and args.drive:
        raise UsageError("--once and --drive exclude each other", "give one of them")
    if args.once or args.drive:
        return drive(ctx.store, args.run, once=args.once, agent=args.agent,
                     timeout=args.timeout)
    return resume(ctx.store, args.run, args.limit)


def _archive(args: RunArchive, ctx: Context) -> Any:
    from uwf.errors import UsageError
    from uwf.runs.service import archive, retain

    if args.older_than_days is not None:
        if args.run is not None or args.unarchive:
            raise UsageError("--older-than-days archives by age: it takes no RUN and no "
                             "--unarchive", "give either a run id or --older-than-days")
        return retain(ctx.store, args.older_than_days, args.state or ())
    if args.run is None:
        raise UsageError("give a run id, or --older-than-days N", "see `uwf run archive -h`")
    if args.state:
        raise UsageError("--state selects runs for retention", "give --older-than-days too")
    return archive(ctx.store, args.run, args.reason or "", unarchive=args.unarchive)


def _rerun(args: RunRerun, ctx: Context) -> Any:
    from uwf.runs.rerun import drive, rerun

    result = rerun(ctx.store, args.run, reason=args.reason or "",
                   incremental=args.incremental, workflow=args.workflow)
    if args.drive and result["run"]["lifecycle"] != "completed":
        driven = drive(ctx.store, result["runId"], once=False)
        result = {**result, "run": driven["run"]}
    return result


def _runs_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.render import table

    rows = [{"run": run["runId"], "lifecycle": run["lifecycle"],
             "workflow": run["workflow"]["name"], "steps": run["steps"],
             "created": run["createdAt"], "title": run["title"]}
            for run in payload["runs"]]
    shown = len(rows)
    start = payload["offset"]
    total = payload["total"]
    foot = f"{total} run{'' if total == 1 else 's'} ({payload['scope']})"
    if shown:
        foot += f"; showing {start + 1}-{start + shown}"
    if start + shown < total:
        foot += f"; next page: --offset {start + shown}"
    return table(rows) + "\n" + foot if rows else foot


def _run_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.render import panel

    if not payload.get("found", True):
        last = payload["lastKnown"]
        return panel({"found": "false: nodes are missing, the record below is only the last "
                               "known", "missing": payload["missingNodes"],
                      "run": last["runId"], "lastKnownLifecycle": last["derivedLifecycle"],
                      "next": payload["nextAction"]})
    run = payload["run"]
    shown = {"run": run["runId"], "lifecycle": run["lifecycle"],
             "derived": run["derivedLifecycle"], "freshness": run["freshness"],
             "workflow": f"{run['workflow']['name']} ({run['workflow']['hash']})",
             "title": run["title"], "repo": run["repo"], "loopStage": run["loopStage"],
             "steps": run["steps"], "lastRole": run["lastRole"],
             "lastStatus": run["lastStatus"], "head": run["head"],
             "created": run["createdAt"], "updated": run["updatedAt"]}
    if flight := run["inFlight"]:
        shown["inFlight"] = f"{flight['role']} by {flight['agent']} since {flight['startedAt']}"
    if usage := run["usage"]:
        shown["usage"] = ", ".join(f"{value} {name}" for name, value in usage.items()
                                   if value is not None)
    if run["stale"]:
        shown["stale"] = "true: events of this run landed after the views were read; read again"
    if run["archived"]:
        shown["archived"] = f"{run['archivedAt']} {run['archiveReason'] or ''}".strip()
    if run["provenance"]:
        link = run["provenance"]
        shown["rerunOf"] = f"{link['rerunOf']} (generation {link['generation']}, origin " \
                           f"{link['originRunId']})"
    return panel(shown)


RUN_COMMANDS: list[Command[Any]] = [
    Command(("run", "search"), "Find runs across repos by workflow, lifecycle, words, repo "
            "and time, ordered by createdAt then runId.",
            "uwf run search --status failed --text login --since 2026-11-01", RunSearch,
            _search, human=_runs_panel),
    Command(("run", "list"), "List runs (the same filters as search), oldest first.",
            "uwf run list --scope repo", RunSearch, _search, human=_runs_panel),
    Command(("run", "show"), "Show one run's record: lifecycle, freshness, provenance.",
            "uwf run show 01J7K9M2XNPQR5VWBCDF8G3H4T", RunShow, _show, human=_run_panel),
    Command(("run", "resume"), "Show what runs next (read-only); --once steps it, --drive "
            "steps it to the end.", "uwf run resume 01J7K9M2XNPQR5VWBCDF8G3H4T --drive",
            RunResume, _resume),
    Command(("run", "archive"), "Archive a run (or clear the mark), or archive by age with "
            "--older-than-days.", "uwf run archive --older-than-days 30 --state completed",
            RunArchive, _archive),
    Command(("run", "rerun"), "Run a run again as a new linked run; --incremental takes over "
            "the unchanged steps.",
            "uwf run rerun 01J7K9M2XNPQR5VWBCDF8G3H4T --incremental --drive", RunRerun, _rerun),
    Command(("history",), "the runs of every repo, newest first",
            "uwf history --status failed --limit 20", History, _history, human=_runs_panel),
]
