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

It writes nothing, and takes the archive's lock shared, so a sync never runs
halfway under it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from uwf.api.archive import (
    CHECKPOINT,
    GRAPH,
    INDEX,
    LOCK,
    RUNS,
    SUMMARY,
    TRANSITIONS,
    graph_document,
    index_document,
    read_checkpoint,
)
from uwf.api.archive_dir import Folder, check_root
from uwf.api.archive_lines import (
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
from uwf.api.env import env_number
from uwf.api.store import Store
from uwf.engine.events import Envelope, digest
from uwf.errors import Corrupt, NotFound
from uwf.projections.thread_events import ThreadStarted

_FILES = (TRANSITIONS, GRAPH, SUMMARY)


@dataclass
class _Archived:
    """One run folder as found: its lines (None for one that is not a line) and files."""

    run_id: str
    lines: list[Line | None] = field(default_factory=list)
    transitions: bool = False
    graph: Any = None  # the parsed file; None when absent or unreadable
    summary: Any = None

    @property
    def last_seq(self) -> int:
        return max((line.seq for line in self.lines if line is not None), default=0)


class _Verifier:
    def __init__(self, store: Store, path: Path, root: Folder) -> None:
        self.store = store
        self.path = path
        self.root = root
        self.problems: list[dict[str, Any]] = []

    def problem(self, run: str | None, file: str, text: str) -> None:
        self.problems.append({"run": run, "file": file, "problem": text})

    def run(self) -> dict[str, Any]:
        if self.root.kind(RUNS) is None and self.root.kind(CHECKPOINT) is None:
            raise NotFound(f"{self.path} is not an archive (it has neither {RUNS}/ nor "
                           f"{CHECKPOINT})", "create one with `uwf archive sync DIR`")
        head = self.store.log.head()
        covered = self._checkpoint(head.seq)
        archived = self._read_runs()
        expected, starts = self._expected(set(archived), covered)
        for run_id, found in sorted(archived.items()):
            self._check_alone(found)
            self._check_log(found, expected.get(run_id), covered)
        for run_id, seq in sorted(starts.items()):
            if seq <= covered and run_id not in archived:
                self.problem(run_id, f"{RUNS}/{run_id}", f"missing: the run started at seq "
                             f"{seq}, which the checkpoint ({covered}) covers")
        self._check_index(archived, covered)
        return {"ok": not self.problems, "archive": str(self.path), "seq": covered,
                "logSeq": head.seq, "runs": len(archived), "problems": self.problems}

    # -- reading ---------------------------------------------------------------------

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

    def _read_runs(self) -> dict[str, _Archived]:
        try:
            runs = self.root.folder(RUNS, create=False)
        except Corrupt as exc:
            self.problem(None, RUNS, exc.what)
            return {}
        if runs is None:
            return {}
        found: dict[str, _Archived] = {}
        try:
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
        finally:
            runs.close()
        return found

    def _read_run(self, folder: Folder, run_id: str) -> _Archived:
        where = f"{RUNS}/{run_id}"
        found = _Archived(run_id)
        for child in folder.names():
            if child not in _FILES:
                self.problem(run_id, f"{where}/{child}", "unexpected: the seed's files are "
                             + ", ".join(_FILES))
        raw = self._read(folder, run_id, TRANSITIONS)
        if raw is None:
            self.problem(run_id, f"{where}/{TRANSITIONS}", "missing")
        else:
            found.transitions = True
            info = folder.stat(TRANSITIONS)
            if info is not None and info.st_nlink > 1:
                self.problem(run_id, f"{where}/{TRANSITIONS}", f"has {info.st_nlink} links "
                             "(a hard link, perhaps to a file outside the archive): a sync "
                             "will not append to it; replace it with a copy of its own")
            text, _, partial = raw.rpartition(b"\n")
            if partial:
                self.problem(run_id, f"{where}/{TRANSITIONS}", f"ends in a partial line "
                             f"({len(partial)} bytes without a newline): it was cut short")
            for number, line in enumerate(text.split(b"\n") if text else [], 1):
                try:
                    found.lines.append(decode(line))
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    self.problem(run_id, f"{where}/{TRANSITIONS}",
                                 f"line {number} is not an archive line: {exc}")
                    found.lines.append(None)
        found.graph = self._json(folder, run_id, GRAPH)
        found.summary = self._json(folder, run_id, SUMMARY)
        return found

    def _read(self, folder: Folder, run_id: str, child: str) -> bytes | None:
        try:
            return folder.read(child)
        except Corrupt as exc:
            self.problem(run_id, f"{RUNS}/{run_id}/{child}", exc.what)
            return None

    def _json(self, folder: Folder, run_id: str, child: str) -> Any:
        raw = self._read(folder, run_id, child)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            self.problem(run_id, f"{RUNS}/{run_id}/{child}", "not a JSON object")
            return None
        return value

    def _expected(self, archived: set[str], covered: int
                  ) -> tuple[dict[str, list[Line]], dict[str, int]]:
        """What the log's complete batches map to, for each archived run and each run the
        checkpoint covers; and where each of those runs started."""
        decode_event = self.store.journal.catalog.decode
        states: dict[str, RunFold | None] = {}
        expected: dict[str, list[Line]] = {}
        starts: dict[str, int] = {}
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
                if isinstance(member.data, ThreadStarted) and run_id not in starts:
                    starts[run_id] = member.seq
                    if run_id in archived or member.seq <= covered:
                        expected[run_id] = []
                if run_id not in expected:
                    continue
                state = states.get(run_id)
                for line in lines_for(state, member):
                    state = fold(state, line)
                    expected[run_id].append(line)
                states[run_id] = state
            batch = []
        return expected, starts

    # -- checking --------------------------------------------------------------------

    def _check_alone(self, found: _Archived) -> None:
        """The seed's sequencing invariants, on the file alone."""
        run_id, where = found.run_id, f"{RUNS}/{found.run_id}/{TRANSITIONS}"
        lines = found.lines
        previous_seq = 0
        ended_at: int | None = None
        running: dict[tuple[str, str | None, int], int] = {}
        attempted: set[tuple[str, str | None, int]] = set()
        for number, line in enumerate(lines, 1):
            if line is None:
                continue
            if line.run_id != run_id:
                self.problem(run_id, where, f"line {number} belongs to run {line.run_id}")
            if number == 1 and not isinstance(line, RunStart):
                self.problem(run_id, where, f"line 1 is {_kind(line)}: run_start must be first")
            elif number > 1 and isinstance(line, RunStart):
                self.problem(run_id, where, f"line {number} is a second run_start")
            if ended_at is not None:
                self.problem(run_id, where, f"line {number} follows run_end (line {ended_at}),"
                             " which must be last")
            if isinstance(line, RunEnd) and ended_at is None:
                ended_at = number
            if line.seq < previous_seq:
                self.problem(run_id, where, f"line {number} (seq {line.seq}) comes after seq "
                             f"{previous_seq}: lines must keep the log's order")
            previous_seq = max(previous_seq, line.seq)
            if isinstance(line, Transition) and line.to == "running":
                running[(line.node, line.step, line.attempt)] = number
            elif isinstance(line, NodeAttempt):
                key = (line.node, line.step, line.attempt)
                if key not in running:
                    self.problem(run_id, where, f"line {number}: node_attempt {line.node} "
                                 f"#{line.attempt} has no `to: running` before it")
                attempted.add(key)
        for attempt_key, number in running.items():
            # Allowed without its node_attempt only when nothing but run_end follows: the
            # attempt is still running, or the run was killed (the process died) during it.
            rest = [line for line in lines[number:] if not isinstance(line, RunEnd)]
            if attempt_key not in attempted and rest:
                node, _, attempt = attempt_key
                self.problem(run_id, where, f"line {number}: {node} attempt {attempt} went "
                             "to running but has no node_attempt")

    def _check_log(self, found: _Archived, expected: list[Line] | None, covered: int) -> None:
        run_id = found.run_id
        where = f"{RUNS}/{run_id}"
        if expected is None:
            self.problem(run_id, where, "the log has no such run")
            return
        # What the archive must hold: everything up to its checkpoint, or up to its
        # own last line when a `--run` sync took the run further.
        through = max(covered, found.last_seq)
        due = [line for line in expected if line.seq <= through]
        if found.transitions:
            self._compare(found, due, f"{where}/{TRANSITIONS}")
        state = None
        for line in due:
            state = fold(state, line)
        start = due[0] if due and isinstance(due[0], RunStart) else None
        if start is not None and found.graph is None:
            self.problem(run_id, f"{where}/{GRAPH}", "missing (or unreadable): the run's "
                         f"workflow snapshot, due since seq {start.seq}")
        elif start is not None:
            try:
                wanted = graph_document(self.store, start)
            except Corrupt as exc:
                self.problem(run_id, f"{where}/{GRAPH}", exc.what)
            else:
                if found.graph != wanted:
                    self.problem(run_id, f"{where}/{GRAPH}", f"differs from the workflow the "
                                 f"run started on ({start.workflow})")
        self._check_summary(found, state, through)

    def _compare(self, found: _Archived, due: list[Line], where: str) -> None:
        run_id = found.run_id
        for number, line in enumerate(found.lines, 1):
            if number > len(due):
                shown = f" (seq {line.seq})" if line is not None else ""
                self.problem(run_id, where, f"line {number}{shown} is not in the log for "
                             "this run")
                continue
            if line is None or line == due[number - 1]:
                continue
            want = due[number - 1]
            got_fields, want_fields = msgspec.to_builtins(line), msgspec.to_builtins(want)
            differ = sorted(key for key in got_fields.keys() | want_fields.keys()
                            if got_fields.get(key) != want_fields.get(key))
            self.problem(run_id, where, f"line {number} differs from the log in "
                         f"{', '.join(differ)}: the log's line {number} is {_kind(want)} "
                         f"from seq {want.seq} (event {want.event_id})")
        if len(found.lines) < len(due):
            missing = due[len(found.lines):]
            self.problem(run_id, where, f"ends after line {len(found.lines)}, but the log "
                         f"has {len(missing)} more line{'' if len(missing) == 1 else 's'} for "
                         f"this run through seq {missing[-1].seq}: it was truncated")

    def _check_summary(self, found: _Archived, state: RunFold | None, through: int) -> None:
        where = f"{RUNS}/{found.run_id}/{SUMMARY}"
        ended = state is not None and state.end is not None
        if found.summary is None:
            if ended and state is not None and state.end is not None:
                self.problem(found.run_id, where, f"missing (or unreadable): the run ended at "
                             f"seq {state.end.seq}")
            return
        if state is None or not ended:
            self.problem(found.run_id, where, f"the run has not ended (in the log through seq "
                         f"{through}), so it may not have a summary yet")
            return
        wanted = summary(state)
        got: dict[str, Any] = found.summary
        differ = [f"{key} is {json.dumps(got.get(key))} (the log says "
                  f"{json.dumps(wanted.get(key))})"
                  for key in dict.fromkeys([*wanted, *got]) if got.get(key) != wanted.get(key)]
        if differ:
            self.problem(found.run_id, where, "differs from the log: " + "; ".join(differ))

    def _check_index(self, archived: dict[str, _Archived], covered: int) -> None:
        try:
            raw = self.root.read(INDEX)
        except Corrupt as exc:
            self.problem(None, INDEX, exc.what)
            return
        if raw is None:
            if archived or covered:
                self.problem(None, INDEX, "missing: `uwf archive sync DIR` rebuilds it")
            return
        rows = [found.summary for found in archived.values() if found.summary is not None]
        try:
            index = json.loads(raw)
        except ValueError:
            index = None
        if index != json.loads(index_document(rows)):
            self.problem(None, INDEX, "does not match runs/*/summary.json: delete it and run "
                         "`uwf archive sync DIR` to rebuild it")


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
        with root.lock(LOCK, env_number("UWF_LOCK_TIMEOUT", 10.0), shared=True):
            return _Verifier(store, path, root).run()
    finally:
        root.close()
