"""Threads as a user expects them (issue 8 item 4): `status` and `currentRole` in
show, list and the step output; `thread list --workflow/--status`; `thread start
FILE`; thread ids that are not ULIDs are usage errors; a missing head fails closed.

Everything runs through the real `uwf` on a scratch store, as the docs show it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLE, Cli, snapshot
from tests.threadkit import (
    Kit,
    kill_quietly,
    make_kit,
    mock_config,
    one_line_error,
    popen_uwf,
    wait_for,
)
from uwf.cli import main as uwf_cli
from uwf.errors import UsageError
from uwf.ids import ULID_PATTERN, ULID_PREFIX_PATTERN
from uwf.invoker.spec import command_schemas
from uwf.store import Store
from uwf.threads import service as api_threads
from uwf.threads.routing import next_decision
from uwf.threads.service import THREAD_ID_PATTERN, list_threads, show_thread, start_thread
from uwf.workflows.service import put_workflow

GOOD_ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"  # well formed, never started


def put(kit: Kit, path: Path = EXAMPLE) -> str:
    """`workflow put`, tolerating warnings on stderr: the workflow's hash."""
    result = kit.uwf("workflow", "put", str(path))
    assert result.code == 0, result
    workflow: str = json.loads(result.out)["workflow"]
    return workflow


def renamed(kit: Kit, name: str, **changes: Any) -> Path:
    """The example workflow under another name (and other top-level fields)."""
    document = yaml.safe_load(EXAMPLE.read_text("utf-8"))
    return kit.workflow_file({**document, "name": name, **changes}, f"{name}.yaml")


def status(item: dict[str, Any]) -> tuple[str, str | None]:
    return item["status"], item["currentRole"]


# -- status and currentRole ----------------------------------------------------------

def test_status_and_current_role_through_a_whole_thread(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    workflow = put(kit)
    thread = kit.start()
    shown = kit.show(thread)
    assert shown == {"workflow": workflow, "thread": thread, "head": shown["head"],
                     "done": False, "status": "idle", "currentRole": "planner"}
    assert status(kit.ok("thread", "list")[0]) == ("idle", "planner")
    # After each step: the role the moderator routes to next; $END ends it, with none.
    expected = ["developer", "reviewer", "developer", "reviewer", None]
    for role in expected:
        stepped = kit.ok("thread", "step", thread)
        assert list(stepped) == ["workflow", "thread", "head", "done", "status", "currentRole"]
        assert stepped["currentRole"] == role
        assert stepped["status"] == ("ended" if role is None else "idle")
        assert kit.show(thread) == stepped
    assert kit.ok("thread", "list") == []
    assert status(kit.ok("thread", "list", "--all")[0]) == ("ended", None)


def test_run_output_keeps_the_seed_fields_first(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    put(kit)
    thread = kit.start()
    partial = kit.ok("thread", "run", thread, "--max-steps", "2")
    assert list(partial) == ["workflow", "thread", "head", "done", "status", "currentRole",
                             "steps"]
    assert (partial["status"], partial["currentRole"], partial["steps"]) == (
        "idle", "reviewer", 2)
    rest = kit.ok("thread", "run", thread)
    assert (rest["status"], rest["currentRole"], rest["done"]) == ("ended", None, True)


def test_a_step_in_flight_is_the_current_role(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    put(kit)
    thread = kit.start()
    started, go = tmp_path / "started", tmp_path / "go"
    agent = kit.agent("slow-mock", f"""
        import pathlib
        pathlib.Path({str(started)!r}).write_text("yes")
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        os.execvp("uwf-mock", ["uwf-mock", {str(kit.mock_script())!r}, THREAD, ROLE])
    """)
    step = popen_uwf(cli, "thread", "step", thread, "--agent", str(agent))
    try:
        wait_for(started)
        assert status(kit.show(thread)) == ("running", "planner")
        assert status(kit.ok("thread", "list")[0]) == ("running", "planner")
    finally:
        go.write_text("go")
        out, err = step.communicate(timeout=60)
        kill_quietly(step.pid)
    assert step.returncode == 0, err
    assert status(json.loads(out)) == ("idle", "developer")


def test_blocked_for_want_of_an_agent_names_that_role(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path, mock=False)
    put(kit)
    thread = kit.start()
    one_line_error(kit.step(thread), 1, "no agent configured")
    assert status(kit.show(thread)) == ("blocked", "planner")
    assert status(kit.ok("thread", "list", "--status", "blocked")[0]) == ("blocked", "planner")
    kit.write_config(mock_config(kit.mock_script()))
    assert status(kit.ok("thread", "step", thread)) == ("idle", "developer")


def test_no_transition_is_no_role_until_it_blocks_on_the_heads_role(
        cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    document = {
        "name": "odd-flow", "description": "A graph with a hole",
        "roles": {"worker": {"description": "d", "goal": "g", "capabilities": [],
                             "procedure": "p", "output": "o",
                             "meta": {"type": "object", "required": ["status"]}}},
        "graph": {"$START": {"_": "worker"}, "worker": {"ok": "$END"}},
    }
    put(kit, kit.workflow_file(document, "odd.yaml"))
    kit.write_config(mock_config(kit.mock_script({"worker": [{"status": "odd"}]}, "odd.yaml")))
    thread = kit.start("odd-flow")
    # The moderator cannot decide: no role, and no error from show or list.
    assert status(kit.ok("thread", "step", thread)) == ("idle", None)
    assert status(kit.show(thread)) == ("idle", None)
    assert status(kit.ok("thread", "list")[0]) == ("idle", None)
    one_line_error(kit.step(thread), 1, "no transition")
    assert status(kit.show(thread)) == ("blocked", "worker")


def test_killed_and_a_fork_at_the_last_step(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    put(kit)
    thread = kit.start()
    kit.ok("thread", "run", thread)
    last = kit.log(thread)[-1]["hash"]
    fork = kit.ok("thread", "fork", thread, "--at", last)["thread"]
    assert status(kit.show(fork)) == ("idle", None)  # routes to $END: no role
    killed = kit.ok("thread", "kill", fork)
    assert status(killed) == ("killed", None)
    assert kit.show(fork) == killed


# -- thread list --workflow / --status ----------------------------------------------

def test_list_filters_by_workflow_and_status(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    v1 = put(kit)
    ended = kit.start(prompt="ended")
    kit.ok("thread", "run", ended)
    killed = kit.start(prompt="killed")
    kit.ok("thread", "kill", killed)
    v2 = put(kit, renamed(kit, "solve-issue", description="Version two"))
    assert v2 != v1
    active_v2 = kit.start(prompt="active v2")
    other_hash = put(kit, renamed(kit, "other-flow"))
    other = kit.start("other-flow", prompt="other")
    kit.write_config({"agents": {}})
    blocked = kit.start(v1, prompt="blocked")  # by hash: the old version
    one_line_error(kit.step(blocked), 1, "no agent configured")

    def listed(*args: str) -> list[str]:
        return [item["thread"] for item in kit.ok("thread", "list", *args)]

    assert listed() == [active_v2, other, blocked]
    assert listed("--all") == [ended, killed, active_v2, other, blocked]
    # A name: every version of it. A hash: that version only.
    assert listed("--workflow", "solve-issue") == [active_v2, blocked]
    assert listed("--workflow", "solve-issue", "--all") == [ended, killed, active_v2, blocked]
    assert listed("--workflow", v1, "--all") == [ended, killed, blocked]
    assert listed("--workflow", v2) == [active_v2]
    assert listed("--workflow", other_hash) == [other]
    # Each status; `ended` or `killed` lists ended threads without --all.
    assert listed("--status", "active") == [active_v2, other]
    assert listed("--status", "blocked") == [blocked]
    assert listed("--status", "ended") == [ended]
    assert listed("--status", "killed") == [killed]
    assert listed("--status", "ended", "--status", "killed") == [ended, killed]
    assert listed("--status", "active", "--all") == [active_v2, other]  # --status decides
    assert listed("--status", "active", "--workflow", "solve-issue") == [active_v2]
    # Pages over the filtered rows.
    assert listed("--all", "--workflow", "solve-issue", "--limit", "2") == [ended, killed]
    assert listed("--all", "--workflow", "solve-issue", "--limit", "2", "--offset", "2") == [
        active_v2, blocked]
    assert listed("--status", "active", "--offset", "1") == [other]
    assert listed("--status", "active", "--limit", "0") == []
    # `done` is there when the list may hold ended threads.
    items = kit.ok("thread", "list", "--status", "ended")
    assert items[0] == {"thread": ended, "workflow": v1, "head": items[0]["head"], "done": True,
                        "status": "ended", "currentRole": None}
    assert "done" not in kit.ok("thread", "list", "--status", "active")[0]


def test_list_refuses_a_bad_status_or_an_unknown_workflow(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    put(kit)
    kit.start()
    log = cli.log_bytes()
    line = one_line_error(kit.uwf("thread", "list", "--status", "done"), 2,
                          "argument --status", "'done'", "active", "killed")
    assert line.endswith("see `uwf thread list --help`")
    one_line_error(kit.uwf("thread", "list", "--status", "active", "--status", "nope"), 2,
                   "'nope'")
    one_line_error(kit.uwf("thread", "list", "--workflow", "no-such-flow"), 1,
                   "no workflow named 'no-such-flow'", "uwf workflow list")
    assert kit.ok("thread", "list", "--workflow", "0000000000000") == []  # a hash: no threads
    assert cli.log_bytes() == log
    with pytest.raises(UsageError, match="unknown status 'done'"):
        list_threads(Store.open(cli.home), statuses=["done"])


def test_list_reads_nodes_for_the_page_only(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "store")
    put_workflow(store, EXAMPLE)
    threads = sorted(start_thread(store, "solve-issue", f"task {n}", str(tmp_path),
                                  settings=store.settings).thread
                     for n in range(6))  # listed in id order
    calls: list[str] = []
    real = next_decision

    def counted(cas: Any, state: Any) -> Any:
        calls.append(state.thread)
        return real(cas, state)

    monkeypatch.setattr(api_threads, "next_decision", counted)
    page = list_threads(store, limit=2, offset=3)
    assert [item.thread for item in page] == threads[3:5]
    assert [item.current_role for item in page] == ["planner", "planner"]
    assert calls == threads[3:5]


# -- thread start FILE -----------------------------------------------------------------

def test_start_from_a_workflow_file_in_one_command(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    started = kit.ok("thread", "start", str(EXAMPLE), "-p", "Fix the login bug")
    assert set(started) == {"workflow", "thread"}
    [registered] = kit.ok("workflow", "list")
    assert (registered["name"], registered["workflow"]) == ("solve-issue", started["workflow"])
    done = kit.ok("thread", "run", started["thread"])
    assert (done["done"], done["status"], done["steps"]) == (True, "ended", 5)
    # Again: the same workflow, already registered; a second thread of it.
    again = kit.ok("thread", "start", str(EXAMPLE), "-p", "Another bug")
    assert again["workflow"] == started["workflow"]
    assert len(kit.ok("workflow", "list")) == 1
    assert len(kit.events("workflow.registered")) == 1


def test_start_from_a_bad_or_missing_file_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    bad = kit.workflow_file({"name": "broken", "roles": {}, "graph": {}}, "broken.yaml")
    before = snapshot(cli.home)
    assert kit.uwf("thread", "start", str(bad), "-p", "x").code == 1
    one_line_error(kit.uwf("thread", "start", str(tmp_path / "nope.yaml"), "-p", "x"), 1,
                   "no workflow file", "nope.yaml")
    one_line_error(kit.uwf("thread", "start", "nope.yaml", "-p", "x"), 1,
                   "no workflow named 'nope.yaml'")
    # The prompt is checked before the file is registered.
    one_line_error(kit.uwf("thread", "start", str(EXAMPLE), "-p", " "), 2, "prompt is empty")
    assert snapshot(cli.home) == before


# -- thread ids ------------------------------------------------------------------------

# (In lower case, or its first characters, an id is accepted: tests/e2e/test_cli_conventions.py.)
BAD_IDS = ["abc", GOOD_ID + "0", "8" + GOOD_ID[1:], GOOD_ID[:-1] + "I", "thread/" + GOOD_ID,
           GOOD_ID[:5] + "-", ""]
COMMANDS = [
    ("thread", "step"), ("thread", "run"), ("thread", "show"), ("thread", "kill"),
    ("thread", "log"), ("thread", "fork", "--at", "0000000000000"),
    ("agent", "context", "planner"), ("agent", "submit", "planner", "--output", "-"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_a_thread_id_that_is_not_a_ulid_is_a_usage_error(cli: Cli, tmp_path: Path,
                                                         command: tuple[str, ...]) -> None:
    kit = make_kit(cli, tmp_path)
    put(kit)
    thread = kit.start()
    before = snapshot(cli.home)
    for bad in BAD_IDS:
        args = [*command[:2], bad, *command[2:]]
        line = one_line_error(kit.uwf(*args, stdin="{}"), 2, "argument THREAD",
                              "is not a thread id", "ULID", "uwf thread list --all")
        assert repr(bad) in line
    assert snapshot(cli.home) == before
    assert kit.show(thread)["status"] == "idle"


def test_the_cli_and_the_api_agree_on_thread_ids(tmp_path: Path) -> None:
    """The surfaces take an id in any case or its start (made whole before the call);
    the API, whole ids as ULIDs print."""
    schemas = command_schemas(uwf_cli.COMMANDS)
    for name in ("thread step", "thread show", "thread fork", "agent context", "agent submit"):
        assert schemas[name]["properties"]["thread"]["pattern"] == ULID_PREFIX_PATTERN, name
    assert THREAD_ID_PATTERN == ULID_PATTERN
    status_items = schemas["thread list"]["properties"]["status"]["anyOf"][0]["items"]
    assert status_items["enum"] == ["active", "blocked", "ended", "idle", "killed",
                                   "running", "waiting"]
    store = Store.open(tmp_path / "store")
    with pytest.raises(UsageError, match="is not a thread id"):
        show_thread(store, "abc")


# -- a missing head --------------------------------------------------------------------

def remove_node(home: Path, hash_: str) -> None:
    [path] = list((home / "cas").rglob(f"{hash_}.json"))
    path.unlink()


def test_a_missing_head_fails_closed(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    cli.env["UWF_NODES"] = "loose"  # the older layout: loose node files
    put(kit)
    stepped, fresh, ended = kit.start(prompt="one"), kit.start(prompt="two"), kit.start(
        prompt="three")
    head = kit.ok("thread", "step", stepped)["head"]
    start = kit.show(fresh)["head"]  # no step yet: the head is the StartNode
    ended_head = kit.ok("thread", "run", ended)["head"]
    assert kit.ok("registry", "verify")["heads"] == {"checked": 2, "missing": [],
                                                     "corrupt": []}
    for node in (head, start, ended_head):
        remove_node(cli.home, node)
    log = cli.log_bytes()
    for thread, node in ((stepped, head), (fresh, start), (ended, ended_head)):
        one_line_error(kit.uwf("thread", "show", thread), 1, thread, node,
                       "missing from the CAS", "json-cas verify --all")
    verified = kit.uwf("registry", "verify")
    assert verified.code == 1, verified
    shown = json.loads(verified.out)
    assert shown["ok"] is False
    # Open threads are checked; the ended thread's head is not (docs/registry.md).
    assert shown["heads"] == {"checked": 2, "missing": [{"thread": stepped, "head": head},
                                                        {"thread": fresh, "head": start}],
                              "corrupt": []}
    # registry show reads no node (its cost must not follow the threads in progress).
    assert kit.ok("registry", "show")["status"] == "valid"
    # The list shows them as missing, fails closed (exit 1), and lists them all the same
    # (tests/e2e/test_thread_list_damage.py).
    listed = kit.uwf("thread", "list")
    assert listed.code == 1, listed
    assert [(item["status"], item["currentRole"]) for item in json.loads(listed.out)] == [
        ("missing", None), ("missing", None)]
    assert cli.log_bytes() == log
    kit.ok("thread", "kill", stepped)
    kit.ok("thread", "kill", fresh)
    assert kit.ok("registry", "verify")["ok"] is True
