"""Shared fixtures: a temporary store, and the real console scripts run on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from uwf.store import Store

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "solve-issue.yaml"
BIN = Path(sys.executable).parent


@dataclass
class Result:
    code: int
    out: str
    err: str


@dataclass
class Cli:
    """Runs `uwf` / `json-cas` as real processes against one store."""

    home: Path
    env: dict[str, str]

    def run(self, *args: str, stdin: str | None = None, prog: str = "uwf",
            timeout: float = 60) -> Result:
        exe = shutil.which(prog, path=str(BIN)) or prog
        proc = subprocess.run(
            [exe, *args], input=stdin, capture_output=True, text=True, env=self.env,
            timeout=timeout, check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def cas(self, *args: str, stdin: str | None = None) -> Result:
        return self.run(*args, stdin=stdin, prog="json-cas")

    def log_bytes(self) -> bytes:
        events = self.home / "events"
        if not events.exists():
            return b""
        return b"".join(p.read_bytes() for p in sorted(events.glob("*.jsonl")))


def snapshot(home: Path) -> dict[str, bytes]:
    """Every file of the log and the CAS, by path: what a refused command must not touch."""
    found: dict[str, bytes] = {}
    for folder in ("events", "cas"):
        root = home / folder
        if root.exists():
            found.update({str(p.relative_to(home)): p.read_bytes()
                          for p in sorted(root.rglob("*")) if p.is_file()})
    return found


def run_bytes(cli: Cli, prog: str, *args: str, stdin: bytes = b"",
              env: dict[str, str] | None = None) -> Result:
    """A console script with raw bytes on stdin (Cli.run only sends text)."""
    proc = subprocess.run([str(BIN / prog), *args], input=stdin, capture_output=True,
                          env={**cli.env, **(env or {})}, timeout=120, check=False)
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                  proc.stderr.decode("utf-8", "replace"))


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Generator[Store, None, None]:
    """A store in tmp_path opened in-process (the Python API), with no UWF_HISTORY, no
    fixed time, an empty config directory and no fsync. A test file may define its own
    `store` fixture instead."""
    from uwf.store import Store

    for name in ("UWF_HISTORY", "UWF_CONFIG", "UWF_STEP_ID", "UWF_NOW"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("UWF_DURABILITY", "none")
    monkeypatch.setenv("UWF_HOME", str(tmp_path / "store"))
    opened = Store.open(tmp_path / "store")
    yield opened
    opened.close()


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def cli(store_dir: Path, tmp_path: Path) -> Cli:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
    env["UWF_HOME"] = str(store_dir)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["UWF_DURABILITY"] = "fsync"
    return Cli(store_dir, env)


# -- the fuzz targets (tests/test_fuzz_*.py): budgets and the inputs each tried ----------

# `ci` (the default) runs each fuzz target's CI budget; `--hypothesis-profile=long` ten
# times that (tests/fuzzkit.py scales by max_examples / 100), and 1,000 examples for
# every other property test. No deadline: a command's time depends on the machine's load.
# `ci` is derandomized: CI tries the same inputs on every run, so a landing never depends
# on the luck of the draw; the long run explores, and what it finds becomes an @example.
settings.register_profile("ci", deadline=None, derandomize=True)
settings.register_profile("long", max_examples=1000, deadline=None)
settings.load_profile("ci")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, Any, None]:
    """A fuzz test's counts ride in its report, so xdist brings them to the summary."""
    outcome = yield
    if call.when == "call":
        from tests import fuzzkit

        fuzzkit.attach_counts(outcome.get_result())


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests import fuzzkit

    fuzzkit.summary(terminalreporter)
