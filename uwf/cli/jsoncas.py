"""`json-cas`: the content-addressed store's own command (same store root as uwf).

Its arguments and operations are declared in `uwf.jsoncas.commands`; here are the
help texts, and `put` and `hash` read their JSON from a file or stdin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from uwf.cli.common import parse_json, read_input
from uwf.cli.render import console
from uwf.config.args import NoArgs
from uwf.invoker.context import Context
from uwf.invoker.spec import Command, Group, on_store
from uwf.jsoncas import commands as cas
from uwf.jsoncas.commands import Gc, Get, Has, HashArgs, Put, Verify, Walk


def _read_json(source: str, ctx: Context) -> Any:
    """JSON from a file or `-` (stdin); a clear error when it is not JSON or is beyond
    the limits (docs/cli.md#limits)."""
    return parse_json(read_input(source, ctx.settings), source)


def _put(args: Put, ctx: Context) -> str:
    return cas.put(args, ctx.store, _read_json(args.file, ctx))


def _hash(args: HashArgs, ctx: Context) -> str:
    value = _read_json(args.file, ctx)
    return cas.hash_of(args, None if args.self else ctx.store, value)  # --self: no store


COMMANDS = Group(
    prog="json-cas",
    description="json-cas: the typed content-addressed store (XXH64, Crockford Base32).",
    groups={"schema": "schema nodes"},
    commands=[
        Command(("put",), "Validate and store a payload (with --type) or a whole node; "
                "print its hash.", "json-cas put --type Text note.json", Put, _put, plain=True),
        Command(("get",), "Print a node.", "json-cas get EYHPV6X8XHTCS", Get, on_store(cas.get),
                read_only=True, exact=True),
        Command(("has",), "Exit 0 if the node is present, 1 if not.",
                "json-cas has EYHPV6X8XHTCS", Has, on_store(cas.has), read_only=True),
        Command(("hash",), "Print a payload's hash, without validating or storing it.",
                "json-cas hash --type Text note.json", HashArgs, _hash, plain=True, read_only=True),
        Command(("verify",), "Recompute hashes and re-validate payloads (exit 1 on any "
                "problem).", "json-cas verify --all", Verify, on_store(cas.verify), ok_exit=True,
                read_only=True),
        Command(("walk",), "List a node and every node it references, depth first.",
                "json-cas walk FXY7NNQW135SM --depth 1", Walk, on_store(cas.walk), read_only=True),
        Command(("schema", "list"), "List the schema nodes in the store.",
                "json-cas schema list", NoArgs, on_store(cas.schema_list), read_only=True),
        Command(("gc",), "Remove nodes unreachable from the event log.",
                "json-cas gc --dry-run", Gc, on_store(cas.gc)),
    ],
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `json-cas` console script; `main(argv)` runs in-process."""
    return console(COMMANDS, argv)
