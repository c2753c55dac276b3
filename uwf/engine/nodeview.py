"""The `nodes` view: where each node record of the log is (hash -> seq), and the reads
the CAS makes through it (SPEC §4, "Where nodes live").

A node record is a `cas.node` line, written in the same batch as the events that
name the node. The view keeps the first record of each hash (a node written twice
by two commands that raced keeps its first timestamp, as a loose file does); like
every view it is rebuilt from the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

import msgspec

from uwf.engine.events import CasNode, Envelope
from uwf.engine.projection import StructProjection
from uwf.errors import UwfError

if TYPE_CHECKING:
    from uwf.engine.journal import Journal

NODES = "nodes"


class NodeAt(msgspec.Struct, frozen=True):
    """Where a node's record is: the seq of its line."""

    seq: int


class NodesProjection(StructProjection):
    name: ClassVar[str] = NODES
    version: ClassVar[int] = 1
    event_types: ClassVar[frozenset[str]] = frozenset({CasNode.type})
    state_type: ClassVar[type[msgspec.Struct]] = NodeAt

    def key(self, event: Envelope) -> str:
        data: CasNode = event.data
        return data.hash

    def apply(self, state: NodeAt | None, event: Envelope) -> NodeAt:
        return state if state is not None else NodeAt(event.seq)


class _RecordOnly(msgspec.Struct):
    type: str
    data: _NodeOnly


_MARK = f'"type":"{CasNode.type}"'.encode()


class _NodeOnly(msgspec.Struct):
    hash: str
    node: msgspec.Raw


_record_decoder = msgspec.json.Decoder(_RecordOnly)


class NodeRecords:
    """The node records of a journal's log, found through the `nodes` view: what
    `uwf.cas.records.LoggedBlobs` reads besides the loose files."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def _seq(self, hash_: str) -> int | None:
        views = self._journal.views
        raw = views.load(NODES, hash_)
        if raw is not None:
            state: NodeAt = self._journal.projections[NODES].decode(raw)
            return state.seq
        # Not indexed: absent, or in lines the view has not folded yet (written since it
        # was caught up, or by a command whose views did not follow): those lines are
        # looked through, changing nothing (a read never moves a view under a command
        # that read it at an older checkpoint). Absent views are built first, as any
        # read builds them.
        checkpoint = views.checkpoints().get(NODES)
        if checkpoint is None:
            try:
                checkpoint = self._journal.refresh()
            except UwfError:
                return None
            raw = views.load(NODES, hash_)
            return None if raw is None else self._seq(hash_)
        wanted = f'"hash":"{hash_}"'.encode()
        for line in self._journal.log.read(checkpoint.seq):
            if _MARK in line.raw and wanted in line.raw:
                try:
                    record = _record_decoder.decode(line.raw)
                except msgspec.DecodeError:
                    continue
                if record.type == CasNode.type and record.data.hash == hash_:
                    return line.seq
        return None

    def read(self, hash_: str) -> bytes | None:
        """The node's JSON as its record holds it, or None when no record has it (or
        the line at its seq is no longer that record: a log rewritten under the views,
        which every read then refuses)."""
        seq = self._seq(hash_)
        if seq is None:
            return None
        line = self._journal.log.line(seq)
        if line is None:
            return None
        try:
            record = _record_decoder.decode(line)
        except msgspec.DecodeError:
            return None
        if record.type != CasNode.type or record.data.hash != hash_:
            return None
        return bytes(record.data.node)

    def exists(self, hash_: str) -> bool:
        return self._seq(hash_) is not None

    def indexed(self, hash_: str) -> bool:
        return self._journal.views.load(NODES, hash_) is not None

    def hashes(self) -> Iterator[str]:
        """Every hash with a record."""
        self._journal.refresh()
        for key, _ in self._journal.views.scan(NODES):
            yield key
