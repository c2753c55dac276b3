"""`uwf archive verify`: an archive checked against the seed's invariants and the live log.

Two kinds of check (docs/archive.md#verify), each problem named by run, file and
what is wrong:

- the archive alone: run_start first, run_end last, lines in log order, every
  `to: running` with its node_attempt (unless the attempt was cut off by the
  run's end or is still running), nothing but the seed's files, no links;
- against the log: each run's lines are exactly what the log's events map to,
  up to the archive's checkpoint (so a truncated or reordered file shows), its
  graph.json is the Workflow node it started on, its summary.json what its lines
  add up to, no run the checkpoint covers is missing, and index.json holds the
  summaries.

It streams: each run folder is read once, line by line, for the checks on the
archive alone, keeping a few values per run (its line count, last seq, digests of
graph.json and summary.json); then the log is read once, and each run's lines are
compared with what its events map to as they come, reading the run's file again
line by line. What is kept per run is its fold (a few dicts of roles) while it
runs in the log and a small record after, never its lines, so memory follows the
number of runs and not the number of events.

It writes nothing, and takes the archive's lock shared, so a sync never runs
halfway under it.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from uwf.archive.folder import Folder, check_root
from uwf.archive.lines import (
    MAPPED_TYPES,
    Line,
    NodeAttempt,
    RunEnd,
    RunFold,
    RunStart,
    Transition,
    decode,
    fold,
    is_run_id,
    lines_for,
    summary,
)
from uwf.archive.service import (
    CHECKPOINT,
    GRAPH,
    INDEX,
    LOCK,
    RUNS,
    SUMMARY,
    TRANSITIONS,
    graph_document,
    read_checkpoint,
)
from uwf.archive.service import document as archive_document
from uwf.engine.events import Envelope, digest
from uwf.errors import Corrupt, NotFound
from uwf.store import Store
from uwf.threads.events import ThreadStarted

_FILES = (TRANSITIONS, GRAPH, SUMMARY)
# Run files held open at once while the log is read (the runs it interleaves); one
# evicted is opened again where it was left.
OPEN_FILES = 128

Problem = tuple[str, str]  # (file, what is wrong)


def _digest(raw: bytes) -> bytes:
    """A short digest of a file's bytes: what is kept of graph.json and summary.json.
    Equal bytes are equal files at once; other bytes are read again and compared as
    JSON values (a file written with other spacing is not a problem)."""
    return hashlib.blake2b(raw, digest_size=16).digest()


def _canonical(value: Any) -> bytes:
    """A digest of a JSON value, the same whatever its key order or spacing."""
    return _digest(json.dumps(value, sort_keys=True, ensure_ascii=False,
                              separators=(",", ":")).encode("utf-8"))


def _row(value: Any) -> bytes:
    """A digest of a summary as index.json holds it (index_document's encoding)."""
    return _digest(json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                   .encode("utf-8"))


def _decoded(raw: bytes) -> Line | None:
    try:
        return decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@dataclass(slots=True)
class _Archived:
    """One run folder: what a first read of it found (small), then what the log's
    pass needs while the run is in the log (its folds, its place in the file)."""

    run_id: str
    transitions: bool = False  # transitions.jsonl was there and readable
    count: int = 0  # its complete lines, archive lines or not
    last_seq: int = 0  # the greatest seq of its archive lines
    graph: bytes | None = None  # digest of graph.json's bytes; None: absent, unreadable
    summary: bytes | None = None  # digest of summary.json's bytes; likewise
    problems: list[Problem] | None = None  # on the file alone, then against the log
    # The log's pass:
    started: bool = False  # its thread.started was read
    done: bool = False  # compared and checked: nothing more to do
    state: RunFold | None = None  # fold of every line the log gives the run
    due_state: RunFold | None = None  # fold of the lines the archive must hold
    due: int = 0  # how many of those so far
    start: RunStart | None = None  # the first of them
    missing: int = 0  # due lines beyond the file's end
    missing_seq: int = 0  # the seq of the last of them
    offset: int = 0  # where the next line of the file starts

    def problem(self, file: str, text: str) -> None:
        if self.problems is None:
            self.problems = []
        self.problems.append((file, text))

    def through(self, covered: int) -> int:
        """What the archive must hold of the run: everything up to its checkpoint, or
        up to its own last line when a `--run` sync took the run further."""
        return max(covered, self.last_seq)


class _Files:
    """The runs' transitions.jsonl files read again, line by line, during the log's
    pass: at most OPEN_FILES open at once (least recently read closed first)."""

    def __init__(self, runs: Folder) -> None:
        self.runs = runs
        self.open: OrderedDict[str, BinaryIO] = OrderedDict()

    def next_line(self, found: _Archived) -> Line | None:
        """The file's next complete line (None when it is not an archive line): the
        caller knows from `found.count` that there is one."""
        handle = self.open.get(found.run_id)
        if handle is None:
            handle = self._reopen(found)
        else:
            self.open.move_to_end(found.run_id)
        raw = handle.readline()
        found.offset += len(raw)
        return _decoded(raw[:-1])

    def close(self, run_id: str) -> None:
        handle = self.open.pop(run_id, None)
        if handle is not None:
            handle.close()

    def close_all(self) -> None:
        for run_id in list(self.open):
            self.close(run_id)

    def _reopen(self, found: _Archived) -> BinaryIO:
        while len(self.open) >= OPEN_FILES:
            self.close(next(iter(self.open)))
        folder = self.runs.folder(found.run_id, create=False)
        if folder is None:
            raise Corrupt(f"{RUNS}/{found.run_id} went away while it was verified",
                          "run `uwf archive verify DIR` again")
        try:
            handle = folder.open_file(TRANSITIONS)
        finally:
            folder.close()
        if handle is None:
            raise Corrupt(f"{RUNS}/{found.run_id}/{TRANSITIONS} went away while it was "
                          "verified", "run `uwf archive verify DIR` again")
        handle.seek(found.offset)
        self.open[found.run_id] = handle
        return handle


class _Verifier:
    def __init__(self, store: Store, path: Path, root: Folder) -> None:
        self.store = store
        self.path = path
        self.root = root
        self.problems: list[dict[str, Any]] = []
        # index.json's rows as the summaries give them: (started, run id, digest of the
        # row, the run folder), in the folders' order.
        self._rows: list[tuple[str, str, bytes, str]] = []
        # graph.json as a sync writes it for a workflow and name: its bytes' digest and
        # the document (or why the workflow node cannot give one).
        self._wanted_graphs: dict[tuple[str, str], tuple[bytes, dict[str, Any]] | str] = {}

    def problem(self, run: str | None, file: str, text: str) -> None:
        self.problems.append({"run": run, "file": file, "problem": text})

    def run(self) -> dict[str, Any]:
        if self.root.kind(RUNS) is None and self.root.kind(CHECKPOINT) is None:
            raise NotFound(f"{self.path} is not an archive (it has neither {RUNS}/ nor "
                           f"{CHECKPOINT})", "create one with `uwf archive sync DIR`")
        head = self.store.log.head()
        covered = self._checkpoint(head.seq)
        runs = self._runs_folder()
        archived: dict[str, _Archived] = {}
        missing: dict[str, int] = {}
        try:
            if runs is not None:
                archived = self._read_runs(runs)
                files = _Files(runs)
                try:
                    missing = self._against_log(archived, covered, files)
                finally:
                    files.close_all()
            else:
                missing = self._against_log(archived, covered, None)
        finally:
            if runs is not None:
                runs.close()
        for run_id in sorted(archived):
            found = archived[run_id]
            for file, text in found.problems or ():
                self.problem(run_id, file, text)
        for run_id, seq in sorted(missing.items()):
            self.problem(run_id, f"{RUNS}/{run_id}", f"missing: the run started at seq "
                         f"{seq}, which the checkpoint ({covered}) covers")
        self._check_index(bool(archived), covered)
        return {"ok": not self.problems, "archive": str(self.path), "seq": covered,
                "logSeq": head.seq, "runs": len(archived), "problems": self.problems}

    # -- the archive alone ----------------------------------------------------------

    def _checkpoint(self, log_seq: int) -> int:
        """The seq the checkpoint vouches for (0 when there is none or it is wrong)."""
        try:
            raw = self.root.read(CHECKPOINT)
            if raw is None:
                return 0
            checkpoint = read_checkpoint(raw)
        except Corrupt as exc:
            self.problem(None, CHECKPOINT, exc.what)
            return 0
        if checkpoint.seq > log_seq:
            self.problem(None, CHECKPOINT, f"the checkpoint is at seq {checkpoint.seq}, past "
                         f"the log's end ({log_seq})")
            return 0
        line = self.store.log.line(checkpoint.seq) if checkpoint.seq else None
        if checkpoint.seq and (line is None or digest(line) != checkpoint.digest):
            self.problem(None, CHECKPOINT, f"the log's line at seq {checkpoint.seq} is not "
                         "the one this archive synced: the log was rewritten, or the archive "
                         "comes from another store")
            return 0
        return checkpoint.seq

    def _runs_folder(self) -> Folder | None:
        try:
            return self.root.folder(RUNS, create=False)
        except Corrupt as exc:
            self.problem(None, RUNS, exc.what)
            return None

    def _read_runs(self, runs: Folder) -> dict[str, _Archived]:
        found: dict[str, _Archived] = {}
        for name in runs.names():
            where = f"{RUNS}/{name}"
            if not is_run_id(name):
                self.problem(None, where, "not a run folder: the name is not a run id")
                continue
            kind = runs.kind(name)
            if kind != "folder":
                self.problem(name, where, "a symbolic link, not a run folder" if kind ==
                             "link" else "not a folder")
                continue
            folder = runs.folder(name, create=False)
            if folder is None:
                continue
            try:
                found[name] = self._read_run(folder, name)
            finally:
                folder.close()
        return found

    def _read_run(self, folder: Folder, run_id: str) -> _Archived:
        where = f"{RUNS}/{run_id}"
        found = _Archived(run_id)
        for child in folder.names():
            if child not in _FILES:
                self.problem(run_id, f"{where}/{child}", "unexpected: the seed's files are "
                             + ", ".join(_FILES))
        try:
            handle = folder.open_file(TRANSITIONS)
        except Corrupt as exc:  # a link, not a file: what it is, and that the file is not
            self.problem(run_id, f"{where}/{TRANSITIONS}", exc.what)
            handle = None
        if handle is None:
            self.problem(run_id, f"{where}/{TRANSITIONS}", "missing")
        if handle is not None:
            with handle:
                found.transitions = True
                info = folder.stat(TRANSITIONS)
                if info is not None and info.st_nlink > 1:
                    self.problem(run_id, f"{where}/{TRANSITIONS}", f"has {info.st_nlink} "
                                 "links (a hard link, perhaps to a file outside the archive): "
                                 "a sync will not append to it; replace it with a copy of its "
                                 "own")
                self._read_lines(found, handle)
        if (graph := self._json(folder, run_id, GRAPH)) is not None:
            found.graph = graph[1]
        if (kept := self._json(folder, run_id, SUMMARY)) is not None:
            found.summary = kept[1]
            self._rows.append((str(kept[0].get("started")), str(kept[0].get("run_id")),
                               _row(kept[0]), run_id))
        return found

    def _read_lines(self, found: _Archived, handle: BinaryIO) -> None:
        """One pass over transitions.jsonl: count its lines, and check the seed's
        sequencing invariants on the file alone, keeping only what they need."""
        run_id, where = found.run_id, f"{RUNS}/{found.run_id}/{TRANSITIONS}"
        alone = _Alone(found, where)
        undecoded: list[str] = []  # said after a partial last line, as a whole file read
        partial = b""
        for raw in handle:
            if not raw.endswith(b"\n"):
                partial = raw
                break
            found.count += 1
            try:
                line = decode(raw[:-1])
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                undecoded.append(f"line {found.count} is not an archive line: {exc}")
                alone.add(found.count, None)
                continue
            found.last_seq = max(found.last_seq, line.seq)
            alone.add(found.count, line)
        if partial:
            self.problem(run_id, where, f"ends in a partial line ({len(partial)} bytes "
                         "without a newline): it was cut short")
        for text in undecoded:
            self.problem(run_id, where, text)
        alone.end()

    def _json(self, folder: Folder, run_id: str, child: str
              ) -> tuple[dict[str, Any], bytes] | None:
        """A JSON object file and its bytes' digest; None (and the problem said) when
        it is absent, unreadable or not an object."""
        try:
            raw = folder.read(child)
        except Corrupt as exc:
            self.problem(run_id, f"{RUNS}/{run_id}/{child}", exc.what)
            return None
        if raw is None:
            return None
        value = _object(raw)
        if value is None:
            self.problem(run_id, f"{RUNS}/{run_id}/{child}", "not a JSON object")
            return None
        return value, _digest(raw)

    def _reread(self, run_id: str, child: str) -> dict[str, Any]:
        """A run's graph.json or summary.json once more, to compare it field by field
        (only when its bytes are not what a sync writes); {} when it is gone."""
        runs = self.root.folder(RUNS, create=False)
        folder = runs.folder(run_id, create=False) if runs is not None else None
        try:
            raw = folder.read(child) if folder is not None else None
        finally:
            if folder is not None:
                folder.close()
            if runs is not None:
                runs.close()
        return (_object(raw) if raw is not None else None) or {}

    # -- against the log ---------------------------------------------------------------

    def _against_log(self, archived: dict[str, _Archived], covered: int,
                     files: _Files | None) -> dict[str, int]:
        """Read the log's complete batches once, comparing each archived run's lines
        with what its events map to as they come; the runs the checkpoint covers that
        have no folder (run id -> the seq it started at)."""
        decode_event = self.store.journal.catalog.decode
        missing: dict[str, int] = {}
        batch: list[Envelope] = []
        for raw in self.store.log.read():
            event = decode_event(raw.raw)
            batch.append(event)
            if event.batch[0] != event.batch[1]:
                continue
            for member in batch:
                if member.type not in MAPPED_TYPES:
                    continue
                run_id = member.subject.removeprefix("thread/")
                found = archived.get(run_id)
                if found is None:
                    if isinstance(member.data, ThreadStarted) and member.seq <= covered:
                        missing.setdefault(run_id, member.seq)
                    continue
                if found.done:
                    continue
                if isinstance(member.data, ThreadStarted):
                    found.started = True
                if found.started:
                    self._map(found, member, covered, files)
            batch = []
        for found in archived.values():
            if not found.done:
                self._finish(found, covered, files)
        return missing

    def _map(self, found: _Archived, event: Envelope, covered: int,
             files: _Files | None) -> None:
        """The lines one event gives the run; each one due is compared with the file's
        line in its place."""
        through = found.through(covered)
        state = found.state
        for line in lines_for(state, event):
            state = fold(state, line)
            if line.seq > through:
                continue
            found.due += 1
            found.due_state = state  # every line before it was due too (log order)
            if found.due == 1 and isinstance(line, RunStart):
                found.start = line
            if found.transitions:
                self._compare(found, line, files)
        found.state = state
        if state is not None and state.ended:
            self._finish(found, covered, files)

    def _compare(self, found: _Archived, want: Line, files: _Files | None) -> None:
        number = found.due
        if number > found.count:
            found.missing += 1
            found.missing_seq = want.seq
            return
        assert files is not None
        got = files.next_line(found)
        if got is None or got == want:
            return
        got_fields, want_fields = msgspec.to_builtins(got), msgspec.to_builtins(want)
        differ = sorted(key for key in got_fields.keys() | want_fields.keys()
                        if got_fields.get(key) != want_fields.get(key))
        found.problem(f"{RUNS}/{found.run_id}/{TRANSITIONS}",
                      f"line {number} differs from the log in {', '.join(differ)}: the "
                      f"log's line {number} is {_kind(want)} from seq {want.seq} (event "
                      f"{want.event_id})")

    def _finish(self, found: _Archived, covered: int, files: _Files | None) -> None:
        """The run has no more lines due: the file's lines past them, a truncation, its
        graph.json and its summary.json; then only the small record is kept."""
        run_id, where = found.run_id, f"{RUNS}/{found.run_id}"
        found.done = True
        if not found.started:
            found.problem(where, "the log has no such run")
            return
        if found.transitions:
            for number in range(found.due + 1, found.count + 1):
                assert files is not None
                line = files.next_line(found)
                shown = f" (seq {line.seq})" if line is not None else ""
                found.problem(f"{where}/{TRANSITIONS}", f"line {number}{shown} is not in the "
                              "log for this run")
            if files is not None:
                files.close(run_id)
            if found.missing:
                found.problem(f"{where}/{TRANSITIONS}", f"ends after line {found.count}, but "
                              f"the log has {found.missing} more "
                              f"line{'' if found.missing == 1 else 's'} for this run through "
                              f"seq {found.missing_seq}: it was truncated")
        self._check_graph(found)
        self._check_summary(found, found.through(covered))
        found.state = found.due_state = found.start = None

    def _check_graph(self, found: _Archived) -> None:
        start, where = found.start, f"{RUNS}/{found.run_id}/{GRAPH}"
        if start is None:
            return
        if found.graph is None:
            found.problem(where, "missing (or unreadable): the run's workflow snapshot, due "
                          f"since seq {start.seq}")
            return
        key = (start.workflow, start.name)
        wanted = self._wanted_graphs.get(key)
        if wanted is None:
            try:
                document = graph_document(self.store, start)
                wanted = (_digest(archive_document(document)), document)
            except Corrupt as exc:
                wanted = exc.what
            self._wanted_graphs[key] = wanted
        if isinstance(wanted, str):
            found.problem(where, wanted)
        elif found.graph != wanted[0] and self._reread(found.run_id, GRAPH) != wanted[1]:
            found.problem(where, f"differs from the workflow the run started on "
                          f"({start.workflow})")

    def _check_summary(self, found: _Archived, through: int) -> None:
        where = f"{RUNS}/{found.run_id}/{SUMMARY}"
        state = found.due_state
        end = state.end if state is not None else None
        if found.summary is None:
            if end is not None:
                found.problem(where, f"missing (or unreadable): the run ended at seq "
                              f"{end.seq}")
            return
        if state is None or end is None:
            found.problem(where, f"the run has not ended (in the log through seq {through}), "
                          "so it may not have a summary yet")
            return
        wanted = summary(state)
        if _digest(archive_document(wanted)) == found.summary:
            return
        got = self._reread(found.run_id, SUMMARY)
        differ = [f"{key} is {json.dumps(got.get(key))} (the log says "
                  f"{json.dumps(wanted.get(key))})"
                  for key in dict.fromkeys([*wanted, *got]) if got.get(key) != wanted.get(key)]
        if differ:
            found.problem(where, "differs from the log: " + "; ".join(differ))

    def _check_index(self, any_runs: bool, covered: int) -> None:
        try:
            raw = self.root.read(INDEX)
        except Corrupt as exc:
            self.problem(None, INDEX, exc.what)
            return
        if raw is None:
            if any_runs or covered:
                self.problem(None, INDEX, "missing: `uwf archive sync DIR` rebuilds it")
            return
        # As index_document orders them: by `started`, then run id (a stable sort of the
        # run folders' order).
        order = sorted(range(len(self._rows)), key=lambda i: self._rows[i][:2])
        try:
            entries = msgspec.json.decode(raw, type=list[msgspec.Raw])
        except (msgspec.DecodeError, msgspec.ValidationError):
            entries = None
        # Each row as index_document writes it, at once; else compared as JSON values.
        if entries is None or (
                [_digest(bytes(entry)) for entry in entries] != [self._rows[i][2]
                                                                 for i in order]
                and self._index_values(entries) != self._summary_values(order)):
            self.problem(None, INDEX, "does not match runs/*/summary.json: delete it and run "
                         "`uwf archive sync DIR` to rebuild it")

    def _index_values(self, entries: list[msgspec.Raw]) -> list[bytes] | None:
        try:
            return [_canonical(json.loads(bytes(entry))) for entry in entries]
        except ValueError:
            return None

    def _summary_values(self, order: list[int]) -> list[bytes]:
        """Every summary.json read again as a JSON value, in index order."""
        return [_canonical(self._reread(self._rows[i][3], SUMMARY)) for i in order]


class _Alone:
    """The seed's sequencing invariants over one file's lines, fed one at a time (None
    for a line that is not an archive line). What it keeps is the attempts in flight
    (a `to: running` whose node_attempt has not come yet), so a run of any length costs
    the same; a node_attempt whose attempt is not in flight (never started, or
    finished already) has no `to: running` before it."""

    def __init__(self, found: _Archived, where: str) -> None:
        self.found = found
        self.where = where
        self.previous_seq = 0
        self.ended_at: int | None = None
        self.last_not_end = 0  # the last line that is not run_end (a bad line counts)
        self.running: dict[tuple[str, str | None, int], int] = {}  # in flight: its line

    def add(self, number: int, line: Line | None) -> None:
        if not isinstance(line, RunEnd):
            self.last_not_end = number
        if line is None:
            return
        found, where = self.found, self.where
        if line.run_id != found.run_id:
            found.problem(where, f"line {number} belongs to run {line.run_id}")
        if number == 1 and not isinstance(line, RunStart):
            found.problem(where, f"line 1 is {_kind(line)}: run_start must be first")
        elif number > 1 and isinstance(line, RunStart):
            found.problem(where, f"line {number} is a second run_start")
        if self.ended_at is not None:
            found.problem(where, f"line {number} follows run_end (line {self.ended_at}), "
                          "which must be last")
        if isinstance(line, RunEnd) and self.ended_at is None:
            self.ended_at = number
        if line.seq < self.previous_seq:
            found.problem(where, f"line {number} (seq {line.seq}) comes after seq "
                          f"{self.previous_seq}: lines must keep the log's order")
        self.previous_seq = max(self.previous_seq, line.seq)
        if isinstance(line, Transition) and line.to == "running":
            self.running[(line.node, line.step, line.attempt)] = number
        elif (isinstance(line, NodeAttempt)
              and self.running.pop((line.node, line.step, line.attempt), None) is None):
            found.problem(where, f"line {number}: node_attempt {line.node} "
                          f"#{line.attempt} has no `to: running` before it")

    def end(self) -> None:
        for attempt_key, number in self.running.items():
            # Allowed without its node_attempt only when nothing but run_end follows: the
            # attempt is still running, or the run was killed (the process died) during it.
            if self.last_not_end > number:
                node, _, attempt = attempt_key
                self.found.problem(self.where, f"line {number}: {node} attempt {attempt} "
                                   "went to running but has no node_attempt")


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _kind(line: Line) -> str:
    if isinstance(line, Transition):
        return f"transition {line.node} {line.from_} -> {line.to}"
    return {RunStart: "run_start", NodeAttempt: "node_attempt", RunEnd: "run_end"}[type(line)]


def verify(store: Store, directory: str | Path) -> dict[str, Any]:
    """Check the archive at `directory`: {ok, archive, seq, logSeq, runs, problems:
    [{run, file, problem}]}."""
    path = check_root(directory, create=False)
    root = Folder.root(path, durable=False, create=False)
    try:
        with root.lock(LOCK, store.settings.lock_timeout, shared=True):
            return _Verifier(store, path, root).run()
    finally:
        root.close()
