"""docs/hosts.md's "Two hosts, end to end", run as two hosts would: two environments
that share nothing but the store's URL (their own HOME, config and agents, working
and temporary folders), a worker on each at once, against a real server."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import BIN, EXAMPLE, Cli
from tests.threadkit import MOCK_SCRIPT

pytest.importorskip("psycopg")  # the `postgres` extra; `dev` installs it, so CI never skips


def host(name: str, url: str, tmp_path: Path) -> Cli:
    """A host: its own home, config (uwf-mock as every role's agent), temp folder and
    working folder; the URL is all it shares."""
    root = tmp_path / name
    config = root / "home" / ".config" / "uwf"
    config.mkdir(parents=True)
    (config / "mock.yaml").write_text(yaml.safe_dump(MOCK_SCRIPT), "utf-8")
    (config / "config.yaml").write_text(yaml.safe_dump({
        "defaultAgent": "mock", "agents": {"mock": {"command": "uwf-mock",
                                                   "args": ["mock.yaml"]}}}), "utf-8")
    (root / "tmp").mkdir()
    (root / "work").mkdir()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("UWF_", "XDG_", "PG"))}
    env.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"), UWF_HOME=url,
               UWF_DURABILITY="none", PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    return Cli(root / "unused", env)  # its commands in-process; its worker a process


def test_two_hosts_share_one_store(pg_url: str, tmp_path: Path) -> None:
    build1, build2 = host("build-1", pg_url, tmp_path), host("build-2", pg_url, tmp_path)
    repo = tmp_path / "srv" / "app"  # the same checkout path on both hosts
    repo.mkdir(parents=True)
    assert build1.run("workflow", "put", str(EXAMPLE)).code == 0
    assert build1.run("sched", "policy", "set", "--max-concurrent", "2").code == 0
    for n, label in enumerate(["build-1", "build-2"] * 2):
        added = build1.run("queue", "add", "--workflow", "solve-issue", "-p", f"Fix #{n}",
                           "--repo", str(repo), "--session", label)
        assert added.code == 0, added.err
    workers = {name: subprocess.Popen(
        [str(BIN / "uwf"), "worker", "--session", name, "--poll", "1", "--json"],
        env=cli.env, cwd=cli.env["HOME"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for name, cli in (("build-1", build1), ("build-2", build2))}
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            done = json.loads(build2.run("queue", "list", "--status", "completed",
                                         "--json").out)["entries"]
            if len(done) == 4:
                break
            time.sleep(0.5)
    finally:
        for worker in workers.values():
            worker.terminate()
    ends = {}
    for name, worker in workers.items():
        out, err = worker.communicate(timeout=60)
        assert "Traceback" not in err, err
        ends[name] = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(done) == 4, (done, ends)
    entries = {entry["id"]: entry for entry in done}
    for name, results in ends.items():  # each host ran its own pool's entries, to the end
        assert len(results) == 2, results
        for result in results:
            assert result["outcome"] == "completed", result
            assert entries[result["id"]]["session"] == name
    for cli in (build1, build2):  # every host sees the same store, and it verifies
        assert json.loads(cli.run("log", "verify", "--json").out)["ok"] is True
        assert cli.run("registry", "verify").code == 0
    assert not (tmp_path / "build-1" / "unused").exists()
    assert not (tmp_path / "build-2" / "unused").exists()
    for name in ("build-1", "build-2"):  # staging folders were made and removed there
        assert not list((tmp_path / name / "tmp").glob("uwf-steps-*/*"))
        assert list((tmp_path / name / "tmp").glob("uwf-steps-*"))
