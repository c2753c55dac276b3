"""Steps of one thread from several processes: one step in flight at a time, and a
step stranded by a dead writer is taken over once its deadline has passed."""

from __future__ import annotations

import signal
import time
from datetime import datetime
from pathlib import Path

from tests.conftest import Cli
from tests.threadkit import kill_quietly, make_kit, one_line_error, popen_uwf, wait_for

# Steps of one thread from several processes: the steps that race or are killed are
# real processes (popen_uwf); the commands around them run in this process.


def test_two_concurrent_steps_one_advances(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    start = kit.show(thread)["head"]
    go = tmp_path / "go"
    slow = kit.agent("slow", f'''
        while not os.path.exists({str(go)!r}):  # runs until the other step was refused
            time.sleep(0.02)
        print(submit({{"status": "ready", "plan": "slowly"}}))
    ''')
    processes = [popen_uwf(cli, "thread", "step", thread, "--agent", str(slow))
                 for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while all(p.poll() is None for p in processes):  # the refused one exits first
            assert time.monotonic() < deadline, "neither step was refused"
            time.sleep(0.02)
    finally:
        go.write_text("go")
    results = [(p.wait(timeout=60), *p.communicate()) for p in processes]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 1], results
    winner = next(r for r in results if r[0] == 0)
    loser = next(r for r in results if r[0] == 1)
    assert loser[1] == ""
    lines = loser[2].splitlines()
    assert len(lines) == 1, loser
    assert "has a step in flight" in lines[0]
    assert "role planner" in lines[0]
    events = kit.events("thread.")
    assert [e["type"] for e in events] == ["thread.started", "thread.step_started",
                                           "thread.stepped"]
    log = kit.log(thread)
    assert len(log) == 1
    assert log[0]["output"] == {"status": "ready", "plan": "slowly"}
    assert kit.payload(log[0]["hash"])["prev"] is None
    assert kit.payload(log[0]["hash"])["start"] == start
    assert kit.show(thread)["head"] == log[0]["hash"]
    assert winner[1] != ""
    assert kit.ok("log", "verify")["ok"] is True


def test_a_stranded_step_is_taken_over_after_its_deadline(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    before = kit.show(thread)
    pid_file = tmp_path / "stranded.pid"
    sleeper = kit.agent("stranded", f'''
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(120)
    ''')
    writer = popen_uwf(cli, "thread", "step", thread, "--agent", str(sleeper), "--timeout", "1")
    agent_pid = 0
    try:
        agent_pid = int(wait_for(pid_file))  # the agent runs: step_started is in the log
        writer.send_signal(signal.SIGKILL)  # the writer dies mid-step, before any result
        writer.communicate(timeout=30)
    finally:
        kill_quietly(agent_pid)  # the agent is in its own session; it is ours to end
        if writer.poll() is None:
            writer.kill()
            writer.communicate()
    assert writer.returncode == -signal.SIGKILL

    started = kit.events("thread.")
    assert [e["type"] for e in started] == ["thread.started", "thread.step_started"]
    flight = started[-1]["data"]
    assert flight["role"] == "planner"
    deadline = flight["deadlineMs"]
    began = datetime.fromisoformat(started[-1]["ts"].replace("Z", "+00:00"))
    expected = round(began.timestamp() * 1000) + 1000 + 30_000  # --timeout 1 + the grace
    assert expected - 1000 < deadline <= expected
    # The step stays in flight (`running`) until a new step takes it over.
    assert kit.show(thread) == {**before, "status": "running", "inFlight": {
        "role": "planner", "agent": str(sleeper), "startedAt": started[-1]["ts"]}}

    # Before the deadline the step is still in flight: refused, nothing written.
    log = cli.log_bytes()
    one_line_error(kit.step(thread), 1, "has a step in flight", "role planner")
    one_line_error(kit.uwf("thread", "step", thread, "--now", str(deadline - 1)), 1,
                   "has a step in flight")
    assert cli.log_bytes() == log

    # Past the deadline: recorded as abandoned, then the new step runs (uwf-mock).
    stepped = kit.ok("thread", "step", thread, "--now", str(deadline + 1))
    assert stepped["done"] is False
    events = kit.events("thread.")[2:]
    assert [e["type"] for e in events] == ["thread.step_failed", "thread.step_started",
                                           "thread.stepped"]
    failed, restarted, done = events
    assert failed["data"]["reason"] == "abandoned"
    assert failed["data"]["stepId"] == flight["stepId"]
    assert failed["data"]["role"] == "planner"
    assert (failed["batch"], restarted["batch"]) == ([1, 2], [2, 2])
    assert restarted["data"]["takesOver"] == flight["stepId"]
    assert restarted["data"]["stepId"] != flight["stepId"]
    assert done["data"]["stepId"] == restarted["data"]["stepId"]
    assert done["data"]["head"] == stepped["head"]
    log_entries = kit.log(thread)
    assert [(e["role"], e["agent"]) for e in log_entries] == [("planner", "uwf-mock")]
    shown = kit.show(thread)  # the abandoned attempt, then the one that took it over
    assert [(a["outcome"], a.get("reason")) for a in shown.pop("attempts")] == [
        ("failed", "abandoned"), ("stepped", None)]
    assert shown == {**before, "head": stepped["head"], "currentRole": "developer"}
    assert kit.ok("thread", "run", thread)["done"] is True
    assert kit.ok("log", "verify")["ok"] is True
    assert kit.ok("registry", "verify")["ok"] is True


def test_a_step_taken_over_while_its_agent_still_runs_is_refused(cli: Cli,
                                                                tmp_path: Path) -> None:
    """A slow step outlives its deadline (by the injected clock), a second step takes
    over and finishes; the first one's late result must not move the head."""
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    go = tmp_path / "go"
    pid_file = tmp_path / "slow.pid"
    slow = kit.agent("late", f'''
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        while not os.path.exists({str(go)!r}):
            time.sleep(0.02)
        print(submit({{"status": "ready", "plan": "late"}}))
    ''')
    first = popen_uwf(cli, "thread", "step", thread, "--agent", str(slow), "--timeout", "60")
    try:
        wait_for(pid_file)
        deadline = kit.events("thread.step_started")[0]["data"]["deadlineMs"]
        taken = kit.ok("thread", "step", thread, "--now", str(deadline + 1))
    finally:
        go.write_text("go")
        code = first.wait(timeout=60)
    out, err = first.communicate()
    assert code == 1, (out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "taken over" in lines[0]
    types = [e["type"] for e in kit.events("thread.")]
    assert types == ["thread.started", "thread.step_started", "thread.step_failed",
                     "thread.step_started", "thread.stepped"]
    assert kit.show(thread)["head"] == taken["head"]
    assert [e["output"]["plan"] for e in kit.log(thread)] == ["Reject empty passwords in login()"]


def test_kill_during_a_step_wins(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    before = kit.show(thread)
    go = tmp_path / "go"
    pid_file = tmp_path / "slow.pid"
    slow = kit.agent("slow", f'''
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        while not os.path.exists({str(go)!r}):
            time.sleep(0.02)
        print(submit({{"status": "ready", "plan": "too late"}}))
    ''')
    stepping = popen_uwf(cli, "thread", "step", thread, "--agent", str(slow))
    try:
        wait_for(pid_file)
        killed = kit.ok("thread", "kill", thread, "--reason", "stop")
    finally:
        go.write_text("go")
        code = stepping.wait(timeout=60)
    _, err = stepping.communicate()
    assert code == 1, err
    assert len(err.splitlines()) == 1, err
    assert killed == {**before, "done": True, "status": "killed", "currentRole": None}
    assert kit.show(thread) == killed
    types = [e["type"] for e in kit.events("thread.")]
    assert types == ["thread.started", "thread.step_started", "thread.ended"]
    assert kit.log(thread) == []
    assert kit.ok("log", "verify")["ok"] is True
