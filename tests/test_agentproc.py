"""Collecting an agent's output: the agent's exit ends the wait, not its pipes."""

from __future__ import annotations

import subprocess
import sys

from uwf.threads.agentproc import collect


def spawn(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_quick_agent_is_never_taken_for_a_timed_out_one() -> None:
    """Its pipes may close before its exit is seen: the exit is then waited for."""
    for _ in range(200):
        process = spawn("sh", "-c", "echo out; echo err >&2")
        assert collect(process, 30) == (b"out\n", b"err\n")
        assert process.wait() == 0


def test_an_agent_running_at_its_deadline_is_reported() -> None:
    process = spawn(sys.executable, "-c", "import time; print('started', flush=True); "
                    "time.sleep(60)")
    try:
        assert collect(process, 0.5) is None
    finally:
        process.kill()
        process.wait()


def test_an_agent_that_closes_its_pipes_early_is_still_waited_for() -> None:
    process = spawn(sys.executable, "-c", "import os, time; os.close(1); os.close(2); "
                    "time.sleep(0.3)")
    assert collect(process, 30) == (b"", b"")
    assert process.returncode == 0
