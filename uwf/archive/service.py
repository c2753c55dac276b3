"""`uwf archive sync`: the per-run archive of the archive seed, kept up to date from the log.

The archive is an outside consumer of the log, not a view: it reads the log from
its own checkpoint and appends what is new (docs/archive.md).

The folder's files are described in `uwf.archive.layout`.

What a sync knows of a run it re-reads from that run's own transitions.jsonl (a
fold over its lines, `uwf.archive.lines`), so the checkpoint is three values
and a run's lines are the only record of what was archived. Durability order,
each step durable before the next: graph.json, then the run's new lines in one
append, then summary.json, then index.json, then the checkpoint. A crash anywhere
leaves the checkpoint behind: the next sync reads those events again, skips each
run's lines it already has (their `seq` says so) and writes what is missing.

A file is appended to only while it still holds what the last sync left in it: the
checkpoint's bytes, line count and digest of each open run's transitions.jsonl are
checked against the file's start before anything is added (more lines after them
are a crashed sync's, and are folded as above), so a file cut at a line boundary
or edited is refused, naming it, instead of growing on top of the damage.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from uwf.archive.folder import Folder, check_root
from uwf.archive.layout import (
    CHECKPOINT,
    FORMAT,
    GRAPH,
    INDEX,
    LOCK,
    RUNS,
    SUMMARY,
    TRANSITIONS,
    ArchiveCheckpoint,
    document,
    file_digest,
    fold_lines,
    graph_document,
    index_document,
    read_checkpoint,
    read_lines,
)
from uwf.archive.lines import (
    MAPPED_TYPES,
    Line,
    RunEnd,
    RunFold,
    RunStart,
    check_run_id,
    encode,
    fold,
    lines_for,
    summary,
)
from uwf.archive.results import Synced
from uwf.config.settings import DEFAULT_LOCK_TIMEOUT_S
from uwf.engine.events import GENESIS_PREV, Envelope, digest
from uwf.engine.fold import PROGRESS_EVERY, Progress
from uwf.engine.journal import Journal
from uwf.engine.log import Checkpoint
from uwf.errors import Corrupt, NotFound
from uwf.store import Store
from uwf.threads.service import get_thread

# A first sync of a long log appends in rounds of about this many lines, so memory
# stays bounded; the checkpoint moves only at the end.
FLUSH_LINES = 10_000
DEFAULT_POLL = 0.2  # seconds between syncs of --follow, as `log tail --follow`


def start_of_run(journal: Journal, run_id: str) -> int:
    """The seq of the run's `thread.started`: its stream read newest first through the
    stream index (so it costs the run's events, not the log since it started)."""
    for envelope in journal.read_subject(f"thread/{run_id}", reverse=True):
        if envelope.type == "thread.started":
            return envelope.seq
    raise NotFound(f"no run {run_id} in the log", "list runs with `uwf run list`")


@dataclass
class _Run:
    """One run's archive as a sync sees it: what its file holds, and what is pending."""

    run_id: str
    size: int = 0  # bytes of transitions.jsonl as read
    inode: tuple[int, int] | None = None  # (device, inode) of transitions.jsonl as read
    state: RunFold | None = None  # folded from the file and the pending lines
    last_event_id: str | None = None  # of the file's last line: a swapped log shows here
    graph: bool = False
    summary: bool = False
    pending: list[Line] = field(default_factory=list)
    lines: int = 0  # lines of transitions.jsonl, as read and appended
    # SHA-256 of transitions.jsonl's bytes, as read and appended (None: no file yet).
    hasher: Any = None


@dataclass
class _Tally:
    appended: int = 0
    graphs: int = 0
    summaries: int = 0
    touched: set[str] = field(default_factory=set)
    # A run whose end this sync read, its summary.json written by an earlier sync that
    # stopped before index.json: the index is rebuilt all the same.
    ended_before: bool = False


class Archive:
    """One archive folder and the runs a sync has read (kept between the syncs of
    `follow`, re-read whenever a run's file is not the size it was)."""

    def __init__(self, store: Store, directory: str | Path, *, create: bool = True,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S) -> None:
        """`directory` as the command resolved it (`commands.folder`); `lock_timeout`
        the command's wait for the archive's lock."""
        self.store = store
        self.path = check_root(directory, create=create, where=Path)
        self.lock_timeout = lock_timeout
        self._runs: dict[str, _Run] = {}
        self._root: Folder | None = None
        # What the checkpoint recorded of the open runs' transitions.jsonl: its inode,
        # and its bytes, lines and digest.
        self._inodes: dict[str, tuple[int, int]] = {}
        self._files: dict[str, tuple[int, int, str]] = {}
        self._synced = 0  # the checkpoint's seq: the log a finished sync archived

    def close(self) -> None:
        if self._root is not None:
            self._root.close()
            self._root = None

    @property
    def root(self) -> Folder:
        if self._root is None:
            self._root = Folder.root(self.path, self.store.log.durable, create=True)
        return self._root

    def sync(self, run: str | None = None, progress: Progress | None = None) -> Synced:
        """Append what the log has beyond the archive. Without `run`, every run from the
        checkpoint on, and the checkpoint moves; with `run`, that run only, from its own
        last line (the checkpoint stays). `progress` is told the events read of those
        after the start (every PROGRESS_EVERY and at the end)."""
        if run is not None:
            check_run_id(run)
            get_thread(self.store.read(), run)  # a bad id or an unknown run: nothing written
        with self.root.lock(LOCK, self.lock_timeout):
            runs = self.root.folder(RUNS, create=True)
            assert runs is not None
            try:
                return self._sync(runs, run, progress)
            finally:
                runs.close()

    def _sync(self, runs: Folder, only: str | None, progress: Progress | None) -> Synced:
        checkpoint = self._checkpoint()
        self._inodes = dict(checkpoint.inodes) if checkpoint is not None else {}
        self._files = dict(checkpoint.files) if checkpoint is not None else {}
        self._synced = checkpoint.seq if checkpoint is not None else 0
        if only is None:
            start = Checkpoint(checkpoint.seq, checkpoint.digest) if checkpoint else Checkpoint(
                0, GENESIS_PREV)
        else:
            known = self._run(runs, only)
            if known.state is None:
                start = self._at(start_of_run(self.store.journal, only) - 1)
            else:
                start = self._at(known.state.last_seq)
                event = self.store.journal.catalog.decode(self.store.log.line(start.seq)
                                                          or b"")
                if event.id != known.last_event_id:
                    raise Corrupt(f"{RUNS}/{only}/{TRANSITIONS} was synced from another log "
                                  f"(its seq {start.seq} is event {known.last_event_id}, "
                                  f"the log's is {event.id})", "sync into a new folder")
        self._check_log(start, checkpoint if only is None else None)
        tally = _Tally()
        touched: dict[str, _Run] = {}
        head = start
        total = self.store.log.head().seq - start.seq if progress is not None else 0
        told = start.seq
        for batch, end in self._batches(start):
            head = end
            if progress is not None and end.seq - told >= PROGRESS_EVERY:
                told = end.seq
                progress(told - start.seq, max(total, told - start.seq))
            for event in batch:
                run_id = event.subject.removeprefix("thread/")
                if event.type not in MAPPED_TYPES or (only is not None and run_id != only):
                    continue
                self._fold_event(runs, touched, event, run_id)
            if sum(len(item.pending) for item in touched.values()) >= FLUSH_LINES:
                self._flush(runs, touched, tally)
        self._flush(runs, touched, tally)
        if progress is not None:
            progress(head.seq - start.seq, head.seq - start.seq)
        if tally.summaries or tally.ended_before or self.root.kind(INDEX) is None:
            self.root.replace(INDEX, index_document(self._summaries(runs)))
        inodes, files = self._open_inodes(), self._open_files()
        if only is None and (checkpoint is None or head.seq != checkpoint.seq
                             or inodes != checkpoint.inodes or files != checkpoint.files):
            saved = ArchiveCheckpoint(FORMAT, head.seq, head.digest, inodes, files)
            self.root.replace(CHECKPOINT, msgspec.json.encode(saved) + b"\n")
        return Synced(archive=str(self.path), run=only, from_seq=start.seq, seq=head.seq,
                      appended=tally.appended, runs=len(tally.touched), started=tally.graphs,
                      ended=tally.summaries)

    def _fold_event(self, runs: Folder, touched: dict[str, _Run], event: Envelope,
                    run_id: str) -> None:
        record = touched.get(run_id) or self._run(runs, run_id)
        touched[run_id] = record  # an ended run without its summary gets it at the flush
        state = record.state
        if state is not None and event.seq <= state.last_seq:
            # Archived already (a sync stopped before its checkpoint moved), by the very
            # log line, unless the log was swapped underneath.
            if event.seq == state.last_seq and event.id != record.last_event_id:
                raise Corrupt(f"{RUNS}/{run_id}/{TRANSITIONS} was synced from another log "
                              f"(its seq {event.seq} is event {record.last_event_id}, the "
                              f"log's is {event.id})", "sync into a new folder")
            return
        new = lines_for(state, event)
        if state is None and not new:
            raise Corrupt(f"the archive has no run_start for run {run_id} (its "
                          f"{event.type} is seq {event.seq}): runs/{run_id} is missing, or "
                          "the log has the event before the thread started",
                          "run `uwf archive verify DIR` and `uwf log verify`")
        for line in new:
            state = fold(state, line)
        record.state = state
        record.pending.extend(new)

    def _flush(self, runs: Folder, touched: dict[str, _Run], tally: _Tally) -> None:
        """Write the pending lines of each run: graph.json before its run_start,
        summary.json after its run_end. The log's lines they come from are made durable
        first (a writer fsyncs after letting its lock go: an archive never keeps an
        event a crash takes out of the log)."""
        if any(record.pending for record in touched.values()):
            self.store.log.sync()
        for run_id, record in touched.items():
            ended = record.state is not None and record.state.ended
            if not record.pending and (record.summary or not ended):
                # Ended and summed up already, by a sync that stopped after the summary,
                # perhaps before index.json: this sync reads those events again.
                tally.ended_before |= ended
                continue
            folder = runs.folder(run_id, create=True)
            assert folder is not None
            try:
                start = next((line for line in record.pending if isinstance(line, RunStart)),
                             None)
                if start is not None and not record.graph:
                    folder.write_once(GRAPH, document(graph_document(self.store.cas, start)))
                    record.graph = True
                    tally.graphs += 1
                if record.pending:
                    data = b"".join(encode(line) for line in record.pending)
                    record.size, record.inode = folder.append(
                        TRANSITIONS, data, record.size,
                        record.inode if record.size else None)
                    if record.hasher is None:
                        record.hasher = hashlib.sha256()
                    record.hasher.update(data)
                    record.lines += len(record.pending)
                    record.last_event_id = record.pending[-1].event_id
                    tally.appended += len(record.pending)
                    tally.touched.add(run_id)
                    record.pending = []
                if record.state is not None and record.state.ended and not record.summary:
                    if folder.write_once(SUMMARY, document(summary(record.state))):
                        tally.summaries += 1
                    record.summary = True
            finally:
                folder.close()
        touched.clear()

    # -- reading the archive and the log -------------------------------------------------

    def _checkpoint(self) -> ArchiveCheckpoint | None:
        raw = self.root.read(CHECKPOINT)
        return None if raw is None else read_checkpoint(raw)

    def _run(self, runs: Folder, run_id: str) -> _Run:
        """The run as its folder has it, from the cache when its file is the same file
        and the same size. A file with more than one link, or not the one the checkpoint
        recorded, is refused (Corrupt): the sync will not append to it."""
        check_run_id(run_id)
        where = f"{RUNS}/{run_id}/{TRANSITIONS}"
        folder = runs.folder(run_id, create=False)
        if folder is None:
            self._runs[run_id] = record = _Run(run_id)
            return record
        try:
            cached = self._runs.get(run_id)
            info = folder.stat(TRANSITIONS)
            inode = None if info is None else (info.st_dev, info.st_ino)
            if info is not None:
                folder.check_own(TRANSITIONS, info, self._inodes.get(run_id))
            if (cached is not None and cached.size == (info.st_size if info else 0)
                    and cached.inode == inode and not cached.pending):
                return cached
            raw = folder.read(TRANSITIONS) or b""
            self._check_as_left(run_id, raw, where)
            raw = self._cut_partial(folder, run_id, raw, where, inode)
            lines = read_lines(raw, where)
            record = _Run(run_id, len(raw), inode, fold_lines(lines, run_id, where),
                          lines[-1].event_id if lines else None,
                          folder.kind(GRAPH) is not None, folder.kind(SUMMARY) is not None,
                          lines=len(lines),
                          hasher=hashlib.sha256(raw) if info is not None else None)
        finally:
            folder.close()
        self._runs[run_id] = record
        return record

    def _cut_partial(self, folder: Folder, run_id: str, raw: bytes, where: str,
                     inode: tuple[int, int] | None) -> bytes:
        """`raw` without a partial last line, which is cut from the file too, when an
        append stopped part way left it (the kernel may end a write killed part way at
        a page boundary): past what the checkpoint records of this open run's file
        (`_check_as_left` checked that first), or in a file with no whole line, or whose
        lines are all of the log after the checkpoint (a run a stopped sync began). Its
        events are read again from the log, as a crashed sync's are. A partial line
        after `run_end` (no sync appends there), or in a file a finished sync left, is
        refused (Corrupt), never cut."""
        if not raw or raw.endswith(b"\n"):
            return raw
        whole = raw.rfind(b"\n") + 1
        lines = read_lines(raw[:whole], where)
        unfinished = run_id in self._files or not lines or lines[0].seq > self._synced
        if not unfinished or (lines and isinstance(lines[-1], RunEnd)):
            read_lines(raw, where)  # Corrupt: it ends in a partial line
        folder.cut(TRANSITIONS, whole, len(raw), inode)
        return raw[:whole]

    def _check_as_left(self, run_id: str, raw: bytes, where: str) -> None:
        """The file must start with what the last sync left in it (bytes, lines and
        digest as the checkpoint has them); more lines after are a crashed sync's."""
        recorded = self._files.get(run_id)
        if recorded is None:
            return
        size, count, want = recorded
        kept = raw[:size]
        if len(raw) < size or kept.count(b"\n") != count or file_digest(kept) != want:
            what = ("was cut short" if len(raw) < size else "was edited")
            has = raw.count(b"\n")
            raise Corrupt(f"{where} {what} since the last sync (it left {count} lines, "
                          f"{size} bytes there; the file has {has} lines, "
                          f"{len(raw)} bytes): nothing appended",
                          "restore the file from a backup, or sync into a new folder; "
                          "`uwf archive verify DIR` names the damage")

    def _open_files(self) -> dict[str, tuple[int, int, str]]:
        """What the next checkpoint records of each open run's transitions.jsonl: its
        bytes, lines and digest as this sync left it (or as the last one did)."""
        files = dict(self._files)
        for run_id, record in self._runs.items():
            if record.state is not None and record.state.ended:
                files.pop(run_id, None)
            elif record.hasher is not None:
                files[run_id] = (record.size, record.lines,
                                 record.hasher.hexdigest()[:32])
        return dict(sorted(files.items()))

    def _open_inodes(self) -> dict[str, tuple[int, int]]:
        """The inodes the next checkpoint records: those it had, updated by what this
        sync read and wrote, for the runs that have not ended."""
        inodes = dict(self._inodes)
        for run_id, record in self._runs.items():
            if record.state is not None and record.state.ended:
                inodes.pop(run_id, None)
            elif record.inode is not None:
                inodes[run_id] = record.inode
        return dict(sorted(inodes.items()))

    def _summaries(self, runs: Folder) -> list[dict[str, Any]]:
        rows = []
        for name in runs.names():
            folder = runs.folder(name, create=False)
            if folder is None:
                continue
            try:
                raw = folder.read(SUMMARY)
            finally:
                folder.close()
            if raw is None:
                continue
            try:
                row = json.loads(raw)
            except ValueError:
                row = None
            if not isinstance(row, dict):
                raise Corrupt(f"{RUNS}/{name}/{SUMMARY} is not a JSON object",
                              "run `uwf archive verify DIR`")
            rows.append(row)
        return rows

    def _at(self, seq: int) -> Checkpoint:
        if seq == 0:
            return Checkpoint(0, GENESIS_PREV)
        raw = self.store.log.line(seq)
        if raw is None:
            raise Corrupt(f"the archive has synced seq {seq}, but the log ends before it",
                          "sync into a new folder")
        return Checkpoint(seq, digest(raw))

    def _check_log(self, start: Checkpoint, checkpoint: ArchiveCheckpoint | None) -> None:
        """The checkpoint's line must still be in the log, byte for byte."""
        if checkpoint is None or checkpoint.seq == 0:
            return
        raw = self.store.log.line(checkpoint.seq)
        if raw is None or digest(raw) != checkpoint.digest:
            found = "absent" if raw is None else f"digest {digest(raw)}"
            raise Corrupt(f"the archive does not match the log at seq {checkpoint.seq} (the "
                          f"archive synced digest {checkpoint.digest}; the log has {found})",
                          "sync into a new folder; run `uwf archive verify DIR`")

    def _batches(self, start: Checkpoint) -> Iterator[tuple[list[Envelope], Checkpoint]]:
        """Complete batches after `start` (a batch still being written waits for the
        next sync), with seq and chain checked; each with the checkpoint at its end."""
        decode_event = self.store.journal.catalog.decode
        seq, prev = start
        pending: list[Envelope] = []
        for line in self.store.log.read(start.seq):
            event = decode_event(line.raw)
            if event.seq != seq + 1 or event.prev != prev:
                raise Corrupt(f"the log's chain is broken at seq {event.seq}",
                              "run `uwf log verify`")
            seq, prev = event.seq, digest(line.raw)
            pending.append(event)
            if event.batch[0] == event.batch[1]:
                yield pending, Checkpoint(seq, prev)
                pending = []


def sync(store: Store, directory: str | Path, run: str | None = None,
         progress: Progress | None = None, *,
         lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S) -> Synced:
    """Bring the archive at `directory` up to date with the log (one run with `run`);
    `progress` is told the events read of those to read."""
    if run is not None:
        check_run_id(run)
    archive = Archive(store, directory, lock_timeout=lock_timeout)
    try:
        return archive.sync(run, progress)
    finally:
        archive.close()


def follow(store: Store, directory: str | Path, run: str | None,
           stopped: Callable[[], bool], poll: float = DEFAULT_POLL, *,
           progress: Progress | None = None,
           lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S) -> Iterator[Synced]:
    """Sync, then sync again every `poll` seconds until `stopped()`: the first result,
    then each one that appended something; `progress` is told the first sync's (the
    catch-up's) events read."""
    archive = Archive(store, directory, lock_timeout=lock_timeout)
    try:
        yield archive.sync(run, progress)
        while not stopped():
            deadline = time.monotonic() + poll
            while not stopped() and time.monotonic() < deadline:
                time.sleep(min(0.05, poll))
            if stopped():
                return
            result = archive.sync(run)
            if result.appended or result.ended:
                yield result
    finally:
        archive.close()

