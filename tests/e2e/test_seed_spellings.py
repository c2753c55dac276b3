"""The seeds' own spellings of `queue add` (issue 17 item 6): the run registry's
`--app` and `--runId`, the job registry's id-only output for `ID=$(uwf queue add
...)`, and a repo folder that does not exist refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import BIN, Cli, Result
from tests.queuekit import Queue


def test_app_and_run_id_are_the_run_registry_spellings(q: Queue, tmp_path: Path) -> None:
    entry = q.ok("queue", "add", "--app", "solve-issue", "-p", "Fix it")["entry"]
    assert entry["workflow"] == "solve-issue"
    run = q.ok("thread", "start", "solve-issue", "-p", "An old run", "--repo",
               str(tmp_path))["thread"]
    again = q.ok("queue", "add", "--runId", run)["entry"]
    assert again["run"] == run


def test_quiet_prints_only_the_id_for_a_shell_variable(q: Queue, cli: Cli) -> None:
    script = (f'ID=$({BIN}/uwf queue add --app solve-issue -p "Fix it" --quiet) && '
              f'{BIN}/uwf queue show "$ID" --json')
    done = subprocess.run(["bash", "-c", script], env=cli.env, capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"status": "ready"' in done.stdout
    alone = q.text("queue", "add", "--app", "solve-issue", "-p", "Fix it", "--id-only")
    assert q.entry(alone)["id"] == alone
    batch = q.batch(Path(cli.home).parent / "b.jsonl",
                    [{"workflow": "solve-issue", "prompt": p} for p in ("a", "b")])
    ids = q.text("queue", "add", "--batch", str(batch), "--quiet").splitlines()
    assert [q.entry(entry_id)["prompt"] for entry_id in ids] == ["a", "b"]


def test_a_repo_folder_that_does_not_exist_is_refused(q: Queue, tmp_path: Path) -> None:
    error = q.refused(2, "queue", "add", "--app", "solve-issue", "-p", "x", "--repo",
                      str(tmp_path / "nowhere"))
    assert "does not exist" in error
    batch = q.batch(tmp_path / "b.jsonl", [
        {"workflow": "solve-issue", "prompt": "x", "repo": str(tmp_path)},
        {"workflow": "solve-issue", "prompt": "y", "repo": str(tmp_path / "nowhere")}])
    error = q.refused(2, "queue", "add", "--batch", str(batch))
    assert "line 2" in error
    assert "does not exist" in error


def test_run_show_scope_repo_finds_only_this_repos_runs(q: Queue, cli: Cli,
                                                        tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    for repo in (here, there):
        (repo / ".git").mkdir(parents=True)
    run = q.ok("thread", "start", "solve-issue", "-p", "x", "--repo", str(there))["thread"]

    def show(cwd: Path, *args: str) -> Result:
        return cli.call("uwf", ["run", "show", run, "--json", *args], b"", cwd=cwd)

    assert show(here).code == 0  # --scope home (the default): any repo
    refused = show(here, "--scope", "repo")
    assert refused.code == 1
    assert refused.err.count("\n") == 1
    assert f"is of repo {there}" in refused.err
    found = show(there, "--scope", "repo")
    assert found.code == 0, found.err
    assert '"found": true' in found.out


def test_a_repo_named_only_by_queue_entries_is_one_of_the_stores_repos(
        q: Queue, tmp_path: Path) -> None:
    q.ok("queue", "add", "--app", "solve-issue", "-p", "x", "--repo", str(tmp_path))
    from uwf.cli.main import _registry_panel  # what a terminal shows

    shown = q.ok("registry", "show")
    assert shown["runs"]["repos"] == [{"repo": str(tmp_path), "runs": 0, "queueEntries": 1}]
    assert f"{tmp_path}  0 runs, 1 queue entry" in _registry_panel(shown)
