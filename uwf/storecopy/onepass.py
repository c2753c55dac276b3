"""A store's copy checked and folded in one pass over the lines it writes
(docs/hosts.md#copying-a-store).

Each line the copy appends goes, as it is appended, through `log verify`'s checks (the
audit fed a line at a time: `uwf.audit.verify.Audit`, each feature's order check
among them), then into the destination's new views (the rebuild's fold, a stretch at
a time, committed as it goes); the nodes its events name are gathered on the way.
Once the lines are in, what `registry verify` checks is checked against the rows that
one fold wrote (`uwf.runs.registry.compare`): the views are never replayed a second
time, and no line is read back.

Memory does not grow with the log: the audit keeps the last line's digest only (the
views' checkpoints are all at it; `log verify` keeps one a line, for any checkpoint and
anchor), the fold one stretch; what is kept is by entity and node: the views' rows
(what `registry verify` compares), the nodes named.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from uwf.audit.verify import Audit
from uwf.engine.bulkfold import PlannedFold
from uwf.engine.events import Envelope, EventCatalog
from uwf.engine.fold import Folded, Key
from uwf.engine.log import GENESIS, Checkpoint, LogLine
from uwf.engine.viewspec import STREAMS, Part, Row
from uwf.errors import Corrupt

if TYPE_CHECKING:
    from uwf.store import Store


class OnePass:
    """The checks and the fold of one copy: `fold` the lines as they are appended, then
    `findings` once the copy's lines and nodes are all in the destination."""

    def __init__(self, src: Store, dst: Store) -> None:
        self.src = src
        self.dst = dst
        self.audit = Audit(dst, has=self._has, last_only=True)  # its checkpoints: the head
        self.named: set[str] = set()  # the nodes the lines' events name that exist
        self._absent: set[str] = set()
        self.rows: dict[Key, Row] = {}  # the views' rows, as the fold wrote them last
        self.head = GENESIS

    def _has(self, hash_: str) -> bool:
        """Whether the copy will hold a node an event names: the source's nodes are
        copied (every one the log reaches: `named` is where that starts), and the
        copy's `missing` check then finds any that did not arrive; one the source lacks
        is the destination's only if it held it before. Asked once a node."""
        if hash_ in self.named:
            return True
        if hash_ in self._absent:
            return False
        if self.src.cas.has(hash_) or self.dst.cas.has(hash_):
            self.named.add(hash_)
            return True
        self._absent.add(hash_)
        return False

    def _audited(self, lines: Iterable[LogLine], decoded: _Decoded) -> Iterator[LogLine]:
        audit = self.audit.line
        for line in lines:
            decoded.envelope = audit(line)
            decoded.raw = line.raw
            yield line

    def _kept(self, parts: Iterator[Part]) -> Iterator[Part]:
        """The fold's parts, each stretch's rows remembered (a later stretch's row of
        the same entity replaces its earlier one; a removed entity leaves)."""
        rows = self.rows
        for part in parts:
            for view, found in part[0].items():
                for key, row in found.items():
                    if row is None:
                        rows.pop((view, key), None)
                    else:
                        rows[(view, key)] = row
            yield part

    def fold(self, lines: Iterable[LogLine]) -> Checkpoint:
        """The destination's views made new from `lines` (its log's, in order, as they
        are appended), each line checked by the audit first; the head folded. Inside
        the destination's writer's section (PostgreSQL: its one transaction)."""
        journal = self.dst.journal
        names = (*journal.projections, STREAMS)
        folded = Folded(GENESIS)
        # The rebuild's fold, given the envelope the audit decoded of each line.
        decoded = _Decoded(journal.catalog)
        fold = PlannedFold(self.dst.views, journal.projections, decoded)
        parts = self._kept(fold.parts(self._audited(lines, decoded), dict.fromkeys(names, 0),
                                      set(), names, folded))
        changes, streams = next(parts, ({}, []))
        checkpoints = self.dst.views.checkpoints()
        expected = {name: checkpoints.get(name) for name in names}
        if not self.dst.views.commit(changes, expected, folded, reset=True, streams=streams,
                                     more=parts):
            raise Corrupt(f"the views of {self.dst.location} moved while the copy folded "
                          "them", "copy again into a new store")
        self.head = folded.head
        return self.head

    def findings(self, end: Checkpoint, nodes: list[str]) -> list[str]:
        """What is wrong with the copy of the source's log up to `end` and `nodes` (once
        folded): its head is not `end`, a node is missing, `log verify` or `registry
        verify` does not pass on it. The destination's progress is told the views' rows
        compared (from none, then all)."""
        from uwf.runs.registry import compare

        dst = self.dst
        found: list[str] = []
        head = dst.log.head()
        if head != end:
            found.append(f"its log ends at seq {head.seq} (digest {head.digest}), the copied "
                         f"one at seq {end.seq} (digest {end.digest})")
        missing = _missing(dst, nodes)
        if missing:
            found.append(f"{len(missing)} of {len(nodes)} nodes are missing, {missing[0]} first")
        log = self.audit.result()
        found += [f"log verify: seq {problem.seq} ({problem.segment}): {problem.problem}"
                  for problem in log.problems]
        progress = dst.progress
        if progress is not None:
            progress(0, len(self.rows))
        views = compare(dst, self.head, self.rows)
        if progress is not None:
            progress(len(self.rows), len(self.rows))
        found += [f"registry verify: {entry.view} {entry.key}: {entry.problem}"
                  for entry in views.differences]
        found += [f"registry verify: thread {entry.thread}: its head node {entry.head} is "
                  f"{kind}" for kind, damaged in (("missing", views.heads.missing),
                                                 ("corrupt", views.heads.corrupt))
                  for entry in damaged]
        return found


class _Decoded(EventCatalog):
    """A store's catalogue that decodes the line the audit has just decoded (the same
    bytes) to the envelope the audit made of it, and any other line as the store's does:
    each line is decoded once."""

    def __init__(self, catalog: EventCatalog) -> None:  # what it knows is `catalog`'s
        self.catalog = catalog
        self.raw: bytes | None = None
        self.envelope: Envelope | None = None

    def decode(self, line: bytes) -> Envelope:
        if line is self.raw and self.envelope is not None:
            return self.envelope
        return self.catalog.decode(line)


def _missing(dst: Store, nodes: list[str]) -> list[str]:
    """Those of `nodes` the copy lacks: the node records its log holds (its nodes view:
    one read), then the others asked in few statements where the store can
    (PostgreSQL's `missing`), else one by one."""
    from uwf.cas.records import LoggedBlobs

    blobs = dst.cas.blobs
    records = set(blobs.records.hashes()) if isinstance(blobs, LoggedBlobs) else set()
    loose = blobs.loose if isinstance(blobs, LoggedBlobs) else blobs
    files = [hash_ for hash_ in nodes if hash_ not in records]
    asked = getattr(loose, "missing", None)
    return list(asked(files)) if asked is not None else [
        hash_ for hash_ in files if not dst.cas.has(hash_)]
