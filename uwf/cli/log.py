"""Declarations of `uwf log ...`: read and audit the event log (docs/log.md,
docs/audit.md)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Annotated, Any

from uwf.cli.context import Context
from uwf.cli.render import table
from uwf.cli.spec import Command
from uwf.config.args import Args, NonNegative, arg


class LogTail(Args, frozen=True, kw_only=True):
    n: Annotated[NonNegative | None, arg("how many events (default 10; all after --since)")] = None
    type: Annotated[str | None, arg("event type, or a prefix such as `thread.`")] = None
    subject: Annotated[str | None, arg("subject, or a prefix such as `workflow/`")] = None
    since: Annotated[NonNegative | None, arg("only events after this seq")] = None
    follow: Annotated[bool, arg("keep printing new events until interrupted")] = False


class LogVerify(Args, frozen=True, kw_only=True):
    anchor: Annotated[list[str] | None, arg("an anchor file `uwf log anchor` wrote: the log "
                                            "must still hold its line (repeatable)",
                                            metavar="FILE")] = None
    key: Annotated[str | None, arg("the key (or its .pub) the anchors were signed with "
                                   "(default: UWF_ANCHOR_KEY, else anchor-key.pem beside "
                                   "the config)", metavar="FILE")] = None


class LogAnchor(Args, frozen=True, kw_only=True):
    key: Annotated[str | None, arg("the Ed25519 key to sign with (default: UWF_ANCHOR_KEY, "
                                   "else anchor-key.pem beside the config)",
                                   metavar="FILE")] = None
    out: Annotated[str | None, arg("write the anchor to this new file (default: print it)",
                                   metavar="FILE")] = None
    new_key: Annotated[bool, arg("make a new key at --key (and its public half at "
                                 "FILE.pub) instead of anchoring")] = False


def _log_tail(args: LogTail, ctx: Context) -> Iterator[str]:
    from uwf.audit import verify as audit

    store = ctx.store
    lines = audit.tail(store, args.n, args.type, args.subject, args.since)
    human = not ctx.json and sys.stdout.isatty()
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


def _log_verify(args: LogVerify, ctx: Context) -> Any:
    from uwf.audit import verify as audit

    if not args.anchor:
        if args.key is not None:
            from uwf.errors import UsageError

            raise UsageError("--key is only used with --anchor", "add --anchor FILE")
        return audit.verify(ctx.store)
    from pathlib import Path

    from uwf.audit import anchor

    key = anchor.load_public_key(anchor.usage_key(args.key, ctx.environ))
    # Every anchor is checked before the log is read: a forged one is refused outright.
    loaded = [(path, anchor.load(Path(path).expanduser(), key)) for path in args.anchor]
    return audit.verify(ctx.store, anchors=loaded)


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


def _log_anchor(args: LogAnchor, ctx: Context) -> Any:
    from pathlib import Path

    from uwf.audit import anchor

    key = anchor.usage_key(args.key, ctx.environ)
    if args.new_key:
        if args.out is not None:
            from uwf.errors import UsageError

            raise UsageError("--out is not used with --new-key", "make the key, then anchor")
        return anchor.new_key(key)
    made = anchor.make(ctx.store, key)
    if args.out is None:
        import msgspec

        return msgspec.to_builtins(made)
    out = Path(args.out).expanduser()
    anchor.write(made, out)
    return {"anchor": str(out), "seq": made.seq, "digest": made.digest, "ts": made.ts}


LOG_COMMANDS: list[Command[Any]] = [
    Command(("log", "tail"), "Print the last events of the log, optionally filtered.",
            "uwf log tail -n 20 --type workflow.registered", LogTail, _log_tail,
            streams=True),
    Command(("log", "verify"), "Verify the whole log: JSON, seq, chain, batches, types, "
            "data, order, CAS refs, and each --anchor (exit 1 naming every problem).",
            "uwf log verify --anchor ~/anchors/a1.json", LogVerify, _log_verify,
            human=_verify_panel, ok_exit=True),
    Command(("log", "anchor"), "Sign the log's head (seq, digest, time) with an Ed25519 key, "
            "to keep outside the store; --new-key makes the key.",
            "uwf log anchor --out ~/anchors/$(date +%F).json", LogAnchor, _log_anchor),
]
