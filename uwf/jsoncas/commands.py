"""The arguments of `json-cas ...` and the operations every surface calls.

Cheap to import (msgspec and the argument base only): the services load when an
operation runs. `put` and `hash` take the JSON value itself: where it comes from (a
file, stdin) is the caller's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from uwf.config.args import Age, Args, NoArgs, arg

if TYPE_CHECKING:
    from uwf.jsoncas.results import (
        CasVerified,
        Collected,
        NodeShown,
        Present,
        SchemaListed,
        Walked,
    )
    from uwf.store import Store

Hash = Annotated[str, arg("node hash (in any case)", positional=True, ids="hash")]
JsonFile = Annotated[str, arg("JSON file, or - for stdin", positional=True)]


class Put(Args, frozen=True, kw_only=True):
    type: Annotated[str | None, arg("schema hash or name (Workflow, StartNode, StepNode, "
                                    "RetriedStepNode, Text)")] = None
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


def put(args: Put, store: Store, value: Any) -> str:
    """Store `value` as a payload of `type`, or as a whole node without one; its hash."""
    from uwf.jsoncas import service

    return service.put(store.cas, value, args.type)


def get(args: Get, store: Store) -> NodeShown:
    """A node."""
    from uwf.jsoncas import service

    return service.get(store.cas, args.hash)


def has(args: Has, store: Store) -> Present:
    """The node is present (NotFound when it is not)."""
    from uwf.jsoncas import service

    return service.has(store.cas, args.hash)


def hash_of(args: HashArgs, store: Store | None, value: Any) -> str:
    """The hash of `value`, stored nowhere: as a self-typed node with `self` (no store
    is read: `store` may be None), else as a node of `type`."""
    from uwf.errors import UsageError
    from uwf.jsoncas import service

    if args.self:
        return service.hash_self(value)
    if args.type is None:
        raise UsageError("hash needs --type HASH|NAME or --self", "see `json-cas hash --help`")
    assert store is not None, "a typed hash resolves its type in a store"
    return service.hash_typed(store.cas, args.type, value)


def verify(args: Verify, store: Store) -> CasVerified:
    """Recompute the hashes and re-validate the payloads of `hashes`, or of every node."""
    from uwf.errors import UsageError
    from uwf.jsoncas import service

    if args.all == bool(args.hashes):
        raise UsageError("verify takes hashes or --all", "see `json-cas verify --help`")
    return service.verify(store.cas, None if args.all else args.hashes)


def walk(args: Walk, store: Store) -> list[Walked]:
    """A node and every node it references, depth first."""
    from uwf.jsoncas import service

    return service.walk(store.cas, args.hash, args.depth)


def schema_list(args: NoArgs, store: Store) -> list[SchemaListed]:
    """The schema nodes in the store."""
    from uwf.jsoncas import service

    return service.schemas(store.cas)


def gc(args: Gc, store: Store) -> Collected:
    """The nodes unreachable from the log: listed with `dry_run`, removed with `yes`."""
    from uwf.errors import UsageError
    from uwf.jsoncas import service

    if args.dry_run == args.yes:
        raise UsageError("gc deletes nodes", "pass --dry-run to list them or --yes to delete")
    return service.gc(store, args.grace, delete=args.yes)
