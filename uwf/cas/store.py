"""The typed store: meta-schema -> schema nodes -> data nodes, validated on put.

A node is `{"type", "payload", "timestamp"}`. The bootstrap meta-schema (json-cas's
own, `subset.py`) is self-typed; every schema node's type is its hash; every data
node's type is a schema node. Strings marked `"format": "cas_ref"` in a schema
are references that `walk` and `gc` follow.

Nodes are named by json-cas's hash rule (`hashing.py`), which a store records when
its first node is written. A store without the record was made by an older uwf:
its nodes may be named by the rule of `legacy.py`, so they are read and verified
under either rule; new nodes are always named by json-cas's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from uwf.cas.backends import Blobs, check_hash
from uwf.cas.builtins import BUILTIN_NAMES, _builtin_hashes, builtin_hash, builtin_schema, meta_hash
from uwf.cas.hashing import HASH_RULE, is_hash, node_hash, self_hash
from uwf.cas.legacy import LEGACY_RULE, legacy_node_hash, legacy_self_hash
from uwf.cas.limits import check_payload, check_size
from uwf.cas.nodes import Node, compact_node, content_hash, gathered, parsed
from uwf.cas.records import LoggedBlobs, PendingBlobs
from uwf.cas.refs import js_view, schema_refs
from uwf.cas.subset import (
    DRAFT07_BOOTSTRAP,
    REF_FORMAT,
    meta_schema,
    schema_problems,
)
from uwf.errors import Corrupt, NotFound, OldFormat, Rejected, UsageError
from uwf.redact import Redact, redact_value

CHECKED_KEPT = 4096  # checked nodes a Cas keeps in memory (then it lets them all go)


class WalkEntry(msgspec.Struct, frozen=True):
    hash: str
    type: str
    depth: int
    path: str
    missing: bool = False


def encode_node(type_hash: str, payload: Any, timestamp: int) -> bytes:
    """The stored form: readable, indented JSON, byte for byte what
    `json.dumps(node, ensure_ascii=False, indent=2)` writes (Python's json gives the
    text, which reads and writes any integer and float exactly; msgspec indents it:
    Python's own indenting encoder is pure Python, ~5 x the time;
    `tests/unit/test_node_bytes.py` compares the two)."""
    return msgspec.json.format(compact_node(type_hash, payload, timestamp), indent=2) + b"\n"


def _first_line(exc: Exception) -> str:
    """jsonschema-rs's message without the schema and instance it appends."""
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def _path(parts: Iterable[object]) -> str:
    text = ".".join(str(part) for part in parts)
    return text or "(root)"


class Cas:
    """The typed store over a `Blobs` backend."""

    def __init__(self, blobs: Blobs, clock: Callable[[], int],
                 redact: Redact | None = None) -> None:
        self.blobs = blobs
        self.clock = clock
        self.redact = redact  # secrets never reach a node: payloads are redacted first
        self._validators: dict[str, Any] = {}
        # Nodes are immutable: a step reads the same workflow, StartNode and head
        # several times, so decoded nodes are kept (verify always rereads the file).
        self._nodes: dict[str, Node] = {}
        # A gathering Cas (`pending`): the store's checked nodes, shared with it (a node
        # it gathers itself is kept apart: in the store only once its command is written).
        self._stored: dict[str, Node] | None = None
        self._valid: set[str] = set()  # nodes it gathered: each validated on its way in
        self._builtins_stored = False
        self._rule: str | None = None  # the store's hash rule, once read
        self._rule_settled = False  # recorded (or found to be legacy) before a write

    def refuse_old_bootstrap(self, where: object) -> None:
        """Fail closed on a store bootstrapped with the draft-07 meta-schema: its schema
        hashes (and every hash built on them) differ from json-cas's, so reading it
        with today's meta-schema would silently change what its nodes mean."""
        if self.blobs.exists(DRAFT07_BOOTSTRAP):
            raise OldFormat(
                f"the store {where} was written by an older uwf, with the draft-07 "
                f"bootstrap meta-schema ({DRAFT07_BOOTSTRAP}) instead of json-cas's: its "
                "hashes do not match json-cas's",
                f"move it aside (mv {where} {where}.old) and run the command again to "
                "re-create it, then register the workflows again (docs/json-cas.md#bootstrap)")

    # -- writing ---------------------------------------------------------

    def pending(self) -> tuple[Cas, PendingBlobs]:
        """A Cas whose puts are gathered, not written: what a command puts before it
        takes the writers' lock, read back as if stored; `PendingBlobs.records()` hands
        them to the journal, which appends them with the command's events
        (`uwf.cas.records`). Schemas' validators and the store's checked nodes are
        shared; a node gathered here is kept apart (it is in the store only once its
        command is written)."""
        blobs = PendingBlobs(self.blobs)
        gathering = Cas(blobs, self.clock, self.redact)
        gathering._validators = self._validators
        gathering._rule = self._rule
        gathering._rule_settled = self._rule_settled  # as the store's own Cas keeps it
        gathering._stored = self._nodes  # what it reads of the store is checked once
        gathering._builtins_stored = self._builtins_stored
        return gathering, blobs

    def adopt(self, gathering: Cas) -> None:
        """Keep as checked the nodes `gathering` (a `pending` Cas) gathered and read back,
        once the command that gathered them is written: they are in the store now, so
        the next step reads its head from memory, not back from the log."""
        if gathering._stored is not self._nodes:
            raise ValueError("adopt takes a Cas made by this one's `pending`")
        kept = self._nodes
        if len(kept) + len(gathering._nodes) >= CHECKED_KEPT:
            kept.clear()
        kept.update(gathering._nodes)
        self._builtins_stored = self._builtins_stored or gathering._builtins_stored
        if gathering._rule_settled and not self._rule_settled:
            self._rule, self._rule_settled = gathering._rule, True

    def ensure_builtins(self) -> None:
        """Write the meta-schema and the built-in schemas (idempotent; once per process,
        since gc always keeps them)."""
        if self._builtins_stored:
            return
        meta = meta_hash()
        self.ensure_meta()
        for name in BUILTIN_NAMES:
            if not self.blobs.exists(builtin_hash(name)):
                self.put(meta, builtin_schema(name))
        self._builtins_stored = True

    def put(self, type_hash: str, payload: Any, *, redact: bool = True,
            checked: bool = False) -> str:
        """Validate `payload` against its type's schema and store it; return its hash.

        `redact=False` stores the payload as given: `json-cas put` does, so a hash never
        depends on the environment. uwf's own nodes (agents' outputs, prompts) are masked.
        `checked`: the caller has just found `payload` valid for `type_hash` (`problems`),
        so it is not validated again (unless redaction made another payload of it).
        """
        check_hash(type_hash)
        check_payload(payload)  # first: redaction, hashing and validation recurse
        given = payload
        if self.redact is not None and redact:
            payload = redact_value(payload, self.redact)
        check_size(payload)
        if type_hash == meta_hash():
            self.ensure_meta()
        elif type_hash in _builtin_hashes():
            self.ensure_builtins()
        problems = [] if checked and payload is given else self.problems(type_hash, payload)
        if problems:
            raise Rejected(
                f"payload does not match type {type_hash}: {'; '.join(problems)}",
                "fix the payload or choose another --type",
            )
        hash_ = node_hash(type_hash, payload)
        if not self.blobs.exists(hash_):
            self._settle_rule()
            gathering = isinstance(self.blobs, PendingBlobs)  # for a record: one line
            data = (compact_node if gathering else encode_node)(type_hash, payload,
                                                               self.clock())
            self.blobs.write(hash_, data)
            if gathering:
                # A step's checks read its new nodes back: kept as checked, as parsed
                # from the bytes gathered (never the caller's objects), not hashed again.
                kept = self._nodes
                if len(kept) >= CHECKED_KEPT:
                    kept.clear()
                    self._valid.clear()
                kept[hash_] = gathered(hash_, data)
                self._valid.add(hash_)
        return hash_

    def conforms(self, hash_: str, type_hash: str) -> bool:
        """Whether `hash_` is a node of `type_hash` this gathering Cas (`pending`) put
        itself, and so validated against that schema on its way in: a check of its
        payload against the same schema would find what that one found (nothing)."""
        return hash_ in self._valid and self.get(hash_).type == type_hash

    def put_schema(self, schema: Any) -> str:
        return self.put(meta_hash(), schema)

    def put_text(self, text: str) -> str:
        self.ensure_builtins()
        return self.put(builtin_hash("Text"), text)

    def put_node(self, node: Any, *, redact: bool = True) -> str:
        """Store a whole `{"type","payload"[,"timestamp"]}` node, as `get` prints it."""
        if not isinstance(node, dict) or "type" not in node or "payload" not in node:
            raise UsageError(
                "input is not a node {\"type\", \"payload\"}", "give --type, or pipe `json-cas get`"
            )
        type_hash = node["type"]
        if not isinstance(type_hash, str):
            raise UsageError("node type must be a hash string", "fix the input")
        check_hash(type_hash)
        check_payload(node["payload"])
        if type_hash == self_hash(node["payload"]):
            if type_hash != meta_hash():
                raise Rejected("only the bootstrap meta-schema may be self-typed", "fix the input")
            self.ensure_meta()
            return type_hash
        return self.put(type_hash, node["payload"], redact=redact)

    def ensure_meta(self) -> None:
        meta = meta_hash()
        if not self.blobs.exists(meta):
            self._settle_rule()
            self.blobs.write(meta, encode_node(meta, meta_schema(), self.clock()))

    # -- the hash rule ---------------------------------------------------

    def hash_rule(self) -> str:
        """The rule the store's nodes are named by: json-cas's (`HASH_RULE`), or
        `LEGACY_RULE` for a store without a record (made by an older uwf)."""
        if self._rule is None:
            recorded = self.blobs.hash_rule()
            if recorded is not None and recorded != HASH_RULE:
                raise Corrupt(f"the store names its nodes by the hash rule {recorded!r}, "
                              f"which this uwf does not know (it knows {HASH_RULE!r})",
                              "upgrade uwf (docs/json-cas.md#old-stores)")
            self._rule = recorded or LEGACY_RULE
        return self._rule

    def _settle_rule(self) -> None:
        """Before the first write: a store with no node yet is new, and records
        json-cas's rule; one with nodes and no record stays an old-rule store."""
        if self._rule_settled:
            return
        self._rule = None  # reread: another process may have recorded it since
        if self.hash_rule() == LEGACY_RULE and next(iter(self.blobs.hashes()), None) is None:
            self.blobs.record_hash_rule(HASH_RULE)
            self._rule = HASH_RULE
        self._rule_settled = True

    def _old_rule_name(self, node: Node) -> bool:
        """True when `node` is named by the old rule (`legacy.py`), in any store."""
        try:
            if node.type == node.hash:
                return legacy_self_hash(node.payload) == node.hash
            return legacy_node_hash(node.type, node.payload) == node.hash
        except (ValueError, TypeError, OverflowError, RecursionError):
            return False

    # -- reading ---------------------------------------------------------

    def get(self, hash_: str, fresh: bool = False) -> Node:
        """The node stored under `hash_` (`fresh` rereads it from the backend).

        Fails closed (Corrupt) when the content does not hash to the name. Checked
        once per process per node: the cache holds only checked nodes.
        """
        cached = self._nodes.get(hash_)
        if cached is None and self._stored is not None:
            cached = self._stored.get(hash_)
        if cached is not None and not fresh:
            return cached
        loaded = self._load(hash_)
        actual = content_hash(loaded)
        if actual is None:
            raise Corrupt(f"node {hash_} is not a valid node file", "run `json-cas verify`")
        if actual != hash_ and not (self.hash_rule() == LEGACY_RULE
                                    and self._old_rule_name(loaded)):
            raise Corrupt(f"node {hash_} does not hash to its name: the file was altered",
                          "run `json-cas verify`")
        kept = self._nodes
        if self._stored is not None and not (isinstance(self.blobs, PendingBlobs)
                                             and self.blobs.gathered(hash_)):
            kept = self._stored
        if len(kept) >= CHECKED_KEPT:
            kept.clear()
        kept[hash_] = loaded
        return loaded

    def _load(self, hash_: str) -> Node:
        """The node as its file says, unchecked (verify names what is wrong with it)."""
        raw = self.blobs.read(check_hash(hash_))
        if raw is None:
            raise NotFound(f"node {hash_} not found", "check the hash, or `json-cas has` it")
        return parsed(hash_, raw)

    def forget_checked(self) -> None:
        """Drop the nodes kept as checked, so each is read again: a long-lived reader (the
        dashboard) sees a node deleted or altered since it last looked, never a stale one."""
        self._nodes.clear()

    def remove(self, hash_: str) -> None:
        """Delete a node (gc only: nodes are otherwise immutable)."""
        self._nodes.pop(hash_, None)
        self.blobs.remove(hash_)

    def has(self, hash_: str) -> bool:
        return self.blobs.exists(check_hash(hash_))

    def resolve_type(self, name_or_hash: str) -> str:
        """A schema hash from a hash or a schema's title (built-ins first)."""
        if name_or_hash in BUILTIN_NAMES:
            return builtin_hash(name_or_hash)
        if name_or_hash in ("meta", "Schema"):
            return meta_hash()
        if is_hash(name_or_hash):
            return name_or_hash
        for entry in self.schemas():
            if entry["title"] == name_or_hash:
                return str(entry["hash"])
        raise NotFound(f"no schema named {name_or_hash!r}", "list them with `json-cas schema list`")

    def schemas(self) -> list[dict[str, Any]]:
        """Every schema node in the store: hash and title."""
        meta = meta_hash()
        found = [{"hash": hash_, "title": name} for hash_, name in _builtin_hashes().items()
                 if not self.blobs.exists(hash_)]
        for hash_ in self.blobs.hashes():
            try:
                node = self.get(hash_)
            except Corrupt:
                continue
            if node.type == meta:
                title = node.payload.get("title") if isinstance(node.payload, dict) else None
                # json-cas's meta-schema has a description and no title.
                found.append({"hash": hash_, "title": title or ("meta-schema" if hash_ == meta
                                                                 else "")})
        return sorted(found, key=lambda entry: entry["hash"])

    # -- validation and verification --------------------------------------

    def problems(self, type_hash: str, payload: Any) -> list[str]:
        """Why `payload` is not a valid node of `type_hash` (empty when it is).

        Numbers are seen as the hash sees them (`normalize`): 2^53 + 1 is the double
        2^53, so a payload is never refused for a value it is stored and named as.
        """
        if type_hash == meta_hash():
            return schema_problems(payload)
        validator = self._validator(type_hash)
        return [f"{_path(err.instance_path)}: {err.message}"
                for err in validator.iter_errors(js_view(payload))]

    def _validator(self, type_hash: str) -> Any:
        validator = self._validators.get(type_hash)
        if validator is None:
            import jsonschema_rs

            schema = self.schema(type_hash)
            # A schema node written past the checks (by hand, by an older uwf) is checked
            # here: outside json-cas's subset it is refused, and so never refers outside.
            problems = [] if type_hash in _builtin_hashes() else schema_problems(schema)
            if not problems:
                try:
                    validator = jsonschema_rs.validator_for(
                        js_view(schema), formats={REF_FORMAT: is_hash},
                        validate_formats=True)
                except Exception as exc:
                    problems = [_first_line(exc)]
            if validator is None:
                raise Rejected(f"the schema of type {type_hash} cannot be used: {problems[0]}",
                               "put a schema of json-cas's subset and use its hash")
            self._validators[type_hash] = validator
        return validator

    def schema(self, type_hash: str) -> Any:
        """The JSON Schema of a type: a built-in one, or a schema node's payload."""
        builtin = _builtin_hashes().get(type_hash)
        if builtin is not None:
            return builtin_schema(builtin)
        try:
            schema_node = self.get(type_hash)
        except NotFound:
            raise NotFound(
                f"type {type_hash} is not in the store", "put its schema first"
            ) from None
        if schema_node.type != meta_hash():
            raise Rejected(f"type {type_hash} is not a schema node", "give a schema's hash")
        return schema_node.payload

    def verify(self, hash_: str) -> list[str]:
        """Recompute the hash and re-validate the payload; the problems found."""
        try:
            node = self._load(hash_)
        except (NotFound, Corrupt) as exc:
            return [exc.what]
        actual = content_hash(node)
        if actual is None:
            return ["the payload cannot be hashed: it is not a JSON value within the limits"]
        if node.type == hash_:
            if actual != hash_:
                return [f"self-typed hash recomputes to {actual}"]
            return [] if hash_ == meta_hash() else ["self-typed node is not the meta-schema"]
        if actual != hash_:
            if not self._old_rule_name(node):
                return [f"content hashes to {actual}: the node was altered"]
            if self.hash_rule() != LEGACY_RULE:
                return [f"content hashes to {actual}; its name is by uwf's old hash rule, "
                        "which this store, created with json-cas's, never wrote"]
        try:
            return self.problems(node.type, node.payload)
        except (NotFound, Rejected) as exc:
            return [exc.what]

    # -- references ------------------------------------------------------

    def refs(self, node: Node) -> Iterator[tuple[str, str]]:
        """(path, hash) of every cas_ref in a node's payload, by its schema."""
        if node.type == node.hash or node.type == meta_hash():
            return
        yield from schema_refs(self.schema(node.type), node.payload, "")

    def walk(self, hash_: str, depth: int | None = None) -> list[WalkEntry]:
        """The node and everything it references, depth first, each node once.

        An explicit stack of each open node's references, not recursion: a thread's
        StepNode chain is as long as its steps.
        """
        seen: set[str] = set()
        entries: list[WalkEntry] = []
        stack: list[tuple[Iterator[tuple[str, str]], int]] = []

        def enter(current: str, level: int, path: str) -> None:
            seen.add(current)
            node = self.get(current)
            entries.append(WalkEntry(current, node.type, level, path))
            if depth is None or level < depth:
                stack.append((self.refs(node), level))

        enter(check_hash(hash_), 0, "")
        while stack:
            refs, level = stack[-1]
            found = next(refs, None)
            if found is None:
                stack.pop()
                continue
            sub_path, ref = found
            if ref in seen:
                continue
            if self.has(ref):
                enter(ref, level + 1, sub_path)
            else:
                seen.add(ref)  # a dangling reference is shown, never skipped
                entries.append(WalkEntry(ref, "", level + 1, sub_path, missing=True))
        return entries

    def reachable(self, roots: Iterable[str]) -> set[str]:
        """Every node reachable from `roots` through references and types."""
        seen: set[str] = set()
        stack = [root for root in roots if is_hash(root)]
        while stack:
            current = stack.pop()
            if current in seen or not self.blobs.exists(current):
                continue
            seen.add(current)
            try:
                # Unchecked: an altered node still keeps what it names (gc errs on keeping).
                node = self._load(current)
                stack.append(node.type)
                stack.extend(ref for _, ref in self.refs(node))
            except (NotFound, Corrupt):
                continue
        return seen

    def kept(self, roots: Iterable[str]) -> set[str]:
        """What gc keeps whatever its age: every node reachable from `roots` or from the
        meta-schema and the built-in schemas (those present)."""
        return self.reachable([*roots, meta_hash(), *(builtin_hash(n) for n in BUILTIN_NAMES)])

    def garbage(self, roots: Iterable[str], grace_seconds: float) -> list[str]:
        """Nodes unreachable from `roots` and older than the grace period."""
        keep = self.kept(roots)
        logged = self.blobs.in_log if isinstance(self.blobs, LoggedBlobs) else None
        return [
            hash_ for hash_ in self.blobs.hashes()
            if hash_ not in keep and not (logged is not None and logged(hash_))
            and self.blobs.age(hash_) >= grace_seconds
        ]
