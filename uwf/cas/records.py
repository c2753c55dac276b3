"""Nodes kept in the log as records, beside the loose ones (SPEC §4, "Where nodes live").

A command that writes nodes gathers them first in a `PendingBlobs` (before it takes
the writers' lock): its puts are validated and hashed there, and its reads see them,
but nothing is written. The journal then appends them as `cas.node` records in the
same write as the events that name them (`Journal.write(..., nodes=...)`), so one
fsync makes both durable. `LoggedBlobs` reads a store's nodes wherever they are: a
record found through the `nodes` view, else a loose file (older stores, and `json-cas
put` outside a command). Hashes never depend on where a node is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import msgspec

from uwf.cas.backends import Blobs, check_hash


class NodeIndex(Protocol):
    """The log's node records (`uwf.engine.nodeview.NodeRecords`)."""

    def read(self, hash_: str) -> bytes | None: ...

    def exists(self, hash_: str) -> bool: ...

    def indexed(self, hash_: str) -> bool:
        """Whether the nodes view has folded a record of `hash_` (no look further)."""
        ...

    def hashes(self) -> Iterator[str]: ...


class LoggedBlobs:
    """A store's nodes: the loose files, then the log's records (a file's absence costs
    one failed open; a record's, a look through the lines the nodes view has not
    folded, so the cheap question is asked first). Writes (a put
    outside a command: `json-cas put`, the built-in schemas) go to the loose files;
    records are written only by the journal, and never removed (the log is
    append-only: gc collects loose files alone)."""

    def __init__(self, loose: Blobs, records: NodeIndex) -> None:
        self.loose = loose
        self.records = records

    def read(self, hash_: str) -> bytes | None:
        found = self.loose.read(hash_)
        return found if found is not None else self.records.read(check_hash(hash_))

    def exists(self, hash_: str) -> bool:
        return self.loose.exists(hash_) or self.records.exists(check_hash(hash_))

    def known(self, hash_: str) -> bool:
        """`exists`, without looking through the lines the nodes view has not folded:
        what a writer asks before it gathers a node (a node it misses there is written
        again, and its first record stays the one read)."""
        return self.loose.exists(hash_) or self.records.indexed(check_hash(hash_))

    def write(self, hash_: str, data: bytes) -> bool:
        if self.records.exists(check_hash(hash_)):
            return False
        return self.loose.write(hash_, data)

    def hashes(self) -> Iterator[str]:
        yield from sorted({*self.loose.hashes(), *self.records.hashes()})

    def in_log(self, hash_: str) -> bool:
        """Whether the node has a record (which gc never removes)."""
        return self.records.exists(check_hash(hash_))

    def remove(self, hash_: str) -> None:
        self.loose.remove(hash_)

    def age(self, hash_: str) -> float:
        return self.loose.age(hash_)

    def hash_rule(self) -> str | None:
        return self.loose.hash_rule()

    def record_hash_rule(self, rule: str) -> None:
        self.loose.record_hash_rule(rule)


def compact(data: bytes) -> bytes:
    """A node's JSON (as `encode_node` writes it, indented) on one line: the same
    fields, in the same order, with the same values, their text untouched (what
    `json.dumps(json.loads(data), separators=(",", ":"))` gives, without reading it)."""
    return msgspec.json.format(data, indent=-1)


class PendingBlobs:
    """`base`, plus the nodes a command has put and not yet written: they are read as
    if stored, and handed to the journal as records (`records`)."""

    def __init__(self, base: Blobs) -> None:
        self.base = base
        self._new: dict[str, bytes] = {}
        self._known = base.known if isinstance(base, LoggedBlobs) else base.exists

    def gathered(self, hash_: str) -> bool:
        """Whether `hash_` is one of the nodes gathered here (not yet in the store)."""
        return hash_ in self._new

    def records(self) -> list[tuple[str, bytes]]:
        """The new nodes as (hash, compact JSON), in the order they were put (a schema
        before the nodes it types)."""
        return [(hash_, compact(data)) for hash_, data in self._new.items()]

    def read(self, hash_: str) -> bytes | None:
        found = self._new.get(hash_)
        return found if found is not None else self.base.read(hash_)

    def exists(self, hash_: str) -> bool:
        return hash_ in self._new or self._known(hash_)

    def write(self, hash_: str, data: bytes) -> bool:
        """Gathered (`Cas.put` writes only what `exists` did not find)."""
        if check_hash(hash_) in self._new:
            return False
        self._new[hash_] = data
        return True

    def hashes(self) -> Iterator[str]:
        yield from sorted({*self.base.hashes(), *self._new})

    def remove(self, hash_: str) -> None:
        raise RuntimeError("a command's pending nodes are never removed")

    def age(self, hash_: str) -> float:
        return 0.0 if hash_ in self._new else self.base.age(hash_)

    def hash_rule(self) -> str | None:
        return self.base.hash_rule()

    def record_hash_rule(self, rule: str) -> None:
        self.base.record_hash_rule(rule)
