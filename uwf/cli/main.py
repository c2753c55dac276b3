"""`uwf`: every command declared once; handlers are thin calls into the features' services.

Imports of the engine happen inside handlers, and each group's declarations
(`uwf.cli.threads`, `uwf.cli.queue`, ...) are imported only when the command line
names that group (`Lazy`), so `uwf workflow show` and each command pay only for
what they use (the CLI runs once per agent step).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from uwf.cli.render import console, panel
from uwf.config.args import NoArgs
from uwf.invoker.spec import Command, Group, Lazy, on_store
from uwf.workflows import commands as workflows
from uwf.workflows.commands import WorkflowPut, WorkflowShow

if TYPE_CHECKING:
    from pathlib import Path

    from uwf.engine.feature import Feature
    from uwf.invoker.context import Context

# -- workflow ----------------------------------------------------------------

def _workflow_put(args: WorkflowPut, ctx: Context) -> Any:
    result = workflows.put(args, ctx.store)
    for warning in result.warnings or ():  # accepted, but worth a look
        sys.stderr.write(f"warning: {warning}\n")
    return result


def _workflow_panel(payload: dict[str, Any]) -> str:
    definition = payload["definition"]
    lines = [f"{payload['name']}  {payload['workflow']}", definition.get("description", "")]
    for role, spec in definition["roles"].items():
        lines.append(f"  role {role}: {spec['description']}  (schema {spec['meta']})")
    for source, edges in definition["graph"].items():
        # A list-form source's edges are tried in order; each is labelled by its condition.
        labelled = ([(entry["condition"] or "_", entry) for entry in edges]
                    if isinstance(edges, list) else edges.items())
        for status, target in labelled:
            lines.append(f"  {source} --{status}--> {target['role']}")
    return "\n".join(line for line in lines if line)


# -- registry ----------------------------------------------------------------

def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _registry_panel(payload: dict[str, Any]) -> str:
    rows = [
        ("store", payload["store"]),
        ("status", f"{payload['status']}  (checkpoint {payload['checkpoint']}, "
                   f"log {payload['logSeq']})"),
        ("durability", payload["durability"]),
        *((f"view {name}", f"{info['status']}, {_plural(info['rows'], 'row')}")
          for name, info in payload["views"].items()),
    ]
    if threads := payload["counts"].get("threads"):
        rows.append(("threads", ", ".join(f"{n} {state}" for state, n in threads.items())))
    if runs := payload.get("runs"):
        if runs["lifecycles"]:
            rows.append(("runs", ", ".join(f"{n} {state}" for state, n in
                                           runs["lifecycles"].items())
                         + (f"; {runs['archived']} archived" if runs["archived"] else "")))
            rows.append(("runs index", f"fingerprint {runs['sourceFingerprint']}"))
        for entry in runs["repos"]:
            count = entry.get("queueEntries", 0)
            queued = f", {count} queue entr{'y' if count == 1 else 'ies'}" if count else ""
            rows.append(("repo", f"{entry['repo']}  {_plural(entry['runs'], 'run')}{queued}"))
        if runs["staleCount"]:
            rows.append(("stale runs", f"{runs['staleCount']}: "
                         + " ".join(runs["staleRuns"])))
    rows.append(("next", payload["nextAction"]))
    width = max(len(label) for label, _ in rows) + 2
    return "\n".join(f"{label:<{width}}{value}" for label, value in rows)


def _registry() -> Sequence[Command[Any]]:
    from uwf.runs import commands as runs
    from uwf.runs.commands import Scoped

    return [
        Command(("registry", "show"), "Show each view's freshness, rows, durability and the "
                "next action.", "uwf registry show", Scoped, on_store(runs.registry_show),
                human=_registry_panel, read_only=True),
        Command(("registry", "refresh"), "Catch the views up with the log.",
                "uwf registry refresh", Scoped, on_store(runs.registry_refresh)),
        Command(("registry", "rebuild"), "New views: the kept snapshot and the log after "
                "it, or the whole log replayed.",
                "uwf registry rebuild", Scoped, on_store(runs.registry_rebuild)),
        Command(("registry", "snapshot"), "Catch the views up and keep a snapshot of them "
                "beside them: a rebuild, or a reader without views, restores it and folds "
                "only the log after it.", "uwf registry snapshot", NoArgs,
                on_store(runs.registry_snapshot)),
        Command(("registry", "verify"), "Replay into a scratch copy and compare with the "
                "persisted views row by row, and look for every open thread's head node in the CAS "
                "(exit 1 on any difference or missing or damaged head).",
                "uwf registry verify", NoArgs, on_store(runs.registry_verify),
                ok_exit=True, read_only=True),
    ]


# -- the other groups, each imported when named ------------------------------------

def _threads() -> Sequence[Command[Any]]:
    from uwf.cli.threads import THREAD_COMMANDS
    return THREAD_COMMANDS


def _runs() -> Sequence[Command[Any]]:
    from uwf.cli.runs import RUN_COMMANDS
    return RUN_COMMANDS


def _queue() -> Sequence[Command[Any]]:
    from uwf.cli.queue import QUEUE_COMMANDS
    return QUEUE_COMMANDS


def _worker() -> Sequence[Command[Any]]:
    from uwf.cli.worker import WORKER_COMMANDS
    return WORKER_COMMANDS


def _archive() -> Sequence[Command[Any]]:
    from uwf.cli.archive import ARCHIVE_COMMANDS
    return ARCHIVE_COMMANDS


def _bridge() -> Sequence[Command[Any]]:
    from uwf.cli.bridge import BRIDGE_COMMANDS
    return BRIDGE_COMMANDS


def _log() -> Sequence[Command[Any]]:
    from uwf.cli.log import LOG_COMMANDS
    return LOG_COMMANDS


def _store() -> Sequence[Command[Any]]:
    from uwf.cli.storecmd import STORE_COMMANDS
    return STORE_COMMANDS


def _demo() -> Sequence[Command[Any]]:
    from uwf.cli.demo import DEMO_COMMANDS
    return DEMO_COMMANDS


def _doctor() -> Sequence[Command[Any]]:
    from uwf.cli.doctor import DOCTOR_COMMANDS
    return DOCTOR_COMMANDS


def _mcp() -> Sequence[Command[Any]]:
    from uwf.cli.mcp import MCP_COMMANDS
    return MCP_COMMANDS


def _dashboard() -> Sequence[Command[Any]]:
    from uwf.cli.dashboard import DASHBOARD_COMMANDS
    return DASHBOARD_COMMANDS


def _writer() -> Sequence[Command[Any]]:
    from uwf.cli.writer import WRITER_COMMANDS
    return WRITER_COMMANDS


def _completion() -> Sequence[Command[Any]]:
    from uwf.cli.completion import COMPLETION_COMMANDS
    return COMPLETION_COMMANDS


COMMANDS = Group(
    prog="uwf",
    description="uwf: an event-sourced control plane for agent workflows.\n"
    "Every mutation is an event in an append-only log; views are rebuilt from it.",
    groups={
        "workflow": "register and inspect workflows (YAML -> CAS node)",
        "thread": "start threads of a workflow and step them with agents",
        "agent": "the agent kit: read a step's context, submit its output",
        "run": "the run registry: search, show, resume, archive and rerun runs in every repo",
        "queue": "the durable queue of agent work: add, list, drain, pick, cancel, logs",
        "sched": "scheduling policy over the queue: plan, lease, complete, release, reclaim",
        "registry": "the views derived from the log: freshness, catch-up, rebuild, verify",
        "log": "audit the event log",
        "archive": "the per-run archive: a folder kept in step with the log, and its check",
        "bridge": "every event of the log to an MQTT broker, resuming where it stopped",
        "store": "a whole store copied into an empty one: a folder or a PostgreSQL database",
    },
    commands=[
        Command(("workflow", "put"), "Validate a workflow YAML file and register it.",
                "uwf workflow put examples/solve-issue.yaml", WorkflowPut, _workflow_put),
        Command(("workflow", "show"), "Show a workflow by name (its registered version), "
                "hash or file.",
                "uwf workflow show solve-issue", WorkflowShow, on_store(workflows.show),
                human=_workflow_panel),
        Command(("workflow", "list"), "List registered workflows by name.",
                "uwf workflow list", NoArgs, on_store(workflows.list_all), read_only=True),
        Lazy(("thread", "agent"), _threads),
        Lazy(("run", "history"), _runs),
        Lazy(("queue", "sched"), _queue),
        Lazy(("worker",), _worker),
        Lazy(("writer",), _writer),
        Lazy(("archive",), _archive),
        Lazy(("bridge",), _bridge),
        Lazy(("registry",), _registry),
        Lazy(("log",), _log),
        Lazy(("store",), _store),
        Lazy(("doctor",), _doctor),
        Lazy(("demo",), _demo),
        Lazy(("mcp",), _mcp),
        Lazy(("dashboard",), _dashboard),
        Lazy(("completion",), _completion),
    ],
)


def main(argv: Sequence[str] | None = None, *,
         environ: Mapping[str, str] | None = None,
         features: Sequence[Feature] | None = None, cwd: Path | None = None) -> int:
    """Entry point of the `uwf` console script; `main(argv)` runs in-process, in
    `environ` if given (else this process's environment), so calls in several threads
    at once each have their own store, clock and settings; its relative and `~` paths
    are of `cwd` (default: this process's working folder) and `environ`'s HOME.
    `features` are those of the store a command opens (by default uwf's:
    `uwf.features.FEATURES`, imported when a store is opened); the MCP server, the
    dashboard and the worker it starts use them."""
    return console(COMMANDS, argv, environ, features, cwd)


__all__ = ["COMMANDS", "main", "panel"]
