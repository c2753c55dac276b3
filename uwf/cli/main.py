"""`uwf`: every command declared once; handlers are thin calls into `uwf.api`.

Imports of the engine happen inside handlers, so `uwf --help` and each
command pay only for what they use (the CLI runs once per agent step).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from uwf.cli.common import open_store, progress_bar
from uwf.cli.render import panel, run, table
from uwf.cli.spec import Command, Group, arg
from uwf.cli.threads import THREAD_COMMANDS

_store = open_store
_progress = progress_bar


# -- workflow ----------------------------------------------------------------

def _workflow_put(args: argparse.Namespace) -> Any:
    from uwf.api.workflows import put_workflow

    return put_workflow(_store(args), args.file)


def _workflow_show(args: argparse.Namespace) -> Any:
    from uwf.api.workflows import show_workflow

    return show_workflow(_store(args), args.ref)


def _workflow_list(args: argparse.Namespace) -> Any:
    from uwf.api.workflows import list_workflows

    return list_workflows(_store(args))


def _workflow_panel(payload: dict[str, Any]) -> str:
    definition = payload["definition"]
    lines = [f"{payload['name']}  {payload['workflow']}", definition.get("description", "")]
    for role, spec in definition["roles"].items():
        lines.append(f"  role {role}: {spec['description']}  (schema {spec['meta']})")
    for source, edges in definition["graph"].items():
        for status, target in edges.items():
            lines.append(f"  {source} --{status}--> {target['role']}")
    return "\n".join(line for line in lines if line)


# -- registry ----------------------------------------------------------------

def _registry_show(args: argparse.Namespace) -> Any:
    from uwf.api import registry

    return registry.show(_store(args), args.scope)


def _registry_refresh(args: argparse.Namespace) -> Any:
    from uwf.api import registry

    return registry.refresh(_store(args), _progress)


def _registry_rebuild(args: argparse.Namespace) -> Any:
    from uwf.api import registry

    return registry.rebuild(_store(args), _progress)


def _registry_verify(args: argparse.Namespace) -> Any:
    from uwf.api import registry

    return registry.verify(_store(args))


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
    rows.append(("next", payload["nextAction"]))
    width = max(len(label) for label, _ in rows) + 2
    return "\n".join(f"{label:<{width}}{value}" for label, value in rows)


# -- log ---------------------------------------------------------------------

def _log_tail(args: argparse.Namespace) -> Iterator[str]:
    from uwf.api import audit

    store = _store(args)
    lines = audit.tail(store, args.n, args.type, args.subject, args.since)
    human = not args.json and sys.stdout.isatty()
    last = args.since or 0
    for raw in lines:
        last = max(last, _seq_of(raw))
        yield _tail_human(raw) if human else raw.decode("utf-8")
    if args.follow:
        try:
            for raw in audit.follow(store, args.type, args.subject, last):
                yield _tail_human(raw) if human else raw.decode("utf-8")
        except KeyboardInterrupt:
            return


def _seq_of(raw: bytes) -> int:
    import json

    return int(json.loads(raw)["seq"])


def _tail_human(raw: bytes) -> str:
    import json

    event = json.loads(raw)
    data = json.dumps(event["data"], ensure_ascii=False, separators=(",", ":"))
    return f"{event['seq']:>6}  {event['ts']}  {event['type']:<20} {event['subject']}  {data}"


def _log_verify(args: argparse.Namespace) -> Any:
    from uwf.api import audit

    return audit.verify(_store(args))


def _verify_panel(payload: dict[str, Any]) -> str:
    head = (f"{'ok' if payload['ok'] else 'FAILED'}: {_plural(payload['events'], 'event')} in "
            f"{_plural(payload['segments'], 'segment')}")
    if not payload["problems"]:
        return head
    return head + "\n" + table(payload["problems"])


def _positive(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


_SCOPE = arg("--scope", help="home (all repos, default) or repo (the current repo)",
             choices=["home", "repo"], default="home")

COMMANDS = Group(
    prog="uwf",
    description="uwf: an event-sourced control plane for agent workflows.\n"
    "Every mutation is an event in an append-only log; views are rebuilt from it.",
    groups={
        "workflow": "register and inspect workflows (YAML -> CAS node)",
        "thread": "start threads of a workflow and step them with agents",
        "agent": "the agent kit: read a step's context, submit its output",
        "registry": "the views derived from the log: freshness, catch-up, rebuild, verify",
        "log": "audit the event log",
    },
    commands=[
        Command(("workflow", "put"), "Validate a workflow YAML file and register it.",
                "uwf workflow put examples/solve-issue.yaml", _workflow_put,
                (arg("file", help="workflow YAML file"),)),
        Command(("workflow", "show"), "Show a workflow by name (its registered version) or hash.",
                "uwf workflow show solve-issue", _workflow_show,
                (arg("ref", help="workflow name or hash", metavar="NAME|HASH"),),
                human=_workflow_panel),
        Command(("workflow", "list"), "List registered workflows by name.",
                "uwf workflow list", _workflow_list),
        *THREAD_COMMANDS,
        Command(("registry", "show"), "Show each view's freshness, rows, durability and the "
                "next action.", "uwf registry show", _registry_show, (_SCOPE,),
                human=_registry_panel),
        Command(("registry", "refresh"), "Catch the views up with the log.",
                "uwf registry refresh", _registry_refresh, (_SCOPE,)),
        Command(("registry", "rebuild"), "Drop the views and replay the whole log.",
                "uwf registry rebuild", _registry_rebuild, (_SCOPE,)),
        Command(("registry", "verify"), "Replay into a scratch copy and compare with the "
                "persisted views row by row (exit 1 on any difference).",
                "uwf registry verify", _registry_verify, ok_exit=True),
        Command(("log", "tail"), "Print the last events of the log, optionally filtered.",
                "uwf log tail -n 20 --type workflow.registered", _log_tail,
                (arg("-n", help="how many events (default 10; all after --since)",
                     type=_positive),
                 arg("--type", help="event type, or a prefix such as `thread.`"),
                 arg("--subject", help="subject, or a prefix such as `workflow/`"),
                 arg("--since", help="only events after this seq", type=_positive),
                 arg("--follow", help="keep printing new events until interrupted",
                     action="store_true")),
                streams=True),
        Command(("log", "verify"), "Verify the whole log: JSON, seq, chain, batches, types, "
                "data, order, CAS refs (exit 1 naming every problem).",
                "uwf log verify", _log_verify, human=_verify_panel, ok_exit=True),
    ],
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `uwf` console script."""
    code = run(COMMANDS, argv)
    if argv is None:
        sys.exit(code)
    return code


__all__ = ["COMMANDS", "main", "panel"]
