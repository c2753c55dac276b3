"""tests/clikit.py's in-process agents: while `uwf` runs in this process, the uwf-mock
agent its step starts runs here too (no process), and the step it gives is the one a
process gives; any other agent is still a process."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.threadkit import Kit, make_kit


def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The command lines of every process started from here on."""
    seen: list[list[str]] = []
    real: Callable[..., Any] = subprocess.Popen

    def popen(args: Any, *rest: Any, **options: Any) -> Any:
        seen.append([str(word) for word in args])
        return real(args, *rest, **options)

    monkeypatch.setattr(subprocess, "Popen", popen)
    return seen


def stepped(kit: Kit, thread: str) -> list[tuple[str, Any]]:
    """Each step of `thread`'s log: its role and its output."""
    return [(entry["role"], entry["output"]) for entry in kit.log(thread)]


def test_uwf_mock_runs_in_this_process_and_steps_as_its_process_does(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    copy = tmp_path / "copy"
    shutil.copytree(cli.home, copy)
    seen = started(monkeypatch)
    here = kit.ok("thread", "run", thread)
    assert here["done"] is True
    assert not [argv for argv in seen if Path(argv[0]).name == "uwf-mock"], seen
    # The same store stepped by `uwf` as a process, whose agent is one too.
    (tmp_path / "there").mkdir()
    there = make_kit(Cli(copy, dict(cli.env, UWF_HOME=str(copy)), process=True),
                     tmp_path / "there")
    ran = there.ok("thread", "run", thread)
    assert ran["steps"] == here["steps"]
    assert stepped(there, thread) == stepped(kit, thread)
    assert kit.ok("log", "verify")["ok"] is True


def test_any_other_agent_is_a_process(cli: Cli, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    agent = kit.agent("script", """
        print(submit({"status": "ready", "plan": "from a script"}))
    """)
    seen = started(monkeypatch)
    assert kit.ok("thread", "step", thread, "--agent", str(agent))["done"] is False
    assert [argv[0] for argv in seen] == [str(agent)]
    assert stepped(kit, thread) == [("planner", {"status": "ready", "plan": "from a script"})]
