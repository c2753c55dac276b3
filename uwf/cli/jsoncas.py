"""`json-cas`: the content-addressed store's own command (same store root as uwf)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uwf.cli.common import read_input
from uwf.cli.render import run
from uwf.cli.spec import Command, Group, arg
from uwf.errors import UsageError

if TYPE_CHECKING:
    from uwf.cas.store import Cas


def _cas(args: argparse.Namespace) -> Cas:
    from uwf.api.store import Store

    return Store.open(args.store).cas


def _read_json(source: str) -> Any:
    """JSON from a file or `-` (stdin); a clear error when it is not JSON."""
    text = read_input(source)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source} is not JSON: {exc}", "fix the input") from None


def _put(args: argparse.Namespace) -> Any:
    cas = _cas(args)
    value = _read_json(args.file)
    if args.type is None:
        return cas.put_node(value)
    return cas.put(cas.resolve_type(args.type), value)


def _get(args: argparse.Namespace) -> Any:
    node = _cas(args).get(args.hash)
    return {"type": node.type, "payload": node.payload, "timestamp": node.timestamp}


def _has(args: argparse.Namespace) -> Any:
    from uwf.errors import NotFound

    if not _cas(args).has(args.hash):
        raise NotFound(f"node {args.hash} not found", "put it first")
    return {"hash": args.hash, "present": True}


def _hash(args: argparse.Namespace) -> Any:
    from uwf.cas.hashing import node_hash, self_hash

    value = _read_json(args.file)
    if args.self:
        return self_hash(value)
    if args.type is None:
        raise UsageError("hash needs --type HASH|NAME or --self", "see `json-cas hash --help`")
    cas = _cas(args)
    type_hash = cas.resolve_type(args.type)
    problems = cas.problems(type_hash, value)
    if problems:
        from uwf.errors import Rejected

        raise Rejected(f"payload does not match type {type_hash}: {'; '.join(problems)}",
                       "fix the payload or choose another --type")
    return node_hash(type_hash, value)


def _verify(args: argparse.Namespace) -> Any:
    cas = _cas(args)
    if args.all == bool(args.hashes):
        raise UsageError("verify takes hashes or --all", "see `json-cas verify --help`")
    hashes = list(cas.blobs.hashes()) if args.all else args.hashes
    problems = [{"hash": h, "problem": p} for h in hashes for p in cas.verify(h)]
    return {"ok": not problems, "checked": len(hashes), "problems": problems}


def _walk(args: argparse.Namespace) -> Any:
    return [
        {"hash": entry.hash, "type": entry.type, "depth": entry.depth, "path": entry.path,
         "missing": entry.missing}
        for entry in _cas(args).walk(args.hash, args.depth)
    ]


def _schema_list(args: argparse.Namespace) -> Any:
    return _cas(args).schemas()


def _gc(args: argparse.Namespace) -> Any:
    from uwf.api.store import Store
    from uwf.engine.events import decode_line

    if args.dry_run == args.yes:
        raise UsageError("gc deletes nodes", "pass --dry-run to list them or --yes to delete")
    store = Store.open(args.store)
    with store.log.lock():  # no event can land between computing roots and deleting
        roots = [ref for line in store.log.read() for ref in decode_line(line.raw).data.cas_refs()]
        garbage = store.cas.garbage(roots, args.grace)
        if args.yes:
            for hash_ in garbage:
                store.cas.remove(hash_)
    return {"removed" if args.yes else "unreachable": garbage, "count": len(garbage)}


_FILE = arg("file", help="JSON file, or - for stdin", nargs="?", default="-")

COMMANDS = Group(
    prog="json-cas",
    description="json-cas: the typed content-addressed store (XXH64, Crockford Base32).",
    groups={"schema": "schema nodes"},
    commands=[
        Command(("put",), "Validate and store a payload (with --type) or a whole node; "
                "print its hash.", "json-cas put --type Text note.json", _put,
                (arg("--type", help="schema hash or name (Workflow, StartNode, StepNode, Text)"),
                 _FILE), plain=True),
        Command(("get",), "Print a node.", "json-cas get EYHPV6X8XHTCS", _get,
                (arg("hash", help="node hash"),)),
        Command(("has",), "Exit 0 if the node is present, 1 if not.",
                "json-cas has EYHPV6X8XHTCS", _has, (arg("hash", help="node hash"),)),
        Command(("hash",), "Print the hash a payload would have, without storing it.",
                "json-cas hash --type Text note.json", _hash,
                (arg("--type", help="schema hash or name"),
                 arg("--self", help="hash as a self-typed node (the meta-schema)",
                     action="store_true"), _FILE), plain=True),
        Command(("verify",), "Recompute hashes and re-validate payloads (exit 1 on any "
                "problem).", "json-cas verify --all", _verify,
                (arg("hashes", help="node hashes", nargs="*"),
                 arg("--all", help="verify every node", action="store_true")), ok_exit=True),
        Command(("walk",), "List a node and every node it references, depth first.",
                "json-cas walk 70D2DHWNFR6T8 --depth 1", _walk,
                (arg("hash", help="node hash"),
                 arg("--depth", help="how deep to follow references", type=int))),
        Command(("schema", "list"), "List the schema nodes in the store.",
                "json-cas schema list", _schema_list),
        Command(("gc",), "Remove nodes unreachable from the event log.",
                "json-cas gc --dry-run", _gc,
                (arg("--dry-run", help="only list what would be removed", action="store_true"),
                 arg("--yes", help="really remove them", action="store_true"),
                 arg("--grace", help="spare nodes younger than this many seconds "
                     "(default 900: a command may be about to refer to them)",
                     type=float, default=900.0))),
    ],
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `json-cas` console script."""
    code = run(COMMANDS, argv)
    if argv is None:
        sys.exit(code)
    return code
