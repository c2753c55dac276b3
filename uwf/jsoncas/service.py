"""`json-cas`: put, get, hash, verify, walk and gc a store's content-addressed nodes.

One function per command, each taking the part of an open `Store` it uses (its CAS,
`store.cas`, for most); the operations (`uwf.jsoncas.commands`) call them with a
command's arguments.

A payload given to `put` or `hash` is hashed and stored exactly as given: secrets
are masked where uwf composes text from the environment (errors, agents' context,
the log's data), never here, so a hash never depends on the environment.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from uwf.errors import NotFound
from uwf.jsoncas.results import (
    CasVerified,
    Collected,
    NodeProblem,
    NodeShown,
    Present,
    SchemaListed,
    Walked,
)

if TYPE_CHECKING:
    from uwf.cas.store import Cas
    from uwf.engine.log import LogLine
    from uwf.store import Store


def put(cas: Cas, value: Any, type_name: str | None = None) -> str:
    """Store `value` as a payload of `type_name` (a schema hash or name), or, without
    one, as a whole `{"type","payload"}` node; its hash."""
    if type_name is None:
        return cas.put_node(value, redact=False)
    return cas.put(cas.resolve_type(type_name), value, redact=False)


def get(cas: Cas, hash_: str) -> NodeShown:
    """A node: its type, payload and first-stored timestamp."""
    node = cas.get(hash_)
    return NodeShown(type=node.type, payload=node.payload, timestamp=node.timestamp)


def has(cas: Cas, hash_: str) -> Present:
    """The node is present; NotFound (exit 1) when it is absent."""
    if not cas.has(hash_):
        raise NotFound(f"node {hash_} not found", "put it first")
    return Present(hash=hash_, present=True)


def hash_typed(cas: Cas, type_name: str, value: Any) -> str:
    """The hash of `value` as a node of `type_name`, without storing anything.

    A pure hash, as json-cas's: the payload is not validated, and a type given as a
    hash need not be in the store (a name must resolve to one). Only the limits apply.
    """
    from uwf.cas.hashing import node_hash
    from uwf.cas.limits import check_payload, check_size

    type_hash = cas.resolve_type(type_name)
    check_payload(value)  # the limits `put` applies, before anything recursive
    check_size(value)
    return node_hash(type_hash, value)


def hash_self(value: Any) -> str:
    """The hash of `value` as a self-typed node (the meta-schema's form); no store needed."""
    from uwf.cas.hashing import self_hash
    from uwf.cas.limits import check_payload, check_size

    check_payload(value)
    check_size(value)
    return self_hash(value)


def verify(cas: Cas, hashes: list[str] | None = None) -> CasVerified:
    """Recompute and re-validate `hashes` (every node when None); `ok` is false on any
    problem, each named."""
    checked = list(cas.blobs.hashes()) if hashes is None else hashes
    problems = [NodeProblem(hash=h, problem=p) for h in checked for p in cas.verify(h)]
    return CasVerified(ok=not problems, checked=len(checked), problems=problems)


def walk(cas: Cas, hash_: str, depth: int | None = None) -> list[Walked]:
    """A node and every node it references (to `depth`), depth first."""
    return [Walked(hash=entry.hash, type=entry.type, depth=entry.depth, path=entry.path,
                   missing=entry.missing) for entry in cas.walk(hash_, depth)]


def schemas(cas: Cas) -> list[SchemaListed]:
    """Every schema node: hash and title."""
    return [SchemaListed(hash=row["hash"], title=row["title"]) for row in cas.schemas()]


def gc(store: Store, grace_seconds: float, *, delete: bool) -> Collected:
    """Nodes unreachable from the log and older than `grace_seconds`: listed, or
    removed when `delete`. A younger node is spared: a command may be about to
    record an event referring to it."""
    # Under the log's lock, no event can land between computing the roots and deleting.
    with store.log.exclusive():
        garbage = store.cas.garbage(log_refs(store), grace_seconds)
        if delete:
            for hash_ in garbage:
                store.cas.remove(hash_)
    if delete:
        return Collected(removed=garbage, count=len(garbage))
    return Collected(unreachable=garbage, count=len(garbage))


def log_refs(store: Store, lines: Iterable[LogLine] | None = None) -> list[str]:
    """Every CAS hash an event of the log (or of `lines`, some of its lines) refers to:
    the roots `gc` keeps.

    The only place this module reads the log.
    """
    decode = store.journal.catalog.decode
    return [ref for line in (store.log.read() if lines is None else lines)
            for ref in decode(line.raw).data.cas_refs()]


def reached(store: Store, lines: Iterable[LogLine] | None = None) -> set[str]:
    """Every node the log (or `lines` of it) reaches, as gc counts them: those its events
    name, the meta-schema and the built-in schemas, and every node reachable from those
    through references (a StepNode's prev chain) and types (schemas). What gc keeps
    whatever its age, and what `uwf store copy` copies."""
    return store.cas.kept(log_refs(store, lines))
