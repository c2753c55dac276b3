"""Helpers for the run registry tests (test_runs.py, test_rerun.py).

A `Fleet` is one store with two workflows registered: `relay` (roles a -> b -> c,
each a step of the `relay` agent) and `solve-issue` (uwf-mock). The relay agent
is a Python script written by the test: it appends `THREAD ROLE` to a counter
file each time it runs, so a test can count agent invocations, and does what a
plan file says for each role: report a status, exit non-zero, print garbage, or
wait for a `go` file (a step that stays in flight).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLE, Cli, Result, cli_on
from tests.threadkit import Kit, kill_quietly, make_kit, popen_uwf, wait_for

NOW = "2030-01-01T00:00:00.000Z"  # the reading clock of the byte-for-byte comparisons
DAY_MS = 86_400_000

ROLE_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["status", "note"],
    "properties": {"status": {"type": "string"}, "note": {"type": "string"}}}


def relay_workflow(changed: str | None = None) -> dict[str, Any]:
    """a -> b -> c -> $END, each edge on status `ok`; the role `changed` gets another
    procedure (a new version of the workflow, one role's definition changed)."""
    def role(name: str) -> dict[str, Any]:
        procedure = f"Do {name.upper()}." + (" Carefully, now." if name == changed else "")
        return {"description": f"role {name}", "goal": f"Do the {name} part.",
                "procedure": procedure, "output": "JSON: {status, note}", "meta": ROLE_SCHEMA}

    return {
        "name": "relay", "description": "three roles in a row",
        "roles": {"a": role("a"), "b": role("b"), "c": role("c")},
        "graph": {"$START": {"_": {"role": "a", "prompt": "{{prompt}}"}},
                  "a": {"ok": {"role": "b", "prompt": "After a: {{note}}"}},
                  "b": {"ok": {"role": "c", "prompt": "After b: {{note}}"}},
                  "c": {"ok": {"role": "$END", "prompt": "Done."}}},
    }


RELAY_AGENT = '''
PLAN, COUNTER, GO, PID = {plan!r}, {counter!r}, {go!r}, {pid!r}
with open(COUNTER, "a") as counter:
    counter.write(f"{{THREAD}} {{ROLE}}\\n")
plan = json.load(open(PLAN)) if os.path.exists(PLAN) else {{}}
action = plan.get(ROLE, "ok")
if action == "fail":
    sys.stderr.write("the relay agent was told to fail\\n")
    sys.exit(3)
if action == "garbage":
    print("this is not a StepNode hash")
    sys.exit(0)
if action == "wait":
    open(PID, "w").write(str(os.getpid()))
    while not os.path.exists(GO):
        time.sleep(0.02)
    action = "ok"
print(submit({{"status": action, "note": f"{{ROLE}} says {{action}}"}}))
'''


@dataclass
class Fleet:
    """One store with `relay` and `solve-issue` registered and the relay agent set up."""

    kit: Kit
    relay: str  # the relay workflow's hash
    solve: str  # solve-issue's hash
    plan: Path
    counter: Path
    go: Path
    pid: Path

    @property
    def cli(self) -> Cli:
        return self.kit.cli

    def config(self, *, default: bool = True) -> dict[str, Any]:
        """The relay agent by default (`default`), uwf-mock for solve-issue."""
        mock = {"command": "uwf-mock", "args": [str(self.kit.mock_script())]}
        config: dict[str, Any] = {
            "agents": {"relay": {"command": str(self.kit.tmp / "agents" / "relay")},
                       "mock": mock},
            "agentOverrides": {"solve-issue": {"planner": "mock", "developer": "mock",
                                               "reviewer": "mock"}}}
        if default:
            config["defaultAgent"] = "relay"
        return config

    def act(self, **actions: str) -> None:
        """What the relay agent does per role from now on (default: status ok)."""
        self.plan.write_text(json.dumps(actions))

    def invocations(self) -> list[str]:
        """The relay agent's runs so far, oldest first: `THREAD ROLE` lines."""
        return self.counter.read_text().splitlines() if self.counter.exists() else []

    def uwf(self, *args: str, now: str | None = None) -> Result:
        return self.cli.run(*(("--now", now) if now else ()), *args)

    def ok(self, *args: str, now: str | None = None) -> Any:
        result = self.uwf(*args, now=now)
        assert result.code == 0, result
        assert result.err == "", result
        return json.loads(result.out)

    def start(self, workflow: str = "relay", prompt: str = "Carry the message",
              *, now: str | None = None, repo: Path | None = None) -> str:
        args = ["thread", "start", workflow, "-p", prompt]
        if repo is not None:
            args += ["--repo", str(repo)]
        thread: str = self.ok(*args, now=now)["thread"]
        return thread

    def step(self, thread: str, *, now: str | None = None) -> Result:
        return self.uwf("thread", "step", thread, now=now)

    def run(self, thread: str, now: str | None = None) -> dict[str, Any]:
        """The run's record, as `run show` gives it (found)."""
        shown = self.ok("run", "show", thread, now=now)
        assert shown["found"] is True, shown
        run: dict[str, Any] = shown["run"]
        return run

    def search(self, *args: str, now: str | None = NOW) -> list[str]:
        """The run ids `run search ARGS` selects (all pages), in its order."""
        found = self.ok("run", "search", "--limit", "1000", *args, now=now)
        assert found["total"] == len(found["runs"]), found
        return [run["runId"] for run in found["runs"]]

    @contextmanager
    def in_flight(self, thread: str, role: str) -> Iterator[dict[str, Any]]:
        """A step of `thread` (its next role being `role`) whose agent waits: yields its
        `thread.step_started` data while the step is in flight, then lets the agent
        finish (status ok)."""
        self.act(**{role: "wait"})
        self.go.unlink(missing_ok=True)
        self.pid.unlink(missing_ok=True)
        stepping = popen_uwf(self.cli, "thread", "step", thread)
        agent_pid = 0
        try:
            agent_pid = int(wait_for(self.pid))
            started = [e for e in self.kit.events("thread.step_started")
                       if e["subject"] == f"thread/{thread}"]
            yield started[-1]["data"]
        finally:
            self.go.write_text("go")
            try:
                stepping.communicate(timeout=60)
            except subprocess.TimeoutExpired:  # ours to end: the step and its agent
                kill_quietly(agent_pid)
                stepping.kill()
                stepping.communicate()


def new_cli(tmp: Path) -> Cli:
    """A `Cli` on a new store under `tmp`, as the `cli` fixture makes one (for fixtures
    shared by a module's tests)."""
    return cli_on(tmp / "store", tmp / "config")


def make_fleet(cli: Cli, tmp_path: Path) -> Fleet:
    kit = make_kit(cli, tmp_path, mock=False)
    fleet = Fleet(kit, "", "", tmp_path / "plan.json", tmp_path / "invocations.txt",
                  tmp_path / "go", tmp_path / "agent.pid")
    kit.agent("relay", RELAY_AGENT.format(plan=str(fleet.plan), counter=str(fleet.counter),
                                          go=str(fleet.go), pid=str(fleet.pid)))
    kit.write_config(fleet.config())
    fleet.relay = kit.put_workflow(kit.workflow_file(relay_workflow(), "relay.yaml"))
    fleet.solve = kit.put_workflow(EXAMPLE)
    return fleet


def run_in(cli: Cli, cwd: Path, *args: str) -> Result:
    """`uwf ARGS` run from `cwd` (what `--scope repo` and a thread's repo depend on)."""
    return cli.call("uwf", args, b"", cwd=cwd)


def git_repo(path: Path) -> Path:
    """A real git repository at `path` (its top level is what a run's repo is)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, timeout=60)
    return path.resolve()


def ms(text: str) -> int:
    """Epoch ms of an RFC 3339 instant, as uwf writes them."""
    from uwf.engine.clock import parse_instant

    return parse_instant(text)


def ts(ms_: int) -> str:
    from uwf.engine.clock import format_ts

    return format_ts(ms_)
