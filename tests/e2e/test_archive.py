"""The per-run archive (`uwf archive sync|verify`, docs/archive.md) through the real CLI.

Runs of the `relay` workflow (a -> b -> c, runkit) are driven into every state an
archive must hold: running (a step in flight), completed after a failed attempt,
failed, blocked and killed mid-attempt. The archive is checked line by line against
the log, against the seed's invariants (checked here independently of uwf's own
`archive verify`), and across syncs (a second sync only appends). `archive verify`
must name an edited summary, a reordered or truncated transitions file and a
missing graph. Bad input is refused with one line and nothing written.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Cli
from tests.queuekit import Queue
from tests.runkit import Fleet, new_cli
from tests.threadkit import make_kit, mock_config, one_line_error, popen_uwf, wait_for
from uwf.archive import service as archive
from uwf.archive.verify import verify
from uwf.config.configfile import Config, WorkflowConfig
from uwf.errors import Rejected, UsageError
from uwf.store import Store
from uwf.threads.results import StepContext
from uwf.threads.service import start_thread
from uwf.threads.stepping import run_thread
from uwf.workflows.service import put_workflow

SEED_RUN_ID = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$")
SUMMARY_KEYS = ["run_id", "started", "ended", "duration_s", "outcome", "total_nodes", "done",
                "failed", "blocked", "total_attempts", "flake_retries", "exit_code",
                "failed_nodes", "node_attempts"]


# -- helpers ---------------------------------------------------------------------------

def sync(cli: Cli, folder: Path, *args: str) -> dict[str, Any]:
    result = cli.run("archive", "sync", str(folder), *args)
    assert result.code == 0, result
    assert result.err == "", result
    payload: dict[str, Any] = json.loads(result.out)
    return payload


def verified(cli: Cli, folder: Path) -> tuple[int, dict[str, Any]]:
    result = cli.run("archive", "verify", str(folder))
    assert result.err == "", result
    return result.code, json.loads(result.out)


def lines(folder: Path, run: str) -> list[dict[str, Any]]:
    text = (folder / "runs" / run / "transitions.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines()]


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def shape(found: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each line as (event, node, from -> to or result, attempt)."""
    shown: list[tuple[Any, ...]] = []
    for line in found:
        if line["event"] == "transition":
            shown.append(("transition", line["node"], f"{line['from']}->{line['to']}",
                          line["attempt"]))
        elif line["event"] == "node_attempt":
            shown.append(("node_attempt", line["node"], line["result"], line["attempt"]))
        elif line["event"] == "run_end":
            shown.append(("run_end", line["reason"], line["outcome"], line["exit_code"]))
        else:
            shown.append((line["event"],))
    return shown


def assert_invariants(folder: Path) -> None:
    """The seed's invariants, checked here on the files alone."""
    for run_dir in sorted((folder / "runs").iterdir()):
        assert SEED_RUN_ID.match(run_dir.name)
        assert not run_dir.is_symlink()
        assert {p.name for p in run_dir.iterdir()} <= {"transitions.jsonl", "graph.json",
                                                        "summary.json"}
        found = lines(folder, run_dir.name)
        assert found[0]["event"] == "run_start"  # I: run_start first
        assert (run_dir / "graph.json").exists()
        ends = [i for i, line in enumerate(found) if line["event"] == "run_end"]
        assert ends in ([], [len(found) - 1])  # I: run_end last once ended
        assert (run_dir / "summary.json").exists() == bool(ends)
        seqs = [line["seq"] for line in found]
        assert seqs == sorted(seqs)  # same-ts lines keep log order
        for i, line in enumerate(found):
            assert line["run_id"] == run_dir.name
            if line["event"] == "transition" and line["to"] == "running":
                later = found[i + 1:]
                answered = any(other["event"] == "node_attempt"
                               and (other["node"], other["attempt"], other["step"])
                               == (line["node"], line["attempt"], line["step"])
                               for other in later)
                # Unless the process died mid-attempt (the run was killed, or runs now).
                assert answered or all(other["event"] == "run_end" for other in later)


def log_events(fleet: Fleet) -> dict[int, dict[str, Any]]:
    return {event["seq"]: event for event in fleet.kit.events()}


def expected_summary(events: dict[int, dict[str, Any]], run: str,
                     **counts: Any) -> dict[str, Any]:
    mine = [e for e in events.values() if e["subject"] == f"thread/{run}"]
    started = next(e["ts"] for e in mine if e["type"] == "thread.started")
    ended = next(e["ts"] for e in mine if e["type"] == "thread.ended")
    from uwf.engine.clock import parse_instant

    values = {"run_id": run, "started": started, "ended": ended,
              "duration_s": (parse_instant(ended) - parse_instant(started)) / 1000, **counts}
    return {key: values[key] for key in SUMMARY_KEYS}


# -- every kind of run, and a second sync ------------------------------------------------

def test_archives_of_running_completed_failed_blocked_and_killed_runs(fleet: Fleet,
                                                                      tmp_path: Path) -> None:
    cli, folder = fleet.cli, tmp_path / "archive"
    flaky = fleet.start(prompt="a fails once")
    fleet.act(a="fail")
    assert fleet.step(flaky).code == 1
    fleet.act()
    assert fleet.step(flaky).code == 0
    failing = fleet.start(prompt="b fails")
    assert fleet.step(failing).code == 0
    fleet.act(b="fail")
    assert fleet.step(failing).code == 1
    blocked = fleet.start(prompt="a has no edge")
    fleet.act(a="stuck")
    assert fleet.step(blocked).code == 0
    one_line_error(fleet.step(blocked), 1, "no transition")
    killed = fleet.start(prompt="killed while a runs")
    with fleet.in_flight(killed, "a"):
        first = sync(cli, folder)
        assert (first["fromSeq"], first["runs"], first["started"], first["ended"]) == (
            0, 4, 4, 0)
        # Running: the step in flight is a `to: running` with no node_attempt yet.
        assert shape(lines(folder, killed)) == [
            ("run_start",), ("transition", "a", "pending->running", 1)]
        assert_invariants(folder)
        assert verified(cli, folder)[0] == 0
        before = files(folder)
        fleet.ok("thread", "kill", killed)
    fleet.act()
    assert fleet.step(flaky).code == 0
    assert fleet.step(flaky).code == 0  # c reaches $END
    fleet.ok("thread", "kill", failing, "--reason", "gave up")
    fleet.ok("thread", "kill", blocked)

    second = sync(cli, folder)
    assert second["fromSeq"] == first["seq"]
    assert (second["runs"], second["started"], second["ended"]) == (4, 0, 4)
    after = files(folder)
    # A second sync only appends: every transitions file grew from its old bytes, and
    # graph.json is untouched (the checkpoint and index.json are replaced).
    for name, old in before.items():
        if name.endswith("transitions.jsonl"):
            assert after[name].startswith(old), name
            assert len(after[name]) > len(old), name
        elif name.endswith("graph.json"):
            assert after[name] == old

    assert shape(lines(folder, flaky)) == [
        ("run_start",),
        ("transition", "a", "pending->running", 1), ("node_attempt", "a", "failed", 1),
        ("transition", "a", "running->failed", 1),
        ("transition", "a", "failed->running", 2), ("node_attempt", "a", "done", 2),
        ("transition", "a", "running->done", 2),
        ("transition", "b", "pending->running", 1), ("node_attempt", "b", "done", 1),
        ("transition", "b", "running->done", 1),
        ("transition", "c", "pending->running", 1), ("node_attempt", "c", "done", 1),
        ("transition", "c", "running->done", 1),
        ("run_end", "end", "clean_with_flake", 0)]
    assert shape(lines(folder, failing))[-4:] == [
        ("transition", "b", "pending->running", 1), ("node_attempt", "b", "failed", 1),
        ("transition", "b", "running->failed", 1), ("run_end", "killed", "failed", 1)]
    assert shape(lines(folder, blocked)) == [
        ("run_start",), ("transition", "a", "pending->running", 1),
        ("node_attempt", "a", "done", 1), ("transition", "a", "running->done", 1),
        ("transition", "a", "done->blocked", 1), ("run_end", "killed", "blocked", 1)]
    # Killed mid-attempt: the attempt never finished, so it has no node_attempt.
    assert shape(lines(folder, killed)) == [
        ("run_start",), ("transition", "a", "pending->running", 1),
        ("run_end", "killed", "cancelled", 1)]
    failure = lines(folder, flaky)[3]
    assert (failure["reason"], failure["step"]) == ("exit", lines(folder, flaky)[1]["step"])
    block = lines(folder, blocked)[4]
    assert (block["reason"], block["step"]) == ("no-transition", None)
    assert lines(folder, failing)[-1]["note"] == "gave up"

    # Every line names the log line it came from: that seq is that event, of this run.
    events = log_events(fleet)
    kinds = {"run_start": {"thread.started"}, "run_end": {"thread.ended"},
             "node_attempt": {"thread.stepped", "thread.step_failed"},
             "transition": {"thread.step_started", "thread.stepped", "thread.step_failed",
                            "thread.blocked"}}
    for run in (flaky, failing, blocked, killed):
        for line in lines(folder, run):
            event = events[line["seq"]]
            assert (event["id"], event["subject"]) == (line["event_id"], f"thread/{run}")
            assert event["type"] in kinds[line["event"]]
            assert line["ts"] == event["ts"]

    summaries = {run: json.loads((folder / "runs" / run / "summary.json").read_text())
                 for run in (flaky, failing, blocked, killed)}
    assert summaries[flaky] == expected_summary(
        events, flaky, outcome="clean_with_flake", total_nodes=3, done=3, failed=0,
        blocked=0, total_attempts=4, flake_retries=1, exit_code=0, failed_nodes=[],
        node_attempts={"a": 2, "b": 1, "c": 1})
    assert summaries[failing] == expected_summary(
        events, failing, outcome="failed", total_nodes=2, done=1, failed=1, blocked=0,
        total_attempts=2, flake_retries=0, exit_code=1, failed_nodes=["b"],
        node_attempts={"a": 1, "b": 1})
    assert summaries[blocked] == expected_summary(
        events, blocked, outcome="blocked", total_nodes=1, done=0, failed=0, blocked=1,
        total_attempts=1, flake_retries=0, exit_code=1, failed_nodes=[],
        node_attempts={"a": 1})
    assert summaries[killed] == expected_summary(
        events, killed, outcome="cancelled", total_nodes=1, done=0, failed=0, blocked=0,
        total_attempts=1, flake_retries=0, exit_code=1, failed_nodes=[],
        node_attempts={"a": 1})
    for run, found in summaries.items():
        assert list(found) == SUMMARY_KEYS, run  # the seed's shape, in its order
    index = json.loads((folder / "index.json").read_text())
    assert index == sorted(summaries.values(), key=lambda row: (row["started"], row["run_id"]))
    graph = json.loads((folder / "runs" / flaky / "graph.json").read_text())
    assert (graph["workflow"], graph["name"]) == (fleet.relay, "relay")
    assert graph["definition"] == fleet.ok("workflow", "show", fleet.relay)["definition"]
    checkpoint = json.loads((folder / ".uwf-archive.json").read_text())
    assert checkpoint["seq"] == second["seq"] == max(events)

    assert_invariants(folder)
    code, report = verified(cli, folder)
    assert (code, report["ok"], report["runs"], report["problems"]) == (0, True, 4, [])
    # Nothing new: nothing appended, nothing rewritten.
    third = sync(cli, folder)
    assert (third["fromSeq"], third["appended"], third["runs"]) == (second["seq"], 0, 0)
    assert files(folder) == after


# -- verify ------------------------------------------------------------------------------

def finished_run(fleet: Fleet, folder: Path) -> str:
    run = fleet.start()
    for _ in range(3):
        assert fleet.step(run).code == 0
    sync(fleet.cli, folder)
    return run


def edit_lines(path: Path, change: Any) -> None:
    kept = path.read_text("utf-8").splitlines(keepends=True)
    path.write_text("".join(change(kept)), "utf-8")


def swap_two(kept: list[str]) -> list[str]:
    return [kept[0], kept[2], kept[1], *kept[3:]]


def test_verify_names_an_edited_summary_a_reordered_or_truncated_file_and_a_missing_graph(
        fleet: Fleet, tmp_path: Path) -> None:
    cli, folder = fleet.cli, tmp_path / "archive"
    run = finished_run(fleet, folder)
    assert verified(cli, folder)[0] == 0
    mine = f"runs/{run}"

    def tampered(name: str, damage: Any) -> list[dict[str, Any]]:
        copy = tmp_path / name
        shutil.copytree(folder, copy)
        damage(copy / "runs" / run)
        code, report = verified(cli, copy)
        assert (code, report["ok"]) == (1, False), report
        problems: list[dict[str, Any]] = report["problems"]
        return problems

    def summary_says_clean_with_flake(run_dir: Path) -> None:
        summary = json.loads((run_dir / "summary.json").read_text())
        (run_dir / "summary.json").write_text(json.dumps({**summary, "outcome": "failed"}))

    problems = tampered("edited", summary_says_clean_with_flake)
    assert {"run": run, "file": f"{mine}/summary.json",
            "problem": 'differs from the log: outcome is "failed" (the log says "clean")'
            } in problems

    problems = tampered("reordered", lambda d: edit_lines(d / "transitions.jsonl", swap_two))
    texts = [p["problem"] for p in problems if p["file"] == f"{mine}/transitions.jsonl"]
    running, attempt = lines(folder, run)[1:3]
    assert f"line 3 (seq {running['seq']}) comes after seq {attempt['seq']}: lines must keep "\
           "the log's order" in texts
    assert "line 2: node_attempt a #1 has no `to: running` before it" in texts
    assert [text.split(" in ")[0] for text in texts if "differs" in text] == [
        "line 2 differs from the log", "line 3 differs from the log"]

    problems = tampered("cut", lambda d: edit_lines(d / "transitions.jsonl",
                                                    lambda kept: kept[:-2]))
    assert any(p["file"] == f"{mine}/transitions.jsonl" and "it was truncated" in p["problem"]
               and "2 more lines" in p["problem"] for p in problems), problems

    def torn(run_dir: Path) -> None:
        path = run_dir / "transitions.jsonl"
        path.write_bytes(path.read_bytes()[:-20])

    problems = tampered("torn", torn)
    assert any(p["file"] == f"{mine}/transitions.jsonl" and "partial line" in p["problem"]
               for p in problems), problems
    # A sync of the run refuses to add to a torn file (it would never be a line again).
    one_line_error(cli.run("archive", "sync", str(tmp_path / "torn"), "--run", run), 1,
                   "partial line")

    problems = tampered("no-graph", lambda d: (d / "graph.json").unlink())
    assert problems == [{"run": run, "file": f"{mine}/graph.json", "problem":
                         "missing (or unreadable): the run's workflow snapshot, due since "
                         f"seq {lines(folder, run)[0]['seq']}"}]


def test_verify_names_a_missing_run_and_a_stray_file(fleet: Fleet, tmp_path: Path) -> None:
    cli, folder = fleet.cli, tmp_path / "archive"
    run = finished_run(fleet, folder)
    started = lines(folder, run)[0]["seq"]
    shutil.rmtree(folder / "runs" / run)
    (folder / "runs" / "notes.txt").write_text("hello")
    code, report = verified(cli, folder)
    assert code == 1
    assert {"run": run, "file": f"runs/{run}", "problem": f"missing: the run started at seq "
            f"{started}, which the checkpoint ({report['seq']}) covers"} in report["problems"]
    assert {"run": None, "file": "runs/notes.txt",
            "problem": "not a run folder: the name is not a run id"} in report["problems"]


# -- --run, and a later full sync ----------------------------------------------------------

def test_sync_of_one_run_then_of_all_appends_each_line_once(fleet: Fleet,
                                                            tmp_path: Path) -> None:
    cli, folder = fleet.cli, tmp_path / "archive"
    first, second = fleet.start(prompt="first"), fleet.start(prompt="second")
    assert fleet.step(first).code == 0
    assert fleet.step(second).code == 0
    one = sync(cli, folder, "--run", first)
    assert (one["run"], one["runs"], one["appended"]) == (first, 1, 4)
    assert [p.name for p in (folder / "runs").iterdir()] == [first]
    assert not (folder / ".uwf-archive.json").exists()  # the checkpoint is a full sync's
    assert sync(cli, folder, "--run", first)["appended"] == 0
    assert fleet.step(first).code == 0
    more = sync(cli, folder, "--run", first)
    assert (more["appended"], more["fromSeq"]) == (3, lines(folder, first)[3]["seq"])
    everything = sync(cli, folder)
    assert (everything["fromSeq"], everything["runs"]) == (0, 1)  # only `second` was new
    assert len(lines(folder, first)) == 7
    assert len(lines(folder, second)) == 4
    assert_invariants(folder)
    assert verified(cli, folder)[0] == 0


# -- follow ------------------------------------------------------------------------------

# `--follow` and its SIGTERM: a process (popen_uwf); the commands beside it in-process.
def test_follow_keeps_syncing_until_sigterm_and_exits_0(fleet: Fleet, tmp_path: Path) -> None:
    cli, folder = fleet.cli, tmp_path / "archive"
    run = fleet.start()
    following = popen_uwf(cli, "archive", "sync", str(folder), "--follow")
    try:
        wait_for(folder / ".uwf-archive.json")
        assert fleet.step(run).code == 0
        deadline = time.monotonic() + 60
        path = folder / "runs" / run / "transitions.jsonl"
        while time.monotonic() < deadline and (
                not path.exists() or len(path.read_text().splitlines()) < 4):
            time.sleep(0.05)
        following.send_signal(signal.SIGTERM)
        out, err = following.communicate(timeout=20)
    finally:
        if following.poll() is None:
            following.kill()
            following.communicate()
    assert (following.returncode, err) == (0, "")
    results = [json.loads(line) for line in out.splitlines()]
    assert len(results) >= 2
    assert results[0]["appended"] == 1  # run_start
    assert sum(result["appended"] for result in results) == 4
    assert verified(cli, folder)[0] == 0


# -- the worker --------------------------------------------------------------------------

SHORT_SCRIPT = {"planner": [{"status": "ready", "plan": "Reject empty passwords"}],
                "developer": [{"status": "done", "files": ["auth/login.py"]}],
                "reviewer": [{"status": "approved"}]}


def test_worker_keeps_an_archive_in_sync(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.write_config(mock_config(kit.mock_script(SHORT_SCRIPT)))
    kit.put_workflow()
    q = Queue(cli)
    entry = q.add("--repo", str(tmp_path))
    # A file where the archive should be: refused before anything is leased.
    (tmp_path / "a-file").write_text("")
    refused = q.refused(2, "worker", "--once", "--archive", str(tmp_path / "a-file"))
    assert "is not a folder" in refused
    assert q.entry(entry)["status"] == "ready"

    folder = tmp_path / "archive"
    result = cli.run("worker", "--once", "--archive", str(folder))
    assert result.code == 0, result
    done = [json.loads(line) for line in result.out.splitlines()]
    assert [(item["id"], item["outcome"]) for item in done] == [(entry, "completed")]
    assert "archiveError" not in done[0]
    run = done[0]["run"]
    summary = json.loads((folder / "runs" / run / "summary.json").read_text())
    assert (summary["outcome"], summary["node_attempts"]) == (
        "clean", {"planner": 1, "developer": 1, "reviewer": 1})
    code, report = verified(cli, folder)
    assert (code, report["seq"]) == (0, report["logSeq"])

    # A sync that fails after an entry is said on its line; the work goes on, and the
    # next sync catches up (here index.json, made a folder, cannot be replaced).
    later = q.add("--repo", str(tmp_path), prompt="Fix the logout bug")
    (folder / "index.json").unlink()
    (folder / "index.json").mkdir()
    result = cli.run("worker", "--once", "--archive", str(folder))
    assert result.code == 0, result
    [line] = [json.loads(line) for line in result.out.splitlines()]
    assert (line["id"], line["outcome"]) == (later, "completed")
    assert line["archiveError"] == ("index.json is not a regular file; remove index.json, "
                                    "then retry")
    (folder / "index.json").rmdir()
    assert sync(cli, folder)["appended"] == 0
    index = json.loads((folder / "index.json").read_text())
    assert [row["run_id"] for row in index] == [run, line["run"]]
    assert verified(cli, folder)[0] == 0


# -- refusals ------------------------------------------------------------------------------

def test_bad_input_is_one_line_and_writes_nothing(fleet: Fleet, tmp_path: Path) -> None:
    cli = fleet.cli
    run = fleet.start()
    folder = tmp_path / "archive"
    assert "is not a run id" in cli.refuses(2, "archive", "sync", str(folder), "--run",
                                        "../escape")
    # (In lower case an id is accepted: tests/e2e/test_cli_conventions.py; U is no Crockford
    # Base32 character.)
    assert "ULID" in cli.refuses(2, "archive", "sync", str(folder), "--run",
                             "01J7K9M2XNPQR5VWBCDF8G3H4U")
    assert "no thread 01J7K9M2XNPQR5VWBCDF8G3H4T" in cli.refuses(
        1, "archive", "sync", str(folder), "--run", "01J7K9M2XNPQR5VWBCDF8G3H4T")
    assert "--follow" not in cli.refuses(2, "archive", "sync", str(folder), "--follow",
                                     "--run", "nope/..")
    assert not folder.exists()
    assert "does not exist" in cli.refuses(1, "archive", "sync",
                                       str(tmp_path / "missing" / "archive"))
    assert not (tmp_path / "missing").exists()
    (tmp_path / "plain").write_text("not a folder")
    assert "is not a folder" in cli.refuses(2, "archive", "sync", str(tmp_path / "plain"))
    assert "is not a folder" in cli.refuses(2, "archive", "verify", str(tmp_path / "plain"))
    assert "does not exist" in cli.refuses(1, "archive", "verify", str(folder))
    (tmp_path / "empty").mkdir()
    assert "is not an archive" in cli.refuses(1, "archive", "verify", str(tmp_path / "empty"))
    assert list((tmp_path / "empty").iterdir()) == []

    # runs/<id> replaced by a link to a folder outside: a sync never writes through it.
    sync(cli, folder)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(folder / "runs" / run)
    (folder / "runs" / run).symlink_to(outside, target_is_directory=True)
    assert fleet.step(run).code == 0
    before = files(folder)
    assert "symbolic link" in cli.refuses(1, "archive", "sync", str(folder))
    assert list(outside.iterdir()) == []
    assert files(folder) == before
    code, report = verified(cli, folder)
    assert code == 1
    assert {"run": run, "file": f"runs/{run}",
            "problem": "a symbolic link, not a run folder"} in report["problems"]


def test_an_archive_of_another_log_is_refused(fleet: Fleet, tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    fleet.start()
    synced = sync(fleet.cli, folder)
    (tmp_path / "other").mkdir()
    other = new_cli(tmp_path / "other")
    other.env["UWF_DURABILITY"] = "none"
    other_kit = make_kit(other, tmp_path / "other")
    other_kit.put_workflow()
    other_kit.start()
    other_kit.start()
    assert "does not match the log at seq" in other.refuses(1, "archive", "sync", str(folder))
    code, report = verified(other, folder)
    assert code == 1
    assert report["problems"][0]["file"] == ".uwf-archive.json"
    assert f"seq {synced['seq']} is not the one this archive synced" in (
        report["problems"][0]["problem"])


# -- in process: the sync is a fold -----------------------------------------------------

NO_CONFIG = Config(WorkflowConfig(), None, None)
RELAY = {"name": "relay", "description": "a -> b -> c",
         "roles": {role: {"description": role, "goal": role, "procedure": role,
                          "output": "status", "meta": {"type": "object",
                                                       "required": ["status"]}}
                   for role in "abc"},
         "graph": {"$START": {"_": "a"}, "a": {"ok": "b"}, "b": {"ok": "c"},
                   "c": {"ok": "$END"}}}



def test_syncing_after_every_step_equals_syncing_once(store: Store, tmp_path: Path) -> None:
    """Fold step by step == fold all at once; and a sync cut short (its checkpoint and
    a summary lost) is finished by the next one without a line twice."""
    workflow = tmp_path / "relay.yaml"
    workflow.write_text(yaml.safe_dump(RELAY), "utf-8")
    put_workflow(store, workflow)
    failures = {"b": 1}

    def agent(context: StepContext) -> tuple[Any, str]:
        role = context.role["name"]
        if failures.get(role):
            failures[role] -= 1
            raise UsageError("a flaky agent")
        return {"status": "ok"}, ""

    step_by_step, at_once = tmp_path / "step-by-step", tmp_path / "at-once"
    runs = [start_thread(store, "relay", f"run {n}", str(tmp_path),
                         settings=store.settings).thread for n in range(2)]
    archive.sync(store, step_by_step)
    for run in runs:
        done = False
        while not done:
            # The flaky attempt raises (recorded as thread.step_failed).
            with contextlib.suppress(Rejected):
                done = run_thread(store, run, max_steps=1, config=NO_CONFIG,
                                  in_process=agent, settings=store.settings).done
            archive.sync(store, step_by_step)
    archive.sync(store, at_once)
    assert files(step_by_step) == files(at_once)
    assert verify(store, at_once).ok is True
    summaries = [json.loads((at_once / "runs" / run / "summary.json").read_text())
                 for run in runs]
    assert [(s["outcome"], s["flake_retries"]) for s in summaries] == [
        ("clean_with_flake", 1), ("clean", 0)]

    # A crash after the lines of a run's end, before its summary and the checkpoint.
    (at_once / ".uwf-archive.json").unlink()
    (at_once / "runs" / runs[1] / "summary.json").unlink()
    again = archive.sync(store, at_once)
    assert (again.from_seq, again.appended, again.ended) == (0, 0, 1)
    assert files(at_once) == files(step_by_step)


def test_a_bad_run_id_never_becomes_a_path(store: Store, tmp_path: Path) -> None:
    for bad in ("", "../x", "a/b", ".hidden", "x" * 65, "-leading"):
        with pytest.raises(UsageError):
            archive.sync(store, tmp_path / "archive", bad)
    assert not (tmp_path / "archive").exists()



def test_an_incremental_rerun_archives_its_reused_steps(fleet: Fleet, tmp_path: Path) -> None:
    """A step an incremental rerun took over ran no agent: its attempt starts and
    finishes at one log line, and names the StepNode it reused."""
    cli, folder = fleet.cli, tmp_path / "archive"
    run = finished_run(fleet, folder)
    rerun = fleet.ok("run", "rerun", run, "--incremental")["runId"]
    assert sync(cli, folder)["ended"] == 1
    found = lines(folder, rerun)
    assert shape(found) == [
        ("run_start",),
        *(line for role in "abc" for line in (
            ("transition", role, "pending->running", 1), ("node_attempt", role, "done", 1),
            ("transition", role, "running->done", 1))),
        ("run_end", "end", "clean", 0)]
    original = [line["head"] for line in lines(folder, run) if line.get("to") == "done"]
    attempts = [line for line in found if line["event"] == "node_attempt"]
    assert [line["reused"] for line in attempts] == original
    assert all("agent" not in line and line["duration_ms"] == 0 for line in attempts)
    assert len({line["seq"] for line in found[1:]}) == 4  # three steps and the end, one batch
    assert_invariants(folder)
    assert verified(cli, folder)[0] == 0


# -- typed results -----------------------------------------------------------------------

def test_sync_and_verify_return_typed_results_printed_as_the_cli_prints_them(
        fleet: Fleet, tmp_path: Path) -> None:
    from uwf.archive.results import ArchiveVerified, Synced
    from uwf.config.settings import Settings
    from uwf.payload import to_payload

    folder = tmp_path / "archive"
    finished_run(fleet, folder)
    with contextlib.closing(Store.open(settings=Settings.from_env(fleet.cli.env, None))
                            ) as store:
        synced = archive.sync(store, tmp_path / "typed")
        checked = verify(store, folder)
    assert isinstance(synced, Synced)
    assert isinstance(checked, ArchiveVerified)
    printed = sync(fleet.cli, tmp_path / "printed")
    assert to_payload(synced) == {**printed, "archive": str(tmp_path / "typed")}
    assert to_payload(checked) == verified(fleet.cli, folder)[1]
