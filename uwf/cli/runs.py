"""`uwf run ...` and `uwf history` on the command line: help, examples and panels (the
arguments and operations: uwf.runs.commands)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uwf.invoker.spec import Command, on_store
from uwf.runs import commands as runs
from uwf.runs.commands import (
    History,
    RunArchive,
    RunRerun,
    RunResume,
    RunSearch,
    RunShow,
    Scoped,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from uwf.invoker.context import Context
    from uwf.invoker.spec import A, R
    from uwf.store import Store


WHY_CHARS = 60  # a failed run's reason as `run list` shows it (--json: all of it)


def _runs_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.render import page_footer, table

    rows = [{"run": run["runId"], "lifecycle": run["lifecycle"],
             "workflow": run["workflow"]["name"], "steps": run["steps"],
             "created": run["createdAt"], "title": run["title"]}
            for run in payload["runs"]]
    for row, run in zip(rows, payload["runs"], strict=True):
        # Columns only when a run had a failed attempt: its attempts, and why it failed.
        if failed := run["tasks"]["failed"]:
            row["attempts"] = f"{run['tasks']['total']} ({failed} failed)"
        if failure := run.get("lastFailure"):
            why = f"{failure['reason']}: {failure['message']}"
            row["why"] = why if len(why) <= WHY_CHARS else why[:WHY_CHARS - 3] + "..."
    foot = page_footer(payload["total"], payload["offset"], len(rows), ("run", "runs"),
                       f" ({payload['scope']})")
    return table(rows) + "\n" + foot if rows else foot


def _driven(operation: Callable[[A, Store], R]) -> Callable[[A, Context], R]:
    """`run resume|rerun`'s handler: with `--drive` on a terminal, a bar of the steps
    taken, as `thread run` draws."""

    def handler(args: A, ctx: Context) -> R:
        if getattr(args, "drive", False) and ctx.bars is not None:
            ctx.store.steps = ctx.bars.bar("steps taken", "steps", leave=False)
        return operation(args, ctx.store)

    handler.__name__ = handler.__qualname__ = operation.__name__
    handler.__doc__ = operation.__doc__
    return handler


def _counts_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.render import table

    rows = [{"lifecycle": state, "runs": count}
            for state, count in payload["lifecycles"].items()]
    total = payload["total"]
    foot = (f"{total} run{'' if total == 1 else 's'} ({payload['scope']}), "
            f"{payload['archived']} archived")
    return table(rows) + "\n" + foot if rows else foot


def _run_panel(payload: dict[str, Any]) -> str:
    from uwf.cli.progress import attempts_lines, failure_line
    from uwf.cli.render import panel

    if not payload.get("found", True):
        last = payload["lastKnown"]
        return panel({"found": "false: nodes are missing, the record below is only the last "
                               "known", "missing": payload["missingNodes"],
                      "run": last["runId"], "lastKnownLifecycle": last["derivedLifecycle"],
                      "next": payload["nextAction"]})
    run = payload["run"]
    shown: dict[str, Any] = {"run": run["runId"], "lifecycle": run["lifecycle"]}
    if failure := run.get("lastFailure"):  # a failed run leads with why
        shown["failed"] = failure_line(failure)
    shown |= {"derived": run["derivedLifecycle"], "freshness": run["freshness"],
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
    if attempts := run.get("attempts"):
        return panel(shown) + "\n\n" + attempts_lines(attempts)
    return panel(shown)


def _timeline(args: RunShow, ctx: Context, payload: dict[str, Any]) -> str | None:
    """On a terminal, after `run show`'s panel: its steps and the path taken."""
    from uwf.cli.progress import END, run_timeline

    run = payload.get("run")
    if not payload.get("found", True) or not isinstance(run, dict):
        return None
    return run_timeline(ctx.store, run["runId"], run.get("inFlight"),
                        run.get("loopStage") == END)


RUN_COMMANDS: list[Command[Any]] = [
    Command(("run", "search"), "Find runs across repos by workflow, lifecycle, words, repo "
            "and time, ordered by createdAt then runId.",
            "uwf run search --status failed --text login --since 2026-11-01", RunSearch,
            on_store(runs.search), human=_runs_panel, read_only=True),
    Command(("run", "list"), "List runs (the same filters as search), oldest first.",
            "uwf run list --scope repo", RunSearch, on_store(runs.search),
            human=_runs_panel, read_only=True),
    Command(("run", "counts"), "Count runs per lifecycle (kept counts: no scan, whatever "
            "the number of runs).", "uwf run counts --scope repo", Scoped,
            on_store(runs.counts), human=_counts_panel, read_only=True),
    Command(("run", "show"), "Show one run's record: lifecycle, freshness, provenance.",
            "uwf run show 01J7K9M2XNPQR5VWBCDF8G3H4T", RunShow, on_store(runs.show),
            human=_run_panel, after=_timeline, read_only=True),
    Command(("run", "resume"), "Show what runs next (read-only); --once steps it, --drive "
            "steps it to the end.", "uwf run resume 01J7K9M2XNPQR5VWBCDF8G3H4T --drive",
            RunResume, _driven(runs.resume)),
    Command(("run", "archive"), "Archive a run (or clear the mark), or archive by age with "
            "--older-than-days.", "uwf run archive --older-than-days 30 --state completed",
            RunArchive, on_store(runs.archive)),
    Command(("run", "rerun"), "Run a run again as a new linked run; --incremental takes over "
            "the unchanged steps.",
            "uwf run rerun 01J7K9M2XNPQR5VWBCDF8G3H4T --incremental --drive", RunRerun,
            _driven(runs.rerun)),
    Command(("history",), "the runs of every repo, newest first",
            "uwf history --status failed --limit 20", History, on_store(runs.history),
            human=_runs_panel, read_only=True),
]
