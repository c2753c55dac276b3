"""`registry show` on the run index: runs per lifecycle and per repo (kept counts),
the runs a stale view has not folded yet and the repo scope; `registry verify` naming
the open runs whose head node is gone or damaged (show reads no node: its cost must
not grow with the threads in progress)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.threadkit import Kit, make_kit


def registry(kit: Kit, *args: str, cwd: Path | None = None) -> dict[str, Any]:
    if cwd is None:
        shown: dict[str, Any] = kit.ok("registry", "show", *args)
        return shown
    import json
    import subprocess

    done = subprocess.run(["uwf", "registry", "show", *args], cwd=cwd, env=kit.cli.env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = json.loads(done.stdout)
    return loaded


def verified(kit: Kit, code: int) -> dict[str, Any]:
    """`uwf registry verify`, expecting exit `code` (1: a difference or a damaged head)
    and nothing on stderr; its JSON."""
    result = kit.uwf("registry", "verify")
    assert (result.code, result.err) == (code, ""), result
    loaded: dict[str, Any] = json.loads(result.out)
    return loaded


def test_runs_per_lifecycle_and_repo(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    repo_a, repo_b = tmp_path / "a", tmp_path / "b"
    for repo in (repo_a, repo_b):
        (repo / ".git").mkdir(parents=True)
    done = kit.ok("thread", "start", "solve-issue", "-p", "one", "--repo", str(repo_a))
    kit.ok("thread", "run", done["thread"])
    killed = kit.ok("thread", "start", "solve-issue", "-p", "two", "--repo", str(repo_a))
    kit.ok("thread", "kill", killed["thread"])
    kit.ok("thread", "start", "solve-issue", "-p", "three", "--repo", str(repo_b))
    kit.ok("run", "archive", killed["thread"], "--reason", "noise")

    runs = registry(kit)["runs"]
    assert runs["lifecycles"] == {"cancelled": 1, "completed": 1, "queued": 1}
    assert runs["archived"] == 1
    assert runs["repos"] == [{"repo": str(repo_a), "runs": 2, "queueEntries": 0},
                             {"repo": str(repo_b), "runs": 1, "queueEntries": 0}]
    assert (runs["staleRuns"], runs["staleCount"]) == ([], 0)
    assert "missingRuns" not in runs  # the heads are verify's to check
    assert "heads" not in registry(kit)
    checked = verified(kit, 0)
    assert (checked["ok"], checked["differences"]) == (True, [])
    assert checked["heads"] == {"checked": 1, "missing": [], "corrupt": []}  # the open one

    scoped = registry(kit, "--scope", "repo", cwd=repo_b)["runs"]
    assert scoped["lifecycles"] == {"queued": 1}
    assert scoped["repos"] == [{"repo": str(repo_b), "runs": 1, "queueEntries": 0}]


def test_a_stale_view_names_the_runs_it_has_not_folded(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    first = kit.start()
    saved = tmp_path / "views-before"
    shutil.copytree(kit.home / "views", saved)
    second = kit.start(prompt="another")
    kit.ok("thread", "kill", first)
    shutil.rmtree(kit.home / "views")
    shutil.copytree(saved, kit.home / "views")  # the views as they were, two events ago

    shown = registry(kit)
    assert shown["views"]["runs"]["status"] == "stale (2 events behind)"
    assert shown["runs"]["staleRuns"] == [second, first]  # in the order the log names them
    assert shown["runs"]["staleCount"] == 2
    kit.ok("registry", "refresh")
    assert registry(kit)["runs"]["staleRuns"] == []


def test_a_run_whose_head_is_gone_is_a_missing_run(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    cli.env["UWF_NODES"] = "loose"  # the older layout: loose node files
    kit.put_workflow()
    thread = kit.start()
    assert kit.step(thread).code == 0
    head = kit.show(thread)["head"]
    (kit.home / "cas" / head[:2] / f"{head}.json").unlink()
    log = kit.cli.log_bytes()

    checked = verified(kit, 1)
    assert checked["ok"] is False
    assert checked["differences"] == []  # the views are right; the CAS lost the node
    assert checked["heads"] == {"checked": 1, "missing": [{"thread": thread, "head": head}],
                                "corrupt": []}
    run = kit.ok("run", "show", thread)
    assert (run["found"], run["freshness"]) == (False, "missing")
    assert run["missingNodes"] == [head]
    assert "run" not in run  # only the last-known record, flagged
    assert run["lastKnown"]["freshness"] == "missing"
    # Not resumed: it fails closed, naming the node.
    refused = kit.uwf("run", "resume", thread)
    assert refused.code == 1
    assert head in refused.err
    # registry show reads no node: the views are as valid as they were.
    assert registry(kit)["status"] == "valid"
    assert kit.cli.log_bytes() == log


def test_a_repo_given_by_a_subfolder_is_its_git_top_level(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    (tmp_path / "g" / ".git").mkdir(parents=True)
    (tmp_path / "g" / "sub").mkdir()
    thread = kit.ok("thread", "start", "solve-issue", "-p", "x", "--repo",
                    str(tmp_path / "g" / "sub"))["thread"]
    assert kit.ok("run", "show", thread)["run"]["repo"] == str(tmp_path / "g")
    found = kit.ok("run", "search", "--repo", str(tmp_path / "g" / "sub"))
    assert [run["runId"] for run in found["runs"]] == [thread]


def test_a_run_event_before_its_thread_started_is_named_by_log_verify(tmp_path: Path) -> None:
    from uwf.audit.verify import verify
    from uwf.engine.events import NewEvent
    from uwf.engine.journal import Outcome
    from uwf.runs.events import RunArchived
    from uwf.store import Store

    store = Store.open(tmp_path / "store")
    try:
        orphan = "thread/01M8AC27W7AJDTCXCNJFP9S2QM"
        store.journal.write(lambda _views: Outcome([NewEvent(orphan, RunArchived("x"))], None))
        problems = verify(store).problems
    finally:
        store.close()
    assert [p.problem for p in problems] == [f"run.archived before {orphan} started"]


def test_a_page_beyond_sqlite_integers_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    for args in (("thread", "list", "--limit", str(2**63)), ("history", "--offset", str(2**64))):
        result = kit.uwf(*args)
        assert result.code == 2, result
        assert len(result.err.splitlines()) == 1, result.err


def _damage(path: Path, how: str) -> None:
    """A node file edited in place (a value changed, still valid JSON of a node), or
    replaced with bytes that are no node at all."""
    if how == "edited":
        node = json.loads(path.read_text("utf-8"))
        payload = node["payload"]
        key = "prompt" if "prompt" in payload else "role"
        payload[key] = str(payload[key]) + " (edited)"
        path.write_text(json.dumps(node), "utf-8")
    else:
        path.write_bytes(b"\x00garbage, not a node\n")


@pytest.mark.parametrize("how", ["edited", "garbage"])
@pytest.mark.parametrize("which", ["head", "start"])
def test_a_run_whose_node_is_damaged_is_corrupt_never_valid(
        cli: Cli, tmp_path: Path, which: str, how: str) -> None:
    """SPEC §1.6 and the run-registry seed: an unreadable run state is treated as
    missing, never as success. A node edited in place is not "valid" because its file
    still exists: it is `corrupt`, told apart from `missing`, with the next action."""
    kit = make_kit(cli, tmp_path)
    cli.env["UWF_NODES"] = "loose"  # the older layout: loose node files
    kit.put_workflow()
    thread = kit.start()
    assert kit.step(thread).code == 0
    (started,) = kit.events("thread.started")
    node = kit.show(thread)["head"] if which == "head" else started["data"]["start"]
    _damage(kit.home / "cas" / node[:2] / f"{node}.json", how)

    run = kit.ok("run", "show", thread)
    assert (run["found"], run["freshness"]) == (False, "corrupt")
    assert run["corruptNodes"] == [node]
    assert run["missingNodes"] == []
    assert "run" not in run
    assert run["lastKnown"]["freshness"] == "corrupt"
    assert "restore the nodes" in run["nextAction"]
    listed = kit.ok("run", "list")["runs"]
    assert [item["freshness"] for item in listed] == ["corrupt"]
    if which == "head":  # registry verify checks the head of every open thread
        checked = verified(kit, 1)
        assert checked["ok"] is False
        assert checked["heads"] == {"checked": 1, "missing": [],
                                    "corrupt": [{"thread": thread, "head": node}]}
    else:  # not a head: json-cas verify --all finds it; the run fails closed (above)
        assert verified(kit, 0)["heads"] == {"checked": 1, "missing": [], "corrupt": []}
    # Not resumed (nor rerun): it fails closed.
    refused = kit.uwf("run", "resume", thread)
    assert refused.code == 1
    assert "damaged" in refused.err


@pytest.mark.parametrize("how", ["deleted", "edited", "garbage"])
@pytest.mark.parametrize("which", ["first step", "head's output", "head's detail"])
def test_a_run_whose_earlier_step_or_output_is_damaged_is_never_found_valid(
        cli: Cli, tmp_path: Path, which: str, how: str) -> None:
    """Issue 32: a damaged or deleted earlier StepNode, or the head's output or detail
    node, read `found: true, valid` in `run show` while `thread log` failed. `run show`
    checks every node `thread log` reads: it fails closed when that fails."""
    kit = make_kit(cli, tmp_path)
    cli.env["UWF_NODES"] = "loose"  # the older layout: loose node files
    kit.put_workflow()
    thread = kit.start()
    assert kit.step(thread).code == 0
    assert kit.step(thread).code == 0
    head = kit.show(thread)["head"]
    step = json.loads((kit.home / "cas" / head[:2] / f"{head}.json").read_text("utf-8"))
    payload = step["payload"]
    node = {"first step": payload["prev"], "head's output": payload["output"],
            "head's detail": payload["detail"]}[which]
    path = kit.home / "cas" / node[:2] / f"{node}.json"
    if how == "deleted":
        path.unlink()
    elif how == "edited" and which != "first step":  # a Text node: its string edited
        text = json.loads(path.read_text("utf-8"))
        text["payload"] = json.dumps(text["payload"]) + " (edited)"
        path.write_text(json.dumps(text), "utf-8")
    else:
        _damage(path, how)
    if which != "head's detail":  # thread log names the detail node, does not read it
        assert kit.uwf("thread", "log", thread).code != 0  # what run show must agree with

    run = kit.ok("run", "show", thread)
    freshness = "missing" if how == "deleted" else "corrupt"
    assert (run["found"], run["freshness"]) == (False, freshness)
    assert run["missingNodes" if how == "deleted" else "corruptNodes"] == [node]
    assert "run" not in run
    refused = kit.uwf("run", "resume", thread)
    assert refused.code == 1
    assert node in refused.err
