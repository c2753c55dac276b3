"""Collecting an agent's output: the agent's exit ends the wait, not its pipes; one
killed at its deadline still says what it printed."""

from __future__ import annotations

import subprocess
import sys

from uwf.threads.agentproc import Collected, collect
from uwf.threads.agentproc import spawn as spawn_agent


def spawn(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_quick_agent_is_never_taken_for_a_timed_out_one() -> None:
    """Its pipes may close before its exit is seen: the exit is then waited for."""
    for _ in range(200):
        process = spawn("sh", "-c", "echo out; echo err >&2")
        assert collect(process, 30) == Collected(b"out\n", b"err\n", True)
        assert process.wait() == 0


def test_an_agent_running_at_its_deadline_is_reported() -> None:
    process = spawn("sh", "-c", "echo started; echo 'still working' >&2; exec sleep 60")
    try:
        collected = collect(process, 2)
        assert collected.exited is False
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_a_timed_out_agent_says_what_it_printed_to_stderr() -> None:
    """The step's failure keeps the stderr tail of an agent killed at its deadline, as
    it does an agent's that exited: where it was stuck."""
    failure = spawn_agent(["sh", "-c", "echo 'cloning the repo' >&2; "
                           "echo 'waiting for the lock' >&2; exec sleep 60"],
                          env={"PATH": "/usr/bin:/bin"}, cwd=None, timeout=2, nested=False,
                          secrets=[])
    assert not isinstance(failure, str)
    assert failure.reason == "timeout"
    assert failure.exit_status is None
    assert failure.stderr == "cloning the repo\nwaiting for the lock"
    assert failure.message == ("agent did not finish within 2s; killed: "
                               "waiting for the lock")


def test_an_agent_that_closes_its_pipes_early_is_still_waited_for() -> None:
    process = spawn(sys.executable, "-c", "import os, time; os.close(1); os.close(2); "
                    "time.sleep(0.3)")
    assert collect(process, 30) == Collected(b"", b"", True)
    assert process.returncode == 0
