"""`uwf store copy SRC DST`: a whole store into an empty one, a folder or a PostgreSQL
database either side (docs/hosts.md#copying-a-store).

What is copied, in this order:
1. the source is read to its head once, each line's seq, chain and batch checked (a
   broken source is refused and nothing is left written), gathering the nodes its
   events reach as `json-cas gc` counts them (`Cas.kept`: named by an event, or
   reachable from one through references and types: StepNode prev chains, schemas;
   the nodes named, into a folder by `uwf.jsoncas.service.reached`, into PostgreSQL
   as the pass of 3. asks after each); an unfinished last batch (a torn tail no writer
   has cut yet) is left out, as the next writer would cut it;
2. in the destination's one writer's section: the CAS's hash-rule record, every node's
   raw bytes (so its hash stays its name), and the log's lines, their exact bytes, in
   appends that end where a batch ends and where the source's segment would (a folder
   copied to PostgreSQL and back has byte-identical segments). Into a folder, after the
   scan, the nodes before the lines that name them. Into PostgreSQL, where the section
   is one transaction (an interrupted or refused copy leaves nothing), the lines go as
   the scan checks them, whole batches at a time, so the source is read once, then the
   nodes;
3. as each line is appended, in the same pass (uwf/storecopy/onepass.py): checked as
   `log verify` checks it and folded into the destination's new views (no line is
   read back, the views are not replayed again);
4. the copy, verified: its head is the source's, every node is there, what `log
   verify` checks of the stored form holds, and what `registry verify` checks holds
   of the views against the rows the one fold wrote; a copy that does not verify is
   an error naming what differs (into PostgreSQL, inside its one transaction: nothing
   is left).

Progress (`Store.progress`): the events copied of the total (each checked and folded
as it is written), then the views' rows compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import msgspec

from uwf.cas.backends import Blobs
from uwf.cas.records import LoggedBlobs
from uwf.engine.events import CasNode
from uwf.engine.log import GENESIS, Checkpoint, LogLine, LogSession, digest
from uwf.errors import Corrupt, NotFound, Rejected
from uwf.store import Store
from uwf.storecopy.onepass import OnePass
from uwf.storecopy.results import Copied

if TYPE_CHECKING:
    from uwf.cas.store import Cas
    from uwf.config.settings import Settings
    from uwf.engine.feature import Feature
    from uwf.engine.fold import Progress

# The bytes of lines gathered before an append (at the end of a batch): few appends,
# each one write (and one fsync), in bounded memory.
CHUNK_BYTES = 4 << 20
SHOWN = 5  # problems named in the error of a copy that does not verify


class _Line(msgspec.Struct):
    """What the copy reads of a line: where it stands in the log and in its batch, and
    its type and data (left undecoded)."""

    seq: int
    prev: str
    batch: tuple[int, int]
    type: str = ""
    data: msgspec.Raw = msgspec.Raw(b"null")


class _Recorded(msgspec.Struct):
    hash: str


_decode_recorded = msgspec.json.Decoder(_Recorded).decode


_decode_line = msgspec.json.Decoder(_Line).decode


def _position(line: LogLine, where: str) -> _Line:
    try:
        return _decode_line(line.raw)
    except msgspec.DecodeError:
        raise Corrupt(f"{where}: line {line.number} of {line.where} is not an event",
                      "run `uwf log verify` on it; nothing was copied") from None


def copy_between(src_at: str, dst_at: str, settings: Settings,
                 progress: Progress | None = None,
                 features: Sequence[Feature] | None = None) -> Copied:
    """Open the store `src_at` (which must exist) and `dst_at` (a folder is made when
    written to) as `--store` names them, with `settings`' environment and `features`
    (None: uwf's), and copy."""
    src = open_store(src_at, settings, source=True, features=features)
    try:
        dst = open_store(dst_at, settings, source=False, features=src.features)
        try:
            dst.progress = progress
            return copy(src, dst)
        finally:
            dst.close()
    finally:
        src.close()


def open_store(given: str, settings: Settings, *, source: bool,
               features: Sequence[Feature] | None = None) -> Store:
    """The store `given` names (a folder or a postgresql:// URL), opened with `settings`'
    environment and `features`; a source folder that does not exist is refused, never
    made."""
    from uwf.config.settings import Settings

    named = Settings.from_env(settings.environ, settings.cwd, store=given, now=settings.now)
    if source and named.store_url is None and not named.store_root.is_dir():
        what = "not a folder" if named.store_root.exists() else "no such folder"
        raise NotFound(f"no store to copy at {named.store_root}: {what}",
                       "give the folder of a store, or its postgresql:// URL")
    return Store.open(settings=named, features=features)


def copy(src: Store, dst: Store) -> Copied:
    """Copy `src` into `dst`, which must hold no events, and verify the copy; progress
    (events copied of the total, then the views' rows compared) goes to `dst.progress`."""
    if src.log.head().seq == 0:
        raise NotFound(f"{src.location} holds no store to copy: its log has no events",
                       "give the folder or postgresql:// URL of a store")
    _refuse_filled(dst, dst.log.head())
    rule = _hash_rule(src, dst)
    scan = _Scan(src)
    src.log.sync()  # the lines up to the head are durable in the source before they are copied
    check = OnePass(src, dst)
    if _one_transaction(dst):
        nodes = _copy_streamed(src, dst, scan, rule, check)
    else:
        nodes = _copy_after_scan(src, dst, scan, rule, check)
        _refuse_unverified(src, dst, check.findings(scan.end, nodes), left=True)
    return Copied(from_=src.location, to=dst.location, events=scan.end.seq, nodes=len(nodes),
                  verified=True)


def _refuse_unverified(src: Store, dst: Store, problems: list[str], *, left: bool) -> None:
    """Refuse a copy with `problems` (`left`: the copy stays, for a look)."""
    if problems:
        more = f" (and {len(problems) - SHOWN} more)" if len(problems) > SHOWN else ""
        raise Corrupt(f"the copy in {dst.location} does not verify: "
                      f"{'; '.join(problems[:SHOWN])}{more}",
                      f"run `uwf log verify` and `uwf registry verify` on {src.location}"
                      + (" and on the copy" if left else ""))


def _one_transaction(dst: Store) -> bool:
    """Whether the destination's writer's section is one transaction (PostgreSQL): then
    whatever a failed copy wrote goes with it, so the lines go as the scan checks them."""
    from uwf.engine.pglog import PgLog  # psycopg is imported only when a method needs it

    return isinstance(dst.log, PgLog)


def _copy_after_scan(src: Store, dst: Store, scan: _Scan, rule: str | None,
                     check: OnePass) -> list[str]:
    """The source scanned and checked first, then its nodes and its lines written (a
    folder: nodes before the lines that name them), each line checked and folded into
    the new views as it is appended (`check`); the nodes copied."""
    from uwf.jsoncas.service import reached

    nodes = sorted(reached(src, scan.lines()))
    end = scan.end
    if end.seq == 0:
        raise NotFound(f"{src.location} holds no whole batch of events to copy",
                       "run `uwf log verify` on it")
    with dst.log.exclusive() as session:
        _refuse_filled(dst, session.tail())  # a writer may have come first
        _write_nodes(src, dst, nodes, scan, rule)
        check.fold(_appending(src, session, end, dst))
    return nodes


def _copy_streamed(src: Store, dst: Store, scan: _Scan, rule: str | None,
                   check: OnePass) -> list[str]:
    """One read of the source, in the destination's one transaction: each whole batch
    the scan has checked is appended as it is read (a source that does not check rolls
    all of it back), each line checked and folded into the new views as it goes
    (`check`), then the nodes the lines reach, then the copy's findings (a copy that
    does not verify is rolled back too); the nodes copied."""
    with dst.log.exclusive() as session:
        _refuse_filled(dst, session.tail())  # a writer may have come first
        appender = _Appender(session, dst, scan)
        check.fold(appender.through(scan.lines()))
        if scan.end.seq == 0:
            raise NotFound(f"{src.location} holds no whole batch of events to copy",
                           "run `uwf log verify` on it")
        appender.finish()
        nodes = sorted(src.cas.kept(check.named))
        _write_nodes(src, dst, nodes, scan, rule)
        _refuse_unverified(src, dst, check.findings(scan.end, nodes), left=False)
    return nodes


def _write_nodes(src: Store, dst: Store, nodes: list[str], scan: _Scan,
                 rule: str | None) -> None:
    """The hash-rule record and the nodes, inside the destination's writer's section."""
    if rule is not None and dst.cas.blobs.hash_rule() is None:
        dst.cas.blobs.record_hash_rule(rule)
    loose = _loose(dst.cas)
    # A node record (a step's node) is copied with the log's lines, the others as
    # loose nodes: those are the records the scan met (asked of the source one by
    # one, a node without a record looked through its log's tail each time, and a
    # source without views folded them all first).
    files = [hash_ for hash_ in nodes if hash_ not in scan.recorded]
    write_many = getattr(loose, "write_many", None)  # PostgreSQL's: few statements
    if write_many is not None:
        write_many(_nodes(src, files))
    else:
        for hash_, data in _nodes(src, files):
            loose.write(hash_, data)


def _loose(cas: Cas) -> Blobs:
    """Where a store keeps its loose nodes: the backend under the log's records (a
    folder's files, PostgreSQL's table, with its bulk calls)."""
    blobs = cas.blobs
    return blobs.loose if isinstance(blobs, LoggedBlobs) else blobs


def _nodes(src: Store, nodes: list[str]) -> Iterator[tuple[str, bytes]]:
    """Each node's hash and raw bytes, read from `src`."""
    for hash_ in nodes:
        data = src.cas.blobs.read(hash_)
        if data is None:  # found a moment ago: removed since (`json-cas gc`)
            raise Corrupt(f"node {hash_} left {src.location} while it was copied",
                          "copy again into a new store")
        yield hash_, data


def _refuse_filled(dst: Store, head: Checkpoint | None) -> None:
    """Refuse a destination that holds events (None: lines no writer has looked at)."""
    if head == GENESIS:
        return
    what = (f"{head.seq} event{'' if head.seq == 1 else 's'}" if head is not None
            else "lines not yet recovered")
    raise Rejected(f"{dst.location} already holds a store ({what}): a store is copied "
                   "into an empty one only, and nothing was written",
                   "give a new folder, or the URL of an empty database")


def _hash_rule(src: Store, dst: Store) -> str | None:
    """The source's hash-rule record, refused when the destination names its nodes
    otherwise (its own record, or nodes and none: a store of uwf's old rule)."""
    rule = src.cas.blobs.hash_rule()
    theirs = dst.cas.blobs.hash_rule()
    if theirs != rule and (theirs is not None or next(dst.cas.blobs.hashes(), None)):
        raise Rejected(f"{dst.location} names its nodes by the hash rule "
                       f"{theirs or 'of an older uwf'}, {src.location} by "
                       f"{rule or 'that of an older uwf'}: nothing was written",
                       "copy into a new folder, or the URL of an empty database")
    return rule


class _Scan:
    """The source's lines to its head, checked as a copy relies on them (seq, chain,
    whole batches), each batch handed on once it is whole; `end` is the last line of the
    last whole batch once they are read."""

    def __init__(self, src: Store) -> None:
        self.src = src
        self.head = src.log.head()
        self.end = GENESIS
        self.recorded: set[str] = set()  # the nodes of the record lines up to `end`

    def lines(self) -> Iterator[LogLine]:
        where = self.src.location
        seq, prev = GENESIS
        size = 0  # the lines of the batch being read
        batch: list[LogLine] = []
        records: list[str] = []  # the nodes of the batch's record lines
        for line in self.src.log.read():
            if line.seq > self.head.seq:
                break
            at = _position(line, where)
            k, n = at.batch
            whole = k == len(batch) + 1 and 0 < k <= n and (not batch or n == size)
            problem = (f"seq {at.seq} follows {seq}" if at.seq != seq + 1 else
                       "the chain is broken" if at.prev != prev else
                       "" if whole else f"line {k} of a batch of {n} follows line "
                       f"{len(batch)} of a batch of {size}")
            if problem:
                raise Corrupt(f"{where} does not verify at seq {at.seq} ({line.where}): "
                              f"{problem}", "run `uwf log verify` on it; nothing was copied")
            seq, prev, size = at.seq, digest(line.raw), n
            batch.append(line)
            if at.type == CasNode.type:
                records.append(_decode_recorded(at.data).hash)
            if k == n:  # whole: `end` is its last line while its lines are handed on
                self.end = Checkpoint(seq, prev)
                self.recorded.update(records)
                records.clear()
                yield from batch
                batch.clear()


class _Appender:
    """Appends the lines handed on by a scan as they pass: in chunks that end with a
    batch, and wherever a segment of `dst.settings.segment_bytes` is full (as `_append`
    does after a scan)."""

    def __init__(self, session: LogSession, dst: Store, scan: _Scan) -> None:
        self.session = session
        self.progress = dst.progress
        self.limit = dst.settings.segment_bytes
        self.scan = scan
        self.chunk: list[bytes] = []
        self.size = self.segment = self.copied = 0
        self.head = GENESIS

    def through(self, lines: Iterator[LogLine]) -> Iterator[LogLine]:
        for line in lines:
            yield line
            self.chunk.append(line.raw)
            self.size += len(line.raw) + 1
            self.segment += len(line.raw) + 1
            if line.seq == self.scan.end.seq and (self.segment >= self.limit
                                                 or self.size >= CHUNK_BYTES):
                self._flush()

    def _flush(self) -> None:
        self.head = self.session.append(self.chunk)
        self.copied += len(self.chunk)
        self.chunk, self.size = [], 0
        if self.segment >= self.limit:
            self.segment = 0
        if self.progress is not None:
            self.progress(self.copied, max(self.scan.head.seq, self.copied))

    def finish(self) -> None:
        """Append what is left (it ends where the last whole batch does)."""
        if self.chunk:
            self._flush()
        if self.head != self.scan.end:
            raise Corrupt(f"the copy ended at seq {self.head.seq}, its scan at "
                          f"{self.scan.end.seq}", "copy again into a new store")
        if self.progress is not None:
            self.progress(self.copied, self.copied)


def _appending(src: Store, session: LogSession, end: Checkpoint, dst: Store
               ) -> Iterator[LogLine]:
    """`src`'s lines up to `end`, each appended in `session` as it is handed on: in
    chunks that end with a batch, and wherever a segment of `dst.settings.segment_bytes`
    is full (so the destination's file log starts its next segment where the source's
    did)."""
    progress = dst.progress
    limit = dst.settings.segment_bytes
    chunk: list[bytes] = []
    size = segment = copied = 0
    head = GENESIS
    for line in src.log.read():
        if line.seq > end.seq:
            break
        yield line
        chunk.append(line.raw)
        size += len(line.raw) + 1
        segment += len(line.raw) + 1
        k, n = _position(line, src.location).batch
        if k < n or (segment < limit and size < CHUNK_BYTES and line.seq < end.seq):
            continue  # a batch is never split, and a segment ends where the source's did
        head = session.append(chunk)
        copied += len(chunk)
        chunk, size = [], 0
        if segment >= limit:
            segment = 0
        if progress is not None:
            progress(copied, end.seq)
    if head != end:
        raise Corrupt(f"the log of {src.location} changed while it was copied: it ended at "
                      f"seq {head.seq}, not {end.seq}", "copy again into a new store")
