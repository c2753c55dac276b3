"""The RunRecord fields of the run-registry seed that uwf lacked (issue 17 item 3):
schemaVersion, appVersion, runDir, statePath, loopStage, tasks, commitCount,
verifierGatedCommitCount, openFeedbackCount, sourceFingerprint, a per-record
`stale`, and the index's sourceFingerprint in `registry show`.

Through the real `uwf` on scratch stores (tests/runkit.py); the one race that makes
a record stale is staged in process, through `main(argv)`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import uwf
from tests.runkit import Fleet
from tests.threadkit import one_line_error
from uwf.cli import main as uwf_cli
from uwf.store import Store

ZEROS = "0" * 32


def log_lines(home: Path) -> list[bytes]:
    return b"".join(path.read_bytes() for path in
                    sorted((home / "events").glob("*.jsonl"))).splitlines()


def chain_digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()[:32]


def fingerprint_of(home: Path, run_id: str) -> str:
    """The documented sourceFingerprint, recomputed from the log's bytes: a running
    SHA-256 over the run's lines, from 32 zeros."""
    found = ZEROS
    for line in log_lines(home):
        if json.loads(line)["subject"] == f"thread/{run_id}":
            found = hashlib.sha256(found.encode() + b"\n" + line).hexdigest()[:32]
    return found


SEED_FIELDS = ("schemaVersion", "appVersion", "runDir", "statePath", "loopStage", "tasks",
               "commitCount", "verifierGatedCommitCount", "openFeedbackCount",
               "sourceFingerprint", "stale")


def test_a_record_carries_the_seed_fields(fleet: Fleet) -> None:
    thread = fleet.start()
    run = fleet.run(thread)
    assert {key: run[key] for key in SEED_FIELDS} == {
        "schemaVersion": 1, "appVersion": uwf.__version__, "runDir": None,
        "statePath": str(fleet.cli.home / "events"), "loopStage": "$START",
        "tasks": {"total": 0, "pending": 0, "running": 0, "failed": 0, "completed": 0},
        "commitCount": 0, "verifierGatedCommitCount": 0, "openFeedbackCount": 0,
        "sourceFingerprint": fingerprint_of(fleet.cli.home, thread), "stale": False}
    assert run["sourceFingerprint"] != ZEROS
    for listing in (fleet.ok("run", "search"), fleet.ok("history"),
                    fleet.ok("run", "list")):
        assert listing["runs"] == [run]


def test_loop_stage_and_task_counts_follow_the_run(fleet: Fleet) -> None:
    thread = fleet.start()

    def fields() -> tuple[str, dict[str, int], int]:
        run = fleet.run(thread)
        assert run["sourceFingerprint"] == fingerprint_of(fleet.cli.home, thread)
        return run["loopStage"], run["tasks"], run["openFeedbackCount"]

    with fleet.in_flight(thread, "a"):
        assert fields() == ("a", {"total": 1, "pending": 0, "running": 1, "failed": 0,
                                  "completed": 0}, 0)
    assert fields() == ("a", {"total": 1, "pending": 0, "running": 0, "failed": 0,
                              "completed": 1}, 0)
    fleet.act(b="fail")
    assert fleet.step(thread).code == 1
    assert fields() == ("a", {"total": 2, "pending": 0, "running": 0, "failed": 1,
                              "completed": 1}, 0)
    fleet.kit.write_config(fleet.config(default=False))  # no agent for b: blocked
    one_line_error(fleet.step(thread), 1, "no agent configured")
    assert fields() == ("b", {"total": 2, "pending": 0, "running": 0, "failed": 1,
                              "completed": 1}, 1)
    fleet.kit.write_config(fleet.config())
    fleet.act()
    assert fleet.ok("thread", "run", thread)["done"] is True
    assert fields() == ("$END", {"total": 4, "pending": 0, "running": 0, "failed": 1,
                                 "completed": 3}, 0)
    fleet.ok("run", "archive", thread)  # the archive overlay is an event of the run too
    assert fields()[0] == "$END"


def test_registry_show_has_the_index_fingerprint(fleet: Fleet) -> None:
    thread = fleet.start()
    fleet.ok("thread", "step", thread)
    shown = fleet.ok("registry", "show")
    assert shown["runs"]["sourceFingerprint"] == chain_digest(log_lines(fleet.cli.home)[-1])
    fleet.ok("registry", "rebuild")
    assert fleet.ok("registry", "show")["runs"]["sourceFingerprint"] == \
        shown["runs"]["sourceFingerprint"]


def test_records_are_the_same_after_a_rebuild(fleet: Fleet) -> None:
    done = fleet.start(prompt="done")
    fleet.ok("thread", "run", done)
    other = fleet.start(prompt="other")
    fleet.ok("thread", "step", other)
    fleet.ok("run", "rerun", done)
    reads = [("run", "show", done), ("run", "show", other), ("run", "search"),
             ("history",), ("registry", "show")]
    before = [fleet.uwf(*args).out for args in reads]
    assert json.loads(before[0])["run"]["sourceFingerprint"] == fingerprint_of(
        fleet.cli.home, done)
    shutil.rmtree(fleet.cli.home / "views")
    assert [fleet.uwf(*args).out for args in reads] == before
    assert fleet.ok("registry", "verify")["ok"] is True
    assert fleet.ok("log", "verify")["ok"] is True


def test_a_record_read_while_its_events_are_not_folded_is_stale(
        fleet: Fleet, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The race a read can lose: events of a run land after the views it read were
    caught up. Staged by handing the commands views held back at an older checkpoint;
    the run they concern is `stale: true` (and only it), registry show names it."""
    home = fleet.cli.home
    behind = fleet.start(prompt="behind")
    steady = fleet.start(prompt="steady")
    fleet.ok("registry", "refresh")
    held = home.parent / "views-held"
    shutil.copytree(home / "views", held)
    fleet.ok("thread", "step", behind)  # the log moves on; the held views do not
    shutil.rmtree(home / "views")
    shutil.copytree(held, home / "views")
    old = None

    def held_back(store: Store, progress: Any = None) -> Any:
        nonlocal old
        old = store.views.checkpoints()["runs"]
        return store.journal.reader(old)

    monkeypatch.setattr(Store, "read", held_back)
    monkeypatch.setenv("UWF_HOME", str(home))

    def run_json(*argv: str) -> Any:
        assert uwf_cli.main([*argv, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    shown = run_json("run", "show", behind)["run"]
    assert (shown["stale"], shown["steps"]) == (True, 0)  # the record as last folded
    assert run_json("run", "show", steady)["run"]["stale"] is False
    stale = {run["runId"]: run["stale"] for run in run_json("run", "search")["runs"]}
    assert stale == {behind: True, steady: False}
    registry = run_json("registry", "show")["runs"]
    assert registry["staleRuns"] == [behind]
    assert old is not None
    assert registry["sourceFingerprint"] == old.digest
    assert old.digest == chain_digest(log_lines(home)[old.seq - 1])
    monkeypatch.undo()
    fresh = fleet.run(behind)  # a real read catches up
    assert (fresh["stale"], fresh["steps"]) == (False, 1)
