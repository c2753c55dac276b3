"""What `uwf archive verify` keeps per run folder and checks on a folder alone.

A run folder is read once for the seed's sequencing invariants (`AloneChecks`),
keeping a small `Archived` record per run; during the log's pass its
transitions.jsonl is read again line by line through `RunFiles`, which holds at
most OPEN_FILES open at once. Digests stand in for graph.json and summary.json.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec

from uwf.archive.folder import Folder
from uwf.archive.layout import GRAPH, RUNS, SUMMARY, TRANSITIONS
from uwf.archive.lines import (
    Answer,
    Line,
    NodeAttempt,
    Question,
    RunEnd,
    RunFold,
    RunStart,
    Transition,
    decode,
)
from uwf.errors import Corrupt

RUN_FILES = (TRANSITIONS, GRAPH, SUMMARY)
# Run files held open at once while the log is read (the runs it interleaves); one
# evicted is opened again where it was left.
OPEN_FILES = 128

Problem = tuple[str, str]  # (file, what is wrong)


def short_digest(raw: bytes) -> bytes:
    """A short digest of a file's bytes: what is kept of graph.json and summary.json.
    Equal bytes are equal files at once; other bytes are read again and compared as
    JSON values (a file written with other spacing is not a problem)."""
    return hashlib.blake2b(raw, digest_size=16).digest()


def canonical_digest(value: Any) -> bytes:
    """A digest of a JSON value, the same whatever its key order or spacing."""
    return short_digest(json.dumps(value, sort_keys=True, ensure_ascii=False,
                              separators=(",", ":")).encode("utf-8"))


def row_digest(value: Any) -> bytes:
    """A digest of a summary as index.json holds it (index_document's encoding)."""
    return short_digest(json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                   .encode("utf-8"))


def decoded(raw: bytes) -> Line | None:
    try:
        return decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@dataclass(slots=True)
class Archived:
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


class RunFiles:
    """The runs' transitions.jsonl files read again, line by line, during the log's
    pass: at most OPEN_FILES open at once (least recently read closed first)."""

    def __init__(self, runs: Folder) -> None:
        self.runs = runs
        self.open: OrderedDict[str, BinaryIO] = OrderedDict()

    def next_line(self, found: Archived) -> Line | None:
        """The file's next complete line (None when it is not an archive line): the
        caller knows from `found.count` that there is one."""
        handle = self.open.get(found.run_id)
        if handle is None:
            handle = self._reopen(found)
        else:
            self.open.move_to_end(found.run_id)
        raw = handle.readline()
        found.offset += len(raw)
        return decoded(raw[:-1])

    def close(self, run_id: str) -> None:
        handle = self.open.pop(run_id, None)
        if handle is not None:
            handle.close()

    def close_all(self) -> None:
        for run_id in list(self.open):
            self.close(run_id)

    def _reopen(self, found: Archived) -> BinaryIO:
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




class AloneChecks:
    """The seed's sequencing invariants over one file's lines, fed one at a time (None
    for a line that is not an archive line). What it keeps is the attempts in flight
    (a `to: running` whose node_attempt has not come yet), so a run of any length costs
    the same; a node_attempt whose attempt is not in flight (never started, or
    finished already) has no `to: running` before it."""

    def __init__(self, found: Archived, where: str) -> None:
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
            found.problem(where, f"line 1 is {kind_of(line)}: run_start must be first")
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


def json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def kind_of(line: Line) -> str:
    if isinstance(line, Transition):
        return f"transition {line.node} {line.from_} -> {line.to}"
    return {RunStart: "run_start", NodeAttempt: "node_attempt", RunEnd: "run_end",
            Question: "question", Answer: "answer"}[type(line)]


