"""`json-cas`: the content-addressed store's own command (same store root as uwf).

Declarations only: each command's arguments as a Struct, and a handler that
reads its input and calls `uwf.jsoncas.service`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import msgspec

from uwf.cli.common import parse_json, read_input
from uwf.cli.context import Context
from uwf.cli.render import console
from uwf.cli.spec import Command, Group
from uwf.config.args import Age, Args, NoArgs, arg
from uwf.errors import UsageError

Hash = Annotated[str, arg("node hash", positional=True)]
JsonFile = Annotated[str, arg("JSON file, or - for stdin", positional=True)]


class Put(Args, frozen=True, kw_only=True):
    type: Annotated[str | None, arg("schema hash or name (Workflow, StartNode, StepNode, "
                                    "Text)")] = None
    file: JsonFile = "-"


class Get(Args, frozen=True, kw_only=True):
    hash: Hash


class Has(Args, frozen=True, kw_only=True):
    hash: Hash


class HashArgs(Args, frozen=True, kw_only=True):
    type: Annotated[str | None, arg("schema hash or name")] = None
    self: Annotated[bool, arg("hash as a self-typed node (the meta-schema)")] = False
    file: JsonFile = "-"


class Verify(Args, frozen=True, kw_only=True):
    hashes: Annotated[list[str], arg("node hashes", positional=True)] = msgspec.field(
        default_factory=list)
    all: Annotated[bool, arg("verify every node")] = False


class Walk(Args, frozen=True, kw_only=True):
    hash: Hash
    depth: Annotated[int | None, arg("how deep to follow references")] = None


class Gc(Args, frozen=True, kw_only=True):
    dry_run: Annotated[bool, arg("only list what would be removed")] = False
    yes: Annotated[bool, arg("really remove them")] = False
    grace: Annotated[Age, arg("spare nodes younger than this many seconds (default 900: "
                              "a command may be about to refer to them)")] = 900.0


def _read_json(source: str) -> Any:
    """JSON from a file or `-` (stdin); a clear error when it is not JSON or is beyond
    the limits (docs/cli.md#limits)."""
    return parse_json(read_input(source), source)


def _put(args: Put, ctx: Context) -> Any:
    from uwf.jsoncas import service as jsoncas

    return jsoncas.put(ctx.store, _read_json(args.file), args.type)


def _get(args: Get, ctx: Context) -> Any:
    from uwf.jsoncas import service as jsoncas

    return jsoncas.get(ctx.store, args.hash)


def _has(args: Has, ctx: Context) -> Any:
    from uwf.jsoncas import service as jsoncas

    return jsoncas.has(ctx.store, args.hash)


def _hash(args: HashArgs, ctx: Context) -> Any:
    from uwf.jsoncas import service as jsoncas

    value = _read_json(args.file)
    if args.self:
        return jsoncas.hash_self(value)
    if args.type is None:
        raise UsageError("hash needs --type HASH|NAME or --self", "see `json-cas hash --help`")
    return jsoncas.hash_typed(ctx.store, args.type, value)


def _verify(args: Verify, ctx: Context) -> Any:
    from uwf.jsoncas import service as jsoncas

    if args.all == bool(args.hashes):
        raise UsageError("verify takes hashes or --all", "see `json-cas verify --help`")
    return jsoncas.verify(ctx.store, None if args.all else args.hashes)


def _walk(args: Walk, ctx: Context) -> Any:
    from uwf.jsoncas import service as jsoncas

    return jsoncas.walk(ctx.store, args.hash, args.depth)


def _schema_list(args: NoArgs, ctx: Context) -> Any:
    from uwf.jsoncas import service as jsoncas

    return jsoncas.schemas(ctx.store)


def _gc(args: Gc, ctx: Context) -> Any:
    from uwf.jsoncas import service as jsoncas

    if args.dry_run == args.yes:
        raise UsageError("gc deletes nodes", "pass --dry-run to list them or --yes to delete")
    return jsoncas.gc(ctx.store, args.grace, delete=args.yes)


COMMANDS = Group(
    prog="json-cas",
    description="json-cas: the typed content-addressed store (XXH64, Crockford Base32).",
    groups={"schema": "schema nodes"},
    commands=[
        Command(("put",), "Validate and store a payload (with --type) or a whole node; "
                "print its hash.", "json-cas put --type Text note.json", Put, _put, plain=True),
        Command(("get",), "Print a node.", "json-cas get EYHPV6X8XHTCS", Get, _get),
        Command(("has",), "Exit 0 if the node is present, 1 if not.",
                "json-cas has EYHPV6X8XHTCS", Has, _has),
        Command(("hash",), "Print a payload's hash, without validating or storing it.",
                "json-cas hash --type Text note.json", HashArgs, _hash, plain=True),
        Command(("verify",), "Recompute hashes and re-validate payloads (exit 1 on any "
                "problem).", "json-cas verify --all", Verify, _verify, ok_exit=True),
        Command(("walk",), "List a node and every node it references, depth first.",
                "json-cas walk FXY7NNQW135SM --depth 1", Walk, _walk),
        Command(("schema", "list"), "List the schema nodes in the store.",
                "json-cas schema list", NoArgs, _schema_list),
        Command(("gc",), "Remove nodes unreachable from the event log.",
                "json-cas gc --dry-run", Gc, _gc),
    ],
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `json-cas` console script; `main(argv)` runs in-process."""
    return console(COMMANDS, argv)
