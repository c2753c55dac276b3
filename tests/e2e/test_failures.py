"""A failed run says why where runs are read (issue 32): `thread.step_failed` keeps the
agent's exit status and the tail of its stderr (masked, bounded); `thread show`, `run
show`, `run list`, `history` and the MCP results give the reason and each attempt
with its duration; steps an incremental rerun took over are marked; events written
before any of this still fold. Agents are real subprocesses; the views are SQLite's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import Cli
from tests.threadkit import Kit, make_kit, mock_config
from tests.unit.test_projections import H1, H2, T, event, fold
from uwf.cli.runs import _run_panel, _runs_panel
from uwf.cli.threads import _thread_panel
from uwf.threads.agentproc import stderr_tail
from uwf.threads.events import (
    STDERR_TAIL_BYTES,
    STDERR_TAIL_LINES,
    ThreadStarted,
    ThreadStepFailed,
    ThreadStepStarted,
)
from uwf.threads.projection import FAILURE_MESSAGE_CHARS, ThreadsProjection, ThreadState
from uwf.threads.steps import StepsProjection, StepState

BOOM = "agent exited with status 3: boom"


@pytest.fixture
def kit(cli: Cli, tmp_path: Path) -> Kit:
    """uwf-mock by default, and `boom`: an agent that says `boom` on stderr and exits 3."""
    kit = make_kit(cli, tmp_path)
    config = mock_config(kit.mock_script())
    config["agents"]["boom"] = {"command": "sh",
                                "args": ["-c", "echo starting >&2; echo boom >&2; exit 3"]}
    kit.write_config(config)
    kit.put_workflow()
    return kit


def _run(kit: Kit, *args: str) -> dict[str, Any]:
    record: dict[str, Any] = kit.ok("run", "show", *args)["run"]
    return record


def _row(kit: Kit, command: tuple[str, ...], run: str) -> dict[str, Any]:
    page = kit.ok(*command)
    return next(row for row in page["runs"] if row["runId"] == run)


def test_a_failure_then_a_passing_retry_is_told_wherever_runs_are_read(kit: Kit) -> None:
    run = kit.start()
    failed = kit.step(run, "--agent", "boom")
    assert failed.code == 1
    assert BOOM in failed.err
    [event] = kit.events("thread.step_failed")
    assert (event["data"]["exitStatus"], event["data"]["stderr"]) == (3, "starting\nboom")
    step_id = event["data"]["stepId"]

    # Failed: the reason leads, the one attempt is listed with its stderr.
    why = {"stepId": step_id, "role": "planner", "reason": "exit", "message": BOOM,
           "at": event["ts"], "exitStatus": 3}
    shown = kit.show(run)
    assert shown["lastFailure"] == why
    [attempt] = shown["attempts"]
    assert attempt["outcome"] == "failed"
    assert (attempt["agent"], attempt["reason"], attempt["message"]) == ("boom", "exit", BOOM)
    assert (attempt["exitStatus"], attempt["stderr"], attempt["endedAt"]) == (
        3, "starting\nboom", event["ts"])
    assert isinstance(attempt["durationMs"], int)
    assert attempt["durationMs"] >= 0
    record = _run(kit, run)
    assert record["lifecycle"] == "failed"
    assert (record["lastFailure"], record["attempts"]) == (why, shown["attempts"])
    for command in (("run", "list"), ("history",), ("run", "search", "--status", "failed")):
        row = _row(kit, command, run)
        assert row["lastFailure"] == why, command
        assert "attempts" not in row  # a list's rows stay small: `run show` has them
    panel = _run_panel({"found": True, "run": record})
    assert panel.splitlines()[2] == f"failed      exit (planner): {BOOM}"  # after lifecycle
    assert "stderr  boom" in panel
    assert f"exit (planner): {BOOM}" in _thread_panel(shown)
    listed = _runs_panel(kit.ok("run", "list"))
    assert f"1 (1 failed)  exit: {BOOM}"[:60] in listed

    # A passing retry: no longer failed, and both attempts are listed.
    assert kit.step(run).code == 0
    shown = kit.show(run)
    assert "lastFailure" not in shown
    assert [a["outcome"] for a in shown["attempts"]] == ["failed", "stepped"]
    assert [a["agent"] for a in shown["attempts"]] == ["boom", "mock"]
    passed = shown["attempts"][1]
    assert (passed["status"], passed["head"]) == ("ready", shown["head"])
    assert "reason" not in passed
    assert "stderr" not in passed
    record = _run(kit, run)
    assert record["lifecycle"] == "running"
    assert "lastFailure" not in record
    assert record["attempts"] == shown["attempts"]
    row = _row(kit, ("run", "list"), run)
    assert "lastFailure" not in row
    assert (row["tasks"]["total"], row["tasks"]["failed"], row["tasks"]["completed"]) == (2, 1, 1)
    listed = _runs_panel(kit.ok("run", "list"))
    assert "2 (1 failed)" in listed
    assert BOOM not in listed
    panel = _run_panel({"found": True, "run": record})
    assert "failed   " not in panel.splitlines()[2]
    assert "1  planner  failed " in panel
    assert "2  planner  stepped" in panel


def test_a_run_that_never_failed_prints_what_it_printed(kit: Kit) -> None:
    """No attempt failed or was reused: no lastFailure, no attempts, no extra column."""
    run = kit.start()
    assert kit.ok("thread", "run", run)["done"] is True
    assert {"lastFailure", "attempts"} & set(kit.show(run)) == set()
    assert {"lastFailure", "attempts"} & set(_run(kit, run)) == set()
    listed = _runs_panel(kit.ok("run", "list"))
    assert "ATTEMPTS" not in listed
    assert "WHY" not in listed


def test_the_mcp_results_carry_the_reason_and_the_attempts(kit: Kit) -> None:
    pytest.importorskip("mcp")
    from tests.e2e.test_mcp_parity import mcp_call

    run = kit.start()
    assert kit.step(run, "--agent", "boom").code == 1
    assert kit.step(run).code == 0
    assert kit.step(run, "--agent", "boom").code == 1
    by_cli = {"thread show": kit.show(run), "run show": kit.ok("run", "show", run)}
    with mcp_call(kit.cli.env) as (call, _schemas):
        thread = call("thread show", {"thread": run})
        shown = call("run show", {"run": run})
        listed = call("run list", {})
    assert thread == (0, by_cli["thread show"])
    assert shown[0] == 0
    assert shown[1]["run"]["attempts"] == by_cli["run show"]["run"]["attempts"]
    assert [a["outcome"] for a in thread[1]["attempts"]] == ["failed", "stepped", "failed"]
    assert shown[1]["run"]["lastFailure"]["message"] == BOOM
    assert listed[1]["runs"][0]["lastFailure"]["reason"] == "exit"


def test_reused_steps_of_an_incremental_rerun_are_marked(kit: Kit) -> None:
    original = kit.start()
    assert kit.ok("thread", "run", original)["done"] is True
    rerun = kit.ok("run", "rerun", original, "--incremental")
    assert rerun["reused"]
    shown = kit.show(rerun["runId"])
    attempts = shown["attempts"]
    assert [a["outcome"] for a in attempts] == ["reused"] * len(rerun["reused"])
    assert [a["reused"] for a in attempts] == rerun["reused"]
    assert all(a["agent"] is None and a["durationMs"] is None for a in attempts)
    assert _run(kit, rerun["runId"])["attempts"] == attempts
    assert "reused from " + rerun["reused"][0] in _thread_panel(shown)


def test_the_stderr_kept_is_masked_and_bounded(kit: Kit) -> None:
    secret = "hunter2-very-secret-value"
    kit.write_env_file(f"MY_TOKEN={secret}\n")
    config = mock_config(kit.mock_script())
    config["agents"]["noisy"] = {"command": "sh", "args": ["-c", (
        'for i in $(seq 1 100); do echo "line $i" >&2; done; '
        'echo "token $MY_TOKEN" >&2; exit 7')]}
    kit.write_config(config)
    run = kit.start()
    assert kit.step(run, "--agent", "noisy").code == 1
    [event] = kit.events("thread.step_failed")
    stderr = event["data"]["stderr"]
    assert secret not in kit.cli.log_bytes().decode()
    lines = stderr.splitlines()
    assert len(lines) == STDERR_TAIL_LINES
    assert (lines[0], lines[-1]) == ("line 82", "token ***")
    assert event["data"]["message"] == "agent exited with status 7: token ***"
    assert kit.show(run)["attempts"][0]["stderr"] == stderr


def test_the_tail_keeps_the_last_lines_within_its_bytes() -> None:
    assert stderr_tail(b"", []) is None
    assert stderr_tail(b"\n  \n", []) is None
    assert stderr_tail(b"one\n\ntwo  \n", []) == "one\ntwo"
    wide = "é" * 5000  # two bytes each: the cut falls inside a character
    tail = stderr_tail(f"first\n{wide}\n".encode(), [])
    assert tail is not None
    assert set(tail) == {"é"}
    assert len(tail.encode()) == STDERR_TAIL_BYTES
    assert stderr_tail(b"a secret-value-here b", ["secret-value-here"]) == "a *** b"


def test_a_step_failure_written_before_it_kept_more_still_folds() -> None:
    """An event of the old shape decodes, encodes byte for byte as it was written, and
    folds into the threads and steps views with no exit status and no stderr."""
    line = (b'{"stepId":"S1","role":"planner","reason":"exit",'
            b'"message":"agent exited with status 3: boom"}')
    old = msgspec.json.decode(line, type=ThreadStepFailed)
    assert (old.exit_status, old.stderr) == (None, None)
    assert msgspec.json.encode(old) == line
    subject = f"thread/{T}"
    started = event(1, subject, ThreadStarted(H1, "solve", H2, "/repo"))
    step = event(2, subject, ThreadStepStarted("S1", "planner", "go", "boom", 99))
    failed = event(3, subject, old, ts="2026-11-25T00:00:04.500Z")
    thread = fold(ThreadsProjection(), [started, step, failed])
    assert isinstance(thread, ThreadState)
    assert thread.last_failure is not None
    assert (thread.last_failure.reason, thread.last_failure.exit_status) == ("exit", None)
    row = fold(StepsProjection(), [step, failed])
    assert isinstance(row, StepState)
    assert (row.outcome, row.message, row.exit_status, row.stderr) == (
        "failed", BOOM, None, None)
    assert row.ended_at == "2026-11-25T00:00:04.500Z"


def test_a_long_message_is_cut_in_the_threads_view_and_whole_in_the_steps_view() -> None:
    long = "x" * 1000
    subject = f"thread/{T}"
    started = event(1, subject, ThreadStarted(H1, "solve", H2, "/repo"))
    step = event(2, subject, ThreadStepStarted("S1", "planner", "go", "boom", 99))
    failed = event(3, subject, ThreadStepFailed("S1", "planner", "schema", long))
    thread = fold(ThreadsProjection(), [started, step, failed])
    assert isinstance(thread, ThreadState)
    assert thread.last_failure is not None
    assert len(thread.last_failure.message) == FAILURE_MESSAGE_CHARS
    assert thread.last_failure.message.endswith("...")
    row = fold(StepsProjection(), [step, failed])
    assert isinstance(row, StepState)
    assert row.message == long


def test_on_postgresql_the_attempts_read_the_same(pg_url: str, tmp_path: Path) -> None:
    """The steps view's range of a thread's attempts, newest first then turned, on a
    PostgreSQL store."""
    pytest.importorskip("psycopg")
    import yaml

    from tests.conftest import BIN, EXAMPLE
    from tests.e2e.test_pgstore import env_for

    env = env_for(pg_url, tmp_path)
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    config = tmp_path / "config" / "uwf" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"defaultAgent": "mock", "agents": {
        "mock": {"command": "uwf-mock", "args": [str(EXAMPLE.parent / "mock-solve-issue.yaml")]},
        "boom": {"command": "sh", "args": ["-c", "echo boom >&2; exit 3"]}}}), "utf-8")
    cli = Cli(tmp_path / "unused", env)
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    run = json.loads(cli.run("thread", "start", "solve-issue", "-p", "x").out)["thread"]
    assert cli.run("thread", "step", run, "--agent", "boom").code == 1
    failed = json.loads(cli.run("run", "show", run).out)["run"]
    assert failed["lastFailure"]["message"] == BOOM
    assert cli.run("thread", "step", run).code == 0
    shown = json.loads(cli.run("thread", "show", run).out)
    assert [a["outcome"] for a in shown["attempts"]] == ["failed", "stepped"]
    assert shown["attempts"][0]["stderr"] == "boom"
