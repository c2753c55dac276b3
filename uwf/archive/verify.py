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

import json
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from uwf.archive.folder import Folder, check_root
from uwf.archive.layout import (
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
from uwf.archive.layout import document as archive_document
from uwf.archive.lines import (
    MAPPED_TYPES,
    Line,
    RunStart,
    decode,
    fold,
    is_run_id,
    lines_for,
    summary,
)
from uwf.archive.results import ArchiveProblem, ArchiveVerified
from uwf.archive.runfiles import (
    RUN_FILES,
    AloneChecks,
    Archived,
    RunFiles,
    canonical_digest,
    json_object,
    kind_of,
    row_digest,
    short_digest,
)
from uwf.config.settings import DEFAULT_LOCK_TIMEOUT_S
from uwf.engine.events import Envelope, digest
from uwf.errors import Corrupt, NotFound
from uwf.store import Store
from uwf.threads.events import ThreadStarted


class _Verifier:
    def __init__(self, store: Store, path: Path, root: Folder) -> None:
        self.store = store
        self.path = path
        self.root = root
        self.problems: list[ArchiveProblem] = []
        # index.json's rows as the summaries give them: (started, run id, digest of the
        # row, the run folder), in the folders' order.
        self._rows: list[tuple[str, str, bytes, str]] = []
        # graph.json as a sync writes it for a workflow and name: its bytes' digest and
        # the document (or why the workflow node cannot give one).
        self._wanted_graphs: dict[tuple[str, str], tuple[bytes, dict[str, Any]] | str] = {}

    def problem(self, run: str | None, file: str, text: str) -> None:
        self.problems.append(ArchiveProblem(run=run, file=file, problem=text))

    def run(self) -> ArchiveVerified:
        if self.root.kind(RUNS) is None and self.root.kind(CHECKPOINT) is None:
            raise NotFound(f"{self.path} is not an archive (it has neither {RUNS}/ nor "
                           f"{CHECKPOINT})", "create one with `uwf archive sync DIR`")
        head = self.store.log.head()
        covered = self._checkpoint(head.seq)
        runs = self._runs_folder()
        archived: dict[str, Archived] = {}
        missing: dict[str, int] = {}
        try:
            if runs is not None:
                archived = self._read_runs(runs)
                files = RunFiles(runs)
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
        return ArchiveVerified(ok=not self.problems, archive=str(self.path), seq=covered,
                               log_seq=head.seq, runs=len(archived), problems=self.problems)

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

    def _read_runs(self, runs: Folder) -> dict[str, Archived]:
        found: dict[str, Archived] = {}
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

    def _read_run(self, folder: Folder, run_id: str) -> Archived:
        where = f"{RUNS}/{run_id}"
        found = Archived(run_id)
        for child in folder.names():
            if child not in RUN_FILES:
                self.problem(run_id, f"{where}/{child}", "unexpected: the seed's files are "
                             + ", ".join(RUN_FILES))
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
                               row_digest(kept[0]), run_id))
        return found

    def _read_lines(self, found: Archived, handle: BinaryIO) -> None:
        """One pass over transitions.jsonl: count its lines, and check the seed's
        sequencing invariants on the file alone, keeping only what they need."""
        run_id, where = found.run_id, f"{RUNS}/{found.run_id}/{TRANSITIONS}"
        alone = AloneChecks(found, where)
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
        value = json_object(raw)
        if value is None:
            self.problem(run_id, f"{RUNS}/{run_id}/{child}", "not a JSON object")
            return None
        return value, short_digest(raw)

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
        return (json_object(raw) if raw is not None else None) or {}

    # -- against the log ---------------------------------------------------------------

    def _against_log(self, archived: dict[str, Archived], covered: int,
                     files: RunFiles | None) -> dict[str, int]:
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

    def _map(self, found: Archived, event: Envelope, covered: int,
             files: RunFiles | None) -> None:
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

    def _compare(self, found: Archived, want: Line, files: RunFiles | None) -> None:
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
                      f"log's line {number} is {kind_of(want)} from seq {want.seq} (event "
                      f"{want.event_id})")

    def _finish(self, found: Archived, covered: int, files: RunFiles | None) -> None:
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

    def _check_graph(self, found: Archived) -> None:
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
                document = graph_document(self.store.cas, start)
                wanted = (short_digest(archive_document(document)), document)
            except Corrupt as exc:
                wanted = exc.what
            self._wanted_graphs[key] = wanted
        if isinstance(wanted, str):
            found.problem(where, wanted)
        elif found.graph != wanted[0] and self._reread(found.run_id, GRAPH) != wanted[1]:
            found.problem(where, f"differs from the workflow the run started on "
                          f"({start.workflow})")

    def _check_summary(self, found: Archived, through: int) -> None:
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
        if short_digest(archive_document(wanted)) == found.summary:
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
                [short_digest(bytes(entry)) for entry in entries] != [self._rows[i][2]
                                                                 for i in order]
                and self._index_values(entries) != self._summary_values(order)):
            self.problem(None, INDEX, "does not match runs/*/summary.json: delete it and run "
                         "`uwf archive sync DIR` to rebuild it")

    def _index_values(self, entries: list[msgspec.Raw]) -> list[bytes] | None:
        try:
            return [canonical_digest(json.loads(bytes(entry))) for entry in entries]
        except ValueError:
            return None

    def _summary_values(self, order: list[int]) -> list[bytes]:
        """Every summary.json read again as a JSON value, in index order."""
        return [canonical_digest(self._reread(self._rows[i][3], SUMMARY)) for i in order]


def verify(store: Store, directory: str | Path, *,
           lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S) -> ArchiveVerified:
    """Check the archive at `directory` (as the command resolved it), naming every
    problem; `lock_timeout` is the wait for the archive's lock."""
    path = check_root(directory, create=False, where=Path)
    root = Folder.root(path, durable=False, create=False)
    try:
        with root.lock(LOCK, lock_timeout, shared=True):
            return _Verifier(store, path, root).run()
    finally:
        root.close()
