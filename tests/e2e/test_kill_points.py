"""SIGKILL at every write, fsync, rename, mkdir, truncate and unlink of a command and of
a thread step (issue 21), in a loop.

strace's fault injection (`-e inject=CALL:signal=KILL:when=K`) kills the `uwf` process
as it enters its K-th call of CALL, for every K the command makes (the SQLite views'
`pwrite64`s and the staging folder's removals, which are many, are sampled). A kill
before a call is also a kill just after the state-changing call before it, so the
points between all of them are covered. Only the `uwf` process is traced: the agent a
step runs is not.

After each kill: `uwf log verify` passes (no event refers to a node that is missing),
`json-cas verify --all` passes, what was acknowledged before is intact, the next
command succeeds (a step once its dead predecessor's deadline is past), and views
rebuilt from the log print what the persisted ones print.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import BIN, EXAMPLE, ROOT, Cli
from tests.e2e.test_crash import assert_verify_ok
from tests.e2e.test_fsyncs import strace_binary

CALLS = ("write", "pwrite64", "fsync", "fdatasync", "rename", "mkdir", "ftruncate",
         "unlink", "unlinkat")
SAMPLED = 6  # at most this many points of a call made more often (evenly spread)
LATER = "2099-01-01T00:00:00.000Z"  # past any step's deadline: a dead step is retried


def counted(cli: Cli, args: list[str]) -> Counter[str]:
    """How many times the `uwf ARGS` process enters each of CALLS (run on a copy)."""
    done = subprocess.run([strace_binary(), "-qq", "-o", "/dev/stderr", "-e",
                           "trace=" + ",".join(CALLS), str(BIN / "uwf"), *args],
                          env=cli.env, capture_output=True, text=True, check=False,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return Counter(re.findall(r"^(\w+)\(", done.stderr, re.MULTILINE))


def points(calls: Counter[str]) -> list[tuple[str, int]]:
    found = []
    for call in CALLS:
        total = calls.get(call, 0)
        step = max(1, -(-total // SAMPLED)) if call in ("pwrite64", "unlinkat") else 1
        found += [(call, k) for k in range(1, total + 1, step)]
    return found


def killed_at(cli: Cli, call: str, k: int, args: list[str]) -> bool:
    """Run `uwf ARGS`, killed as it enters its K-th CALL; False if it ended first (a
    call made fewer times in this run: node hashes, and so fan-out folders, differ)."""
    done = subprocess.run([strace_binary(), "-qq", "-o", "/dev/null", "-e", f"trace={call}",
                           "-e", f"inject={call}:signal=KILL:when={k}", str(BIN / "uwf"),
                           *args], env=cli.env, capture_output=True, text=True, check=False,
                          timeout=120)
    if done.returncode == 0:
        return False
    assert done.returncode in (-9, 137), (call, k, done.returncode, done.stderr[-2000:])
    return True


def ok(cli: Cli, *args: str, prog: str = "uwf") -> str:
    result = cli.run(*args, prog=prog)
    assert result.code == 0, (args, result.out, result.err)
    return result.out


def check_store(cli: Cli) -> None:
    """The log and every node it refers to verify; views restored from the snapshot the
    template kept (and the log after it), and views rebuilt from the whole log, print the
    same."""
    assert_verify_ok(cli)
    ok(cli, "verify", "--all", prog="json-cas")
    before = ok(cli, "workflow", "list"), ok(cli, "thread", "list")
    views = cli.home / "views"
    snapshots = sorted(views.glob("snapshot-*.sqlite3"))
    assert snapshots
    for path in views.glob("views.sqlite3*"):  # the snapshot stays: a reader restores it
        path.unlink()
    assert (ok(cli, "workflow", "list"), ok(cli, "thread", "list")) == before
    aside = cli.home.parent / "snapshots-aside"
    shutil.rmtree(aside, ignore_errors=True)
    shutil.move(views, aside)  # no views and no snapshot: the whole log replayed
    assert (ok(cli, "workflow", "list"), ok(cli, "thread", "list")) == before
    for path in snapshots:  # kept for the next check
        shutil.move(aside / path.name, path)


def template(tmp_path: Path, cli: Cli) -> tuple[Path, str]:
    """A store with the example workflow and one thread started (acknowledged)."""
    cli.env["UWF_CONFIG"] = str(ROOT / "examples" / "config.yaml")
    ok(cli, "workflow", "put", str(EXAMPLE))
    thread = json.loads(ok(cli, "thread", "start", "solve-issue", "-p", "Fix the login bug",
                           "--json"))["thread"]
    ok(cli, "registry", "snapshot")  # kept beside the views: each check restores it
    saved = tmp_path / "template"
    shutil.copytree(cli.home, saved)
    return saved, thread


def fresh(cli: Cli, saved: Path) -> None:
    shutil.rmtree(cli.home, ignore_errors=True)
    shutil.copytree(saved, cli.home)


def steps_of(cli: Cli, thread: str) -> int:
    """Steps recorded for `thread` (its `thread.stepped` events)."""
    ok(cli, "thread", "show", thread)  # and the thread reads
    return sum(1 for line in cli.log_bytes().splitlines()
               if json.loads(line)["type"] == "thread.stepped")


@pytest.mark.parametrize("part", [0, 1])
def test_a_step_killed_at_every_call(cli: Cli, tmp_path: Path, part: int) -> None:
    """`uwf thread step` (uwf-mock as the agent), killed before each of its calls: the
    step is either recorded whole or not at all, and the thread steps on."""
    saved, thread = template(tmp_path, cli)
    args = ["thread", "step", thread]
    calls = counted(cli, args)
    assert calls["fsync"] == 1, calls  # the result's: it covers the start and the nodes
    assert calls["rename"] >= 1, calls
    tried = points(calls)[part::2]
    kills = 0
    for call, k in tried:
        fresh(cli, saved)
        kills += killed_at(cli, call, k, args)
        check_store(cli)
        taken = steps_of(cli, thread)
        assert taken in (0, 1), (call, k)
        # The step after the kill in this process (its agent is still one): the kill
        # is what needs a process.
        stepped = Cli(cli.home, dict(cli.env, UWF_NOW=LATER)).run(*args)
        assert stepped.code == 0, (call, k, stepped.err)
        assert steps_of(cli, thread) == taken + 1, (call, k)
        check_store(cli)
    assert kills >= len(tried) * 3 // 4, (kills, tried)


def test_a_command_killed_at_every_call(cli: Cli, tmp_path: Path) -> None:
    """`uwf workflow put` of a new workflow (its nodes, then its event), killed before
    each of its calls: registered whole or not at all, and the next put succeeds."""
    saved, _ = template(tmp_path, cli)
    other = tmp_path / "other.yaml"
    text = EXAMPLE.read_text("utf-8").replace("name: solve-issue", "name: other", 1)
    # a new role schema too: the put writes two nodes
    other.write_text(text.replace("plan: {type: string}", "plan: {type: string, title: Plan}"),
                     "utf-8")
    args = ["workflow", "put", str(other)]
    calls = counted(cli, args)
    tried = points(calls)
    kills = 0
    for call, k in tried:
        fresh(cli, saved)
        kills += killed_at(cli, call, k, args)
        check_store(cli)
        names = {entry["name"] for entry in json.loads(ok(cli, "workflow", "list", "--json"))}
        assert "solve-issue" in names, (call, k)
        ok(cli, *args)
        names = {entry["name"] for entry in json.loads(ok(cli, "workflow", "list", "--json"))}
        assert "other" in names, (call, k)
        check_store(cli)
    assert kills >= len(tried) * 3 // 4, (kills, tried)
