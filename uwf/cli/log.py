"""Declarations of `uwf log ...`: read and audit the event log (docs/log.md,
docs/audit.md)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from uwf.audit import commands as audit
from uwf.audit.commands import LogAnchor, LogTail, LogVerify
from uwf.cli.render import table
from uwf.invoker.context import Context
from uwf.invoker.spec import Command

if TYPE_CHECKING:
    from uwf.audit.results import Anchor, AnchorWritten, KeyMade, LogVerified


def _log_tail(args: LogTail, ctx: Context) -> Iterator[str]:
    from uwf.audit import verify as log

    store = ctx.store
    lines = log.tail(store, args.n, args.type, args.subject, args.since)
    human = not ctx.json and sys.stdout.isatty()
    last = args.since or 0
    for raw in lines:
        last = max(last, _seq_of(raw))
        yield _tail_human(raw) if human else raw.decode("utf-8")
    if args.follow:
        try:
            for raw in log.follow(store, args.type, args.subject, last):
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


def _verify_panel(payload: dict[str, Any]) -> str:
    head = (f"{'ok' if payload['ok'] else 'FAILED'}: {_plural(payload['events'], 'event')} in "
            f"{_plural(payload['segments'], 'segment')}")
    lines = [head]
    for entry in payload.get("anchors", []):
        lines.append(f"anchor {entry['file']} (seq {entry['seq']}, {entry['ts']}): "
                     + ("held" if entry["ok"] else entry["problem"]))
    if payload["problems"]:
        lines.append(table(payload["problems"]))
    return "\n".join(lines)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _log_verify(args: LogVerify, ctx: Context) -> LogVerified:
    """On a terminal, a bar of the lines verified."""
    bar = ctx.bars.bar("verifying the log") if ctx.bars is not None else None
    return audit.verify(args, ctx.store, bar)


def _log_anchor(args: LogAnchor, ctx: Context) -> Anchor | AnchorWritten | KeyMade:
    if args.new_key:  # no store is opened to make a key
        return audit.new_key(args, ctx.settings)
    return audit.anchor(args, ctx.store)


LOG_COMMANDS: list[Command[Any]] = [
    Command(("log", "tail"), "Print the last events of the log, optionally filtered.",
            "uwf log tail -n 20 --type workflow.registered", LogTail, _log_tail,
            streams=True, read_only=True, endless=lambda args: bool(args.follow)),
    Command(("log", "verify"), "Verify the whole log: JSON, seq, chain, batches, types, "
            "data, order, CAS refs, and each --anchor (exit 1 naming every problem).",
            "uwf log verify --anchor ~/anchors/a1.json", LogVerify, _log_verify,
            human=_verify_panel, ok_exit=True, read_only=True),
    Command(("log", "anchor"), "Sign the log's head (seq, digest, time) with an Ed25519 key, "
            "to keep outside the store; --new-key makes the key.",
            "uwf log anchor --out ~/anchors/$(date +%F).json", LogAnchor, _log_anchor),
]
