"""`uwf log tail` and `uwf log verify`: reading the log as an auditor (SPEC §9)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from uwf.audit.results import AnchorHeld, LineProblem, LogVerified
from uwf.cas.hashing import is_hash
from uwf.cas.nodes import record_problem
from uwf.engine.events import (
    FORMAT_VERSION,
    GENESIS_PREV,
    CasNode,
    Envelope,
    StoreCreated,
    digest,
)
from uwf.engine.feature import Check, checks_of
from uwf.engine.fold import PROGRESS_EVERY, Progress
from uwf.engine.log import LogLine
from uwf.errors import Corrupt, UwfError
from uwf.payload import UNSET, UnsetType
from uwf.store import Store

if TYPE_CHECKING:
    from uwf.audit.results import Anchor
    from uwf.engine.log import EventLog
    from uwf.engine.viewspec import ViewStore

_ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _matches(envelope: Envelope, type_: str | None, subject: str | None) -> bool:
    """Whether `log tail` shows the line: node records (`cas.node`: content, not events)
    only when `--type` names them."""
    if type_ and envelope.type != type_ and not envelope.type.startswith(type_.rstrip(".") + "."):
        return False
    if not type_ and isinstance(envelope.data, CasNode):
        return False
    return not subject or envelope.subject == subject or envelope.subject.startswith(
        subject.rstrip("/") + "/"
    )


def tail(
    store: Store,
    count: int | None = None,
    type_: str | None = None,
    subject: str | None = None,
    since: int | None = None,
) -> list[bytes]:
    """The last `count` matching lines; by default 10, or all after `since`.

    Read from the log's end, so `-n N` costs what it prints (and what it skips).
    """
    if count is None and since is None:
        count = 10
    if count == 0:
        return []
    decode = store.journal.catalog.decode
    found: list[bytes] = []
    for line in store.log.read_reverse():
        envelope = decode(line.raw)
        if since is not None and envelope.seq <= since:
            break
        if _matches(envelope, type_, subject):
            found.append(line.raw)
            if count is not None and len(found) >= count:
                break
    found.reverse()
    return found


def follow(
    store: Store, type_: str | None, subject: str | None, after: int, poll: float = 0.2
) -> Iterator[bytes]:
    """New matching lines as they are appended (until interrupted): the log says when
    there are (`EventLog.wait`: LISTEN/NOTIFY on PostgreSQL), looked at every `poll`
    seconds at most."""
    decode = store.journal.catalog.decode
    seq = after
    while True:
        for line in store.log.read(seq):
            envelope = decode(line.raw)
            seq = max(seq, line.seq)
            if _matches(envelope, type_, subject):
                yield line.raw
        store.log.wait(seq, poll)


@dataclass
class _Verifier:
    store: Store
    problems: list[LineProblem] = field(default_factory=list)
    events: int = 0
    seq: int = 0
    prev_digest: str = GENESIS_PREV
    prev_line: tuple[str, int] | None = None
    open_batch: tuple[int, int] | None = None
    digests: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    # Per-subject order: each feature's check (its transition table over the log so
    # far), by the event types it reads; made from the store's features.
    checks: dict[str, list[Check]] = field(default_factory=dict)
    # Whether the store holds a CAS node an event refers to (None: ask its CAS).
    has: Callable[[str], bool] | None = None
    # Keep every line's digest in `digests` (False: the last line's only).
    every: bool = True

    def problem(self, seq: int | None, segment: str, line: int, text: str) -> None:
        self.problems.append(LineProblem(seq=seq, segment=segment, line=line, problem=text))

    def check_line(self, line: LogLine) -> Envelope | None:
        """Check one line, the next in the log's order; its envelope (None: it does not
        decode)."""
        segment, number = line.where, line.number
        try:
            envelope = self.store.journal.catalog.decode(line.raw)
        except Corrupt as exc:
            self.problem(self.seq + 1, segment, number, exc.what)
            # Keep the chain going from this line so one bad line is one problem.
            self.seq += 1
            self.prev_digest = digest(line.raw)
            self.prev_line = (segment, number)
            return None
        self.events += 1
        seq = envelope.seq
        if seq != self.seq + 1:
            self.problem(seq, segment, number, f"seq {seq} where {self.seq + 1} was expected")
        if envelope.prev != self.prev_digest:
            self.problem(seq, segment, number, "prev does not match the digest of the line before")
            if self.prev_line is not None:
                psegment, pnumber = self.prev_line
                self.problem(self.seq, psegment, pnumber,
                             f"this line's digest is not the prev of seq {seq}: one was altered")
        if not _ULID.fullmatch(envelope.id):
            self.problem(seq, segment, number, f"id {envelope.id!r} is not a ULID")
        if not _TS.fullmatch(envelope.ts):
            self.problem(seq, segment, number, f"ts {envelope.ts!r} is not RFC 3339 with ms")
        self._check_batch(envelope, segment, number)
        self._check_order(envelope, segment, number)
        if isinstance(envelope.data, CasNode):
            node = envelope.data
            problem = record_problem(node.hash, bytes(node.node))
            if problem is None and envelope.subject != f"cas/{node.hash}":
                problem = f"node record {node.hash} has the subject {envelope.subject!r}"
            if problem is not None:
                self.problem(seq, segment, number, problem)
        has = self.store.cas.has if self.has is None else self.has
        for ref in envelope.data.cas_refs():
            if not is_hash(ref) or not has(ref):
                self.problem(seq, segment, number, f"refers to CAS node {ref} which is missing")
        self.seq = seq
        self.prev_digest = digest(line.raw)
        self.prev_line = (segment, number)
        if not self.every:
            self.digests.clear()
        self.digests[seq] = (self.prev_digest, segment, number)
        return envelope

    def _check_batch(self, envelope: Envelope, segment: str, number: int) -> None:
        k, n = envelope.batch
        if not 1 <= k <= n:
            self.problem(envelope.seq, segment, number, f"batch [{k}, {n}] is malformed")
            return
        if self.open_batch is None:
            if k != 1:
                self.problem(envelope.seq, segment, number, f"batch starts at [{k}, {n}]")
        elif (k, n) != (self.open_batch[0] + 1, self.open_batch[1]):
            self.problem(envelope.seq, segment, number,
                         f"batch [{k}, {n}] follows an incomplete batch of {self.open_batch[1]}")
        self.open_batch = None if k == n else (k, n)

    def _check_order(self, envelope: Envelope, segment: str, number: int) -> None:
        first = envelope.seq == 1
        if first != isinstance(envelope.data, StoreCreated):
            text = ("the first event must be store.created" if first
                    else "store.created may only be the first event")
            self.problem(envelope.seq, segment, number, text)
        if isinstance(envelope.data, StoreCreated) and envelope.data.format > FORMAT_VERSION:
            self.problem(envelope.seq, segment, number,
                         f"store format {envelope.data.format} is newer than {FORMAT_VERSION}")
        for check in self.checks.get(envelope.type, ()):
            problem = check(envelope)
            if problem:
                self.problem(envelope.seq, segment, number, problem)


def _head_seq(log: EventLog) -> int:
    """The head's seq, for progress only: 0 (unknown) when the log's end is damaged."""
    try:
        return log.head().seq
    except (UwfError, ValueError):
        return 0


class Audit:
    """`log verify` fed the lines one at a time, in the log's order (`line`), then asked
    for its findings (`result`): what `verify` runs over a store's log, and what a
    store's copy runs over the lines it writes as it writes them (uwf/storecopy/). `has`:
    whether the store holds a CAS node an event refers to (None: ask its CAS).
    `last_only`: keep the last line's digest alone, not every line's (memory flat in the
    log's length), for a caller that gives no anchors and whose views' checkpoints are
    all at the last line (a store's copy, whose fold made them so); any other
    checkpoint is then reported as a line the log no longer has."""

    def __init__(self, store: Store, has: Callable[[str], bool] | None = None, *,
                 last_only: bool = False) -> None:
        self.store = store
        self.checker = _Verifier(store, checks=checks_of(store.features), has=has,
                                 every=not last_only)
        self.last_where = ""
        self.places: set[str] = set()  # the segments (a folder's files; a table: one) read

    def line(self, line: LogLine) -> Envelope | None:
        """Check the next line; its envelope (None: it does not decode)."""
        if line.where != self.last_where:
            self.places.add(line.where)
            self.last_where = line.where
        return self.checker.check_line(line)

    def result(self, anchors: Sequence[tuple[str, Anchor]] = ()) -> LogVerified:
        """The findings, once every line is checked: with what the backend finds wrong
        with the stored form (torn tail, misnamed segment), a last batch left open, the
        views' checkpoints against the lines, and the anchors (as `verify` says)."""
        store, checker, places = self.store, self.checker, self.places
        for problem in store.log.problems():
            places.add(problem.where)
            checker.problem(problem.seq, problem.where, problem.number, problem.problem)
        if checker.open_batch is not None:
            k, n = checker.open_batch
            checker.problem(checker.seq, self.last_where, 0, f"the last batch has {k} of {n} lines")
        _check_anchor(store.views, checker)
        held: list[AnchorHeld] | UnsetType = UNSET
        contradicts: str | UnsetType | None = UNSET
        if anchors:
            from uwf.audit.anchor import check_all

            wanted = {1, *(anchor.seq for _, anchor in anchors)}  # not a copy of every seq's
            digests = {seq: checker.digests[seq][0] for seq in wanted if seq in checker.digests}
            checks = check_all(list(anchors), digests, checker.seq)
            for item in checks:
                if item.problem is not None:
                    checker.problem(item.anchor.seq, "", 0, f"anchor {item.path}: {item.problem}")
            held = [AnchorHeld(file=item.path, seq=item.anchor.seq, ts=item.anchor.ts,
                               ok=item.problem is None, problem=item.problem) for item in checks]
            contradicts = next((item.path for item in checks if item.problem), None)
        return LogVerified(ok=not checker.problems, events=checker.events,
                           segments=len(places), problems=checker.problems,
                           anchors=held, contradicts=contradicts)


def verify(store: Store, anchors: Sequence[tuple[str, Anchor]] = (),
           progress: Progress | None = None) -> LogVerified:
    """Check every line: JSON, seq, chain, batches, types, data, order, CAS refs; and
    what the backend finds wrong with the stored form (torn tail, misnamed segment);
    and that the log still holds each anchored line (anchors whose signatures the
    caller verified: `uwf.audit.anchor.load`). `progress` is told the lines read of the
    head's seq (0 when a damaged log has none) every PROGRESS_EVERY lines and at the end."""
    audit = Audit(store)
    total = _head_seq(store.log) if progress is not None else 0
    read = 0
    for read, line in enumerate(store.log.read(), 1):
        audit.line(line)
        if progress is not None and read % PROGRESS_EVERY == 0:
            progress(read, max(total, read))
    if progress is not None:
        progress(read, read)
    return audit.result(anchors)


def _check_anchor(views: ViewStore, checker: _Verifier) -> None:
    """Each view's checkpoint remembers the digest of the last line it folded: the
    only witness for the last line, which no later `prev` covers."""
    try:
        checkpoints = views.checkpoints()
    except Corrupt:
        return
    for checkpoint in sorted(set(checkpoints.values())):
        if checkpoint.seq == 0:
            continue
        seen = checker.digests.get(checkpoint.seq)
        if seen is None:
            checker.problem(checkpoint.seq, "", 0,
                            "the views folded this seq but the log no longer has it")
        elif seen[0] != checkpoint.digest:
            checker.problem(checkpoint.seq, seen[1], seen[2],
                            "line differs from the one the views folded: it was altered")
