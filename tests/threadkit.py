"""Shared helpers for the thread, moderator and agent tests.

A `Kit` is one temporary store with its config file and a folder for agent
scripts. `uwf` and `json-cas` run as its `Cli` runs them (in-process, or real
processes for the `cli_processes` marker); the agents (`uwf-mock`, scripts written
here) and `popen_uwf` are always real processes, against that store.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import BIN, EXAMPLE, Cli, Result, refused

MOCK_SCRIPT: dict[str, list[dict[str, Any]]] = {
    "planner": [{"status": "ready", "plan": "Reject empty passwords in login()"}],
    "developer": [
        {"status": "done", "files": ["auth/login.py"],
         "summary": "login() now refuses empty passwords"},
        {"status": "done", "files": ["auth/login.py", "tests/test_login.py"],
         "summary": "added a test"},
    ],
    "reviewer": [
        {"status": "rejected", "comments": "Add a test for the empty password"},
        {"status": "approved"},
    ],
}

# Helpers every agent script starts with: the protocol's THREAD ROLE, the real
# console scripts, and small wrappers for context, CAS puts and submits.
PRELUDE = '''
import json, os, subprocess, sys, time
BIN = {bin!r}
THREAD, ROLE = sys.argv[-2], sys.argv[-1]

def sh(prog, *args, stdin=None):
    """Run a console script (uwf, json-cas); its stdout, or exit 97 on failure."""
    done = subprocess.run([os.path.join(BIN, prog), *args], input=stdin,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        sys.exit(97)
    return done.stdout.strip()

def context():
    from uwf.agents import kit
    return kit.context(THREAD, ROLE)

def put(type_, payload):
    """A CAS node of type `type_` (a hash or a schema name such as StepNode)."""
    from uwf.store import Store
    cas = Store.open(os.environ["UWF_HOME"]).cas
    cas.ensure_builtins()
    return cas.put(cas.resolve_type(type_), payload)

def put_cli(type_, payload):
    return sh("json-cas", "put", "--type", type_, "-", stdin=json.dumps(payload))

def submit(output, role=ROLE, detail=""):
    from uwf.agents import kit
    return kit.submit(THREAD, role, output, detail, agent="script")

def submit_cli(output, role=ROLE):
    return sh("uwf", "agent", "submit", THREAD, role, "--output", "-", "--agent", "script",
              stdin=json.dumps(output))
'''


@dataclass
class Kit:
    """One store, its config.yaml and a folder of agent scripts."""

    cli: Cli
    tmp: Path
    schemas: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.cli.home

    @property
    def config_path(self) -> Path:
        return Path(self.cli.env["XDG_CONFIG_HOME"]) / "uwf" / "config.yaml"

    # -- files ---------------------------------------------------------------------

    def write_config(self, document: dict[str, Any] | str) -> Path:
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        text = document if isinstance(document, str) else yaml.safe_dump(document)
        self.config_path.write_text(text, "utf-8")
        return self.config_path

    def write_env_file(self, text: str) -> Path:
        path = self.config_path.parent / ".env"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
        return path

    def mock_script(self, script: dict[str, Any] | None = None, name: str = "mock.yaml") -> Path:
        """The script written as JSON (which is YAML): uwf-mock reads it without PyYAML."""
        path = self.tmp / name
        path.write_text(json.dumps(script or MOCK_SCRIPT), "utf-8")
        return path

    def agent(self, name: str, body: str) -> Path:
        """An executable Python agent script: the prelude, then `body`."""
        path = self.tmp / "agents" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        code = PRELUDE.format(bin=str(BIN)) + textwrap.dedent(body)
        path.write_text(f"#!{sys.executable}\n{code}", "utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path

    def workflow_file(self, document: dict[str, Any], name: str) -> Path:
        path = self.tmp / name
        path.write_text(yaml.safe_dump(document, sort_keys=False), "utf-8")
        return path

    # -- commands ------------------------------------------------------------------

    def uwf(self, *args: str, stdin: str | None = None, timeout: float = 60) -> Result:
        return self.cli.run(*args, stdin=stdin, timeout=timeout)

    def ok(self, *args: str, stdin: str | None = None, timeout: float = 60) -> Any:
        """Run `uwf ARGS`, expect exit 0 and nothing on stderr; its JSON."""
        result = self.uwf(*args, stdin=stdin, timeout=timeout)
        assert result.code == 0, result
        assert result.err == "", result
        return json.loads(result.out)

    def put_workflow(self, path: Path = EXAMPLE) -> str:
        workflow: str = self.ok("workflow", "put", str(path))["workflow"]
        return workflow

    def start(self, workflow: str = "solve-issue", prompt: str = "Fix the login bug") -> str:
        started = self.ok("thread", "start", workflow, "-p", prompt)
        assert set(started) == {"workflow", "thread"}
        thread: str = started["thread"]
        return thread

    def show(self, thread: str) -> dict[str, Any]:
        shown: dict[str, Any] = self.ok("thread", "show", thread)
        return shown

    def step(self, thread: str, *args: str, timeout: float = 60) -> Result:
        return self.uwf("thread", "step", thread, *args, timeout=timeout)

    def log(self, thread: str) -> list[dict[str, Any]]:
        result = self.uwf("thread", "log", thread)
        assert result.code == 0, result
        return [json.loads(line) for line in result.out.splitlines()]

    def events(self, type_: str | None = None) -> list[dict[str, Any]]:
        args = ["log", "tail", "-n", "100000"]
        if type_ is not None:
            args += ["--type", type_]
        result = self.uwf(*args)
        assert result.code == 0, result
        return [json.loads(line) for line in result.out.splitlines()]

    def node(self, hash_: str) -> dict[str, Any]:
        result = self.cli.cas("get", hash_)
        assert result.code == 0, result
        assert result.err == ""
        got: dict[str, Any] = json.loads(result.out)
        return got

    def payload(self, hash_: str) -> Any:
        return self.node(hash_)["payload"]

    def schema_hash(self, title: str) -> str:
        """A built-in schema's hash, from `json-cas schema list` (asked once)."""
        if not self.schemas:
            result = self.cli.cas("schema", "list")
            assert result.code == 0, result
            self.schemas.update({e["title"]: e["hash"] for e in json.loads(result.out)})
        return self.schemas[title]


def make_kit(cli: Cli, tmp_path: Path, *, mock: bool = True) -> Kit:
    """A kit on the `cli` fixture's store: fsync off, the venv's scripts on PATH and,
    unless `mock` is false, a config whose default agent is uwf-mock."""
    cli.env["UWF_DURABILITY"] = "none"
    cli.env["PATH"] = f"{BIN}{os.pathsep}{cli.env.get('PATH', '')}"
    cli.env["TMPDIR"] = str(tmp_path)
    kit = Kit(cli, tmp_path)
    if mock:
        kit.write_config(mock_config(kit.mock_script()))
    return kit


def mock_config(script: Path, **extra: Any) -> dict[str, Any]:
    return {"agents": {"mock": {"command": "uwf-mock", "args": [str(script)]}},
            "defaultAgent": "mock", **extra}


def as_before_but_failed(kit: Kit, thread: str, before: dict[str, Any], reason: str) -> None:
    """`thread show` after a refused step: as `before` (the head stays), plus why it
    failed: `lastFailure` and the failed attempt, last, both with `reason`."""
    shown = kit.show(thread)
    assert shown.pop("lastFailure")["reason"] == reason
    assert shown.pop("attempts")[-1]["reason"] == reason
    before = {key: value for key, value in before.items() if key != "attempts"}
    assert shown == before


# The one refusal check (tests/conftest.py), by the name the thread tests know it.
one_line_error = refused


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, or a pid that is gone, counts as dead)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] not in ("Z", "X")


def wait_dead(pid: int, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return not alive(pid)


def wait_for(path: Path, seconds: float = 60.0) -> str:
    """The content of `path` once it exists and is non-empty."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text().strip()):
            return text
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def kill_quietly(pid: int) -> None:
    """End a process this test started (directly or through an agent), if it runs."""
    if alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def popen_uwf(cli: Cli, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(BIN / "uwf"), *args], env=cli.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def store_bytes(home: Path) -> dict[str, bytes]:
    """Every file under the store: events, CAS nodes, views."""
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file()}
