"""`uwf archive verify` streams (docs/archive.md#verify): it keeps a small record per
run, never the lines, so its memory does not grow with the events of a run. Measured
in process with tracemalloc on two logs of the same two runs, one four times as
long as the other (bench/archive_verify.py measures the command's peak RSS)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from ulid import ULID

from uwf.archive import service as archive
from uwf.archive.results import ArchiveVerified
from uwf.archive.verify import verify
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome, Views
from uwf.store import Store
from uwf.threads.events import ThreadEnded, ThreadStepped, ThreadStepStarted
from uwf.threads.service import start_thread
from uwf.workflows.service import put_workflow

LOOP = {"name": "loop", "description": "a, again and again",
        "roles": {"a": {"description": "a", "goal": "a", "procedure": "a", "output": "status",
                        "meta": {"type": "object", "required": ["status"]}}},
        "graph": {"$START": {"_": "a"}, "a": {"again": "a", "ok": "$END"}}}
RUNS = 2
CHUNK = 250  # steps of each run written in one batch



def long_runs(store: Store, tmp_path: Path, steps: int) -> None:
    """RUNS runs of `steps` steps of role a each, interleaved, then ended (the events
    as `thread step` writes them, many steps to a batch so the log is written fast)."""
    workflow = tmp_path / "loop.yaml"
    workflow.write_text(yaml.safe_dump(LOOP), "utf-8")
    put_workflow(store, workflow)
    runs = [start_thread(store, "loop", f"run {n}", str(tmp_path), settings=store.settings).thread
            for n in range(RUNS)]
    start = store.read().get("threads", runs[0]).start
    for first in range(0, steps, CHUNK):
        events = []
        for _ in range(first, min(steps, first + CHUNK)):
            for run in runs:
                step_id = str(ULID())
                subject = f"thread/{run}"
                events += [NewEvent(subject, ThreadStepStarted(step_id, "a", "again", "mock",
                                                               4_000_000_000_000)),
                           NewEvent(subject, ThreadStepped(step_id, start, "a", "again",
                                                           start))]
        store.journal.write(appending(events))
    store.journal.write(appending([NewEvent(f"thread/{run}", ThreadEnded("end"))
                                   for run in runs]))


def appending(events: list[NewEvent]) -> Callable[[Views], Outcome[None]]:
    """A command that appends `events` as one batch."""
    return lambda _views: Outcome(events)


def peak_of_verify(store: Store, folder: Path) -> tuple[int, ArchiveVerified]:
    verify(store, folder)  # once untimed: imports, caches, the CAS's node cache
    tracemalloc.start()
    try:
        report = verify(store, folder)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, report


def test_verify_memory_does_not_grow_with_the_lines_of_a_run(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    peaks = []
    for steps in (1_500, 6_000):  # logs of 2 and 8 MiB: several of the MiB it reads at once
        monkeypatch.chdir(tmp_path)
        here = tmp_path / str(steps)
        here.mkdir()
        monkeypatch.setenv("UWF_DURABILITY", "none")
        store = Store.open(here / "store")
        try:
            long_runs(store, here, steps)
            archive.sync(store, here / "archive")
            peak, report = peak_of_verify(store, here / "archive")
        finally:
            store.close()
        assert report.ok is True, report.problems
        assert report.runs == RUNS
        lines = sum(len((here / "archive" / "runs" / run / "transitions.jsonl")
                        .read_bytes().splitlines())
                    for run in (p.name for p in (here / "archive" / "runs").iterdir()))
        assert lines == RUNS * (3 * steps + 2)
        peaks.append(peak)
    small, large = peaks
    # Four times the lines (36,004 vs 9,004): a verify that kept them grows by several
    # MiB (a decoded line is well over 200 bytes); the log is read a MiB at a time.
    assert large < small * 1.25 + 256 * 1024, (small, large)


def test_verify_reads_interleaved_runs_with_one_file_open_at_a_time(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs' files are read again in the log's order, at most OPEN_FILES open: one
    closed is opened again where it was left, and a line edited mid-file is still
    named by its number."""
    from uwf.archive import runfiles

    monkeypatch.setattr(runfiles, "OPEN_FILES", 1)
    long_runs(store, tmp_path, 20)
    folder = tmp_path / "archive"
    archive.sync(store, folder)
    assert verify(store, folder).ok is True
    run = sorted(p.name for p in (folder / "runs").iterdir())[1]
    path = folder / "runs" / run / "transitions.jsonl"
    kept = path.read_bytes().splitlines(keepends=True)
    assert b'"status":"again"' in kept[9]  # line 10: the third step's `to: done`
    kept[9] = kept[9].replace(b'"status":"again"', b'"status":"ok"')
    path.write_bytes(b"".join(kept))
    report = verify(store, folder)
    assert [(p.run, p.problem.split(":")[0]) for p in report.problems] == [
        (run, "line 10 differs from the log in status")]


def test_files_written_with_other_spacing_are_compared_as_json(store: Store,
                                                              tmp_path: Path) -> None:
    """Verify keeps digests of graph.json's and summary.json's bytes; bytes other than a
    sync's are read again and compared as JSON values, so spacing and key order are
    never a problem, and a changed value still is."""
    import json

    long_runs(store, tmp_path, 3)
    folder = tmp_path / "archive"
    archive.sync(store, folder)
    run = sorted(p.name for p in (folder / "runs").iterdir())[0]
    for name in ("graph.json", "summary.json"):
        path = folder / "runs" / run / name
        value = json.loads(path.read_text())
        path.write_text(json.dumps(dict(reversed(value.items())), indent=7))
    index = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps(index, indent=3, sort_keys=True))
    assert verify(store, folder).problems == []

    summary = folder / "runs" / run / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "done": 9}))
    problems = verify(store, folder).problems
    assert [p.file for p in problems] == [f"runs/{run}/summary.json", "index.json"]
    assert problems[0].problem.startswith("differs from the log: done is 9 (the log says")
    assert problems[1].problem.startswith("does not match runs/*/summary.json")
