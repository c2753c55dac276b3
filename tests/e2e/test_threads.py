"""Threads through the real CLI: the solve-issue loop with uwf-mock, show/list,
views as disposable caches, kill, fork and run --max-steps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.conftest import EXAMPLE, Cli
from tests.threadkit import MOCK_SCRIPT, Kit, make_kit, one_line_error
from uwf.payload import to_payload
from uwf.store import Store
from uwf.threads.agent import agent_context
from uwf.threads.results import HistoryStep, StepContext, ThreadShown
from uwf.threads.service import show_thread

PROMPT = "Fix the login bug: empty passwords are accepted"
STEP_FIELDS = {"step", "hash", "role", "status", "output", "detail", "agent", "edgePrompt",
               "startedAtMs", "completedAtMs"}


def solved(kit: Kit) -> tuple[str, str]:
    """Register solve-issue, start a thread and run it to its end: (workflow, thread)."""
    workflow = kit.put_workflow()
    thread = kit.start(prompt=PROMPT)
    result = kit.ok("thread", "run", thread)
    assert result == {"workflow": workflow, "thread": thread, "head": result["head"],
                      "done": True, "status": "ended", "currentRole": None, "steps": 5}
    return workflow, thread


def test_solve_issue_loop_step_by_step(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    workflow = kit.put_workflow()
    thread = kit.start(prompt=PROMPT)
    definition = kit.ok("workflow", "show", "solve-issue")["definition"]
    start_event = kit.events("thread.started")[-1]
    start_hash = start_event["data"]["start"]
    assert start_event["subject"] == f"thread/{thread}"
    assert kit.show(thread) == {"workflow": workflow, "thread": thread, "head": start_hash,
                                "done": False, "status": "idle", "currentRole": "planner"}
    start_node = kit.node(start_hash)
    assert start_node["payload"] == {"workflow": workflow, "prompt": PROMPT}
    assert start_node["type"] == kit.schema_hash("StartNode")

    heads = []
    for number in range(1, 6):
        stepped = kit.ok("thread", "step", thread)
        assert set(stepped) == {"workflow", "thread", "head", "done", "status", "currentRole"}
        assert stepped["status"] == ("ended" if number == 5 else "idle")
        assert stepped["workflow"] == workflow
        assert stepped["thread"] == thread
        assert stepped["done"] == (number == 5)
        if number in (1, 5):
            assert kit.show(thread) == stepped
        heads.append(stepped["head"])
    assert len(set(heads)) == 5

    # A finished thread refuses another step and keeps its head.
    one_line_error(kit.step(thread), 1, "has ended")
    assert kit.show(thread)["head"] == heads[-1]

    log = kit.log(thread)
    expected = [
        ("planner", "ready", MOCK_SCRIPT["planner"][0], PROMPT),
        ("developer", "done", MOCK_SCRIPT["developer"][0],
         "Implement: Reject empty passwords in login()"),
        ("reviewer", "rejected", MOCK_SCRIPT["reviewer"][0],
         "Review the change to auth/login.py: login() now refuses empty passwords"),
        ("developer", "done", MOCK_SCRIPT["developer"][1],
         "Fix: Add a test for the empty password"),
        ("reviewer", "approved", MOCK_SCRIPT["reviewer"][1],
         "Review the change to auth/login.py,tests/test_login.py: added a test"),
    ]
    assert [entry["step"] for entry in log] == [1, 2, 3, 4, 5]
    assert [entry["hash"] for entry in log] == heads
    visits: dict[str, int] = {}
    step_type = kit.schema_hash("StepNode")
    text_type = kit.schema_hash("Text")
    previous = None
    for entry, (role, status, output, edge_prompt) in zip(log, expected, strict=True):
        assert set(entry) == STEP_FIELDS
        assert entry["role"] == role
        assert entry["status"] == status
        assert entry["output"] == output
        assert entry["agent"] == "uwf-mock"
        assert entry["edgePrompt"] == edge_prompt
        assert entry["startedAtMs"] <= entry["completedAtMs"]
        visits[role] = visits.get(role, 0) + 1
        node = kit.node(entry["hash"])
        assert node["type"] == step_type
        step = node["payload"]
        assert step["start"] == start_hash
        assert step["prev"] == previous
        assert step["role"] == role
        assert step["agent"] == "uwf-mock"
        assert step["detail"] == entry["detail"]
        assert step["edgePrompt"] == edge_prompt
        output_node = kit.node(step["output"])
        assert output_node["payload"] == output
        assert output_node["type"] == definition["roles"][role]["meta"]
        detail_node = kit.node(step["detail"])
        assert detail_node["type"] == text_type
        assert detail_node["payload"] == f"uwf-mock: {role}, visit {visits[role]}"
        previous = entry["hash"]

    # The events tell the same story: five starts, five steps, one end.
    started = kit.events("thread.step_started")
    assert [(e["data"]["role"], e["data"]["edgePrompt"], e["data"]["agent"]) for e in started] \
        == [(role, prompt, "mock") for role, _, _, prompt in expected]
    stepped_events = kit.events("thread.stepped")
    assert [(e["data"]["head"], e["data"]["role"], e["data"]["status"]) for e in stepped_events] \
        == [(h, role, status) for h, (role, status, _, _) in zip(heads, expected, strict=True)]
    assert [e["data"]["stepId"] for e in stepped_events] == \
        [e["data"]["stepId"] for e in started]
    ended = kit.events("thread.ended")
    assert [(e["subject"], e["data"]["reason"]) for e in ended] == [(f"thread/{thread}", "end")]
    # Written with the last step, atomically: the step's new nodes (its output, detail
    # and StepNode, as records) first, then its result, then the end.
    n = ended[0]["batch"][1]
    assert ended[0]["batch"] == [n, n]
    assert stepped_events[-1]["batch"] == [n - 1, n]
    assert stepped_events[-1]["seq"] == ended[0]["seq"] - 1
    records = {e["seq"]: e for e in kit.events("cas.node")}
    batch = [records[seq] for seq in range(ended[0]["seq"] - n + 1, ended[0]["seq"] - 1)]
    assert [e["batch"] for e in batch] == [[k, n] for k in range(1, n - 1)]
    assert {e["data"]["hash"] for e in batch} == {heads[-1], step["output"], step["detail"]}
    assert all(e["data"]["node"] == kit.node(e["data"]["hash"]) for e in batch)
    assert kit.events("thread.step_failed") == []
    assert kit.events("thread.blocked") == []

    assert kit.ok("log", "verify")["ok"] is True
    assert kit.ok("registry", "verify")["ok"] is True
    walked = cli.cas("walk", heads[-1])
    assert walked.code == 0, walked
    assert cli.cas("verify", "--all").code == 0


def test_thread_run_then_show_and_list(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    workflow, done_thread = solved(kit)
    head = kit.log(done_thread)[-1]["hash"]
    assert kit.show(done_thread) == {"workflow": workflow, "thread": done_thread, "head": head,
                                     "done": True, "status": "ended", "currentRole": None}
    active = kit.start(prompt="Second task")
    active_start = kit.show(active)["head"]
    assert kit.payload(active_start)["prompt"] == "Second task"
    assert kit.ok("thread", "list") == [{"thread": active, "workflow": workflow,
                                          "head": active_start, "status": "idle",
                                          "currentRole": "planner"}]
    assert kit.ok("thread", "list", "--all") == [
        {"thread": done_thread, "workflow": workflow, "head": head, "done": True,
         "status": "ended", "currentRole": None},
        {"thread": active, "workflow": workflow, "head": active_start, "done": False,
         "status": "idle", "currentRole": "planner"},
    ]
    assert kit.log(active) == []


def test_planner_unclear_ends_by_the_shorthand_edge(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    script = kit.mock_script({"planner": [{"status": "unclear", "question": "Which bug?"}]},
                             "unclear.yaml")
    kit.write_config({"agents": {"mock": {"command": "uwf-mock", "args": [str(script)]}},
                      "defaultAgent": "mock"})
    kit.put_workflow()
    thread = kit.start()
    stepped = kit.ok("thread", "step", thread)
    assert stepped["done"] is True
    assert [(e["role"], e["status"]) for e in kit.log(thread)] == [("planner", "unclear")]
    assert kit.ok("thread", "list") == []


def test_deleting_views_changes_no_output(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    workflow, thread = solved(kit)
    other = kit.start(prompt="Another")
    kit.ok("thread", "step", other)
    killed = kit.start(prompt="To kill")
    kit.ok("thread", "kill", killed, "--reason", "superseded")
    head = kit.show(thread)["head"]
    commands: list[tuple[str, ...]] = [
        ("thread", "show", thread), ("thread", "show", other), ("thread", "show", killed),
        ("thread", "list"), ("thread", "list", "--all"),
        ("thread", "log", thread), ("thread", "log", other),
        ("agent", "context", other, "developer"),
        ("workflow", "list"), ("workflow", "show", workflow),
        ("log", "tail", "-n", "1000"), ("thread", "show", "01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        ("thread", "step", thread), ("thread", "kill", killed),
        ("registry", "verify"), ("registry", "show"),
    ]

    def outputs() -> list[tuple[int, str, str]]:
        results = [kit.uwf(*command) for command in commands]
        results.append(cli.cas("walk", head))
        return [(r.code, r.out, r.err) for r in results]

    log_before = cli.log_bytes()
    before = outputs()
    assert cli.log_bytes() == log_before  # every command above is a read or a refusal
    shutil.rmtree(cli.home / "views")
    after = outputs()
    for command, old, new in zip([*commands, ("cas walk",)], before, after,
                                 strict=True):
        assert old == new, command
    assert cli.log_bytes() == log_before
    assert (cli.home / "views").exists()  # rebuilt by the first read


def test_kill_ends_a_thread_and_keeps_its_history(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    workflow = kit.put_workflow()
    thread = kit.start()
    first = kit.ok("thread", "step", thread)
    killed = kit.ok("thread", "kill", thread, "--reason", "superseded by #43")
    assert killed == {"workflow": workflow, "thread": thread, "head": first["head"],
                      "done": True, "status": "killed", "currentRole": None}
    ended = kit.events("thread.ended")
    assert [(e["subject"], e["data"]) for e in ended] == [
        (f"thread/{thread}", {"reason": "killed", "note": "superseded by #43"})]
    assert kit.show(thread) == killed
    assert kit.ok("thread", "list") == []
    assert kit.ok("thread", "list", "--all")[0]["done"] is True
    assert [e["role"] for e in kit.log(thread)] == ["planner"]
    log = cli.log_bytes()
    one_line_error(kit.step(thread), 1, thread, "has ended")
    one_line_error(kit.uwf("thread", "kill", thread), 1, "already ended")
    assert cli.log_bytes() == log
    assert kit.ok("log", "verify")["ok"] is True


def test_fork_at_an_earlier_step_continues_from_there(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    workflow, thread = solved(kit)
    original = kit.log(thread)
    original_show = kit.show(thread)
    at = original[1]["hash"]  # the first developer step
    forked = kit.ok("thread", "fork", thread, "--at", at)
    fork = forked["thread"]
    assert forked == {"workflow": workflow, "thread": fork, "head": at, "forkOf": thread}
    assert fork != thread
    assert kit.show(fork) == {"workflow": workflow, "thread": fork, "head": at, "done": False,
                              "status": "idle", "currentRole": "reviewer"}
    assert kit.log(fork) == original[:2]
    started = kit.events("thread.started")[-1]
    assert started["subject"] == f"thread/{fork}"
    assert started["data"]["start"] == kit.node(at)["payload"]["start"]
    assert [t["thread"] for t in kit.ok("thread", "list")] == [fork]

    stepped = kit.ok("thread", "step", fork)
    assert stepped["done"] is False
    log = kit.log(fork)
    assert len(log) == 3
    assert log[2]["role"] == "reviewer"
    assert log[2]["edgePrompt"] == \
        "Review the change to auth/login.py: login() now refuses empty passwords"
    assert kit.payload(log[2]["hash"])["prev"] == at
    assert log[2]["output"] == MOCK_SCRIPT["reviewer"][0]  # the fork's first review
    assert kit.ok("thread", "run", fork)["done"] is True
    assert [e["role"] for e in kit.log(fork)] == \
        ["planner", "developer", "reviewer", "developer", "reviewer"]
    # The original thread is untouched.
    assert kit.log(thread) == original
    assert kit.show(thread) == original_show
    assert kit.ok("log", "verify")["ok"] is True
    assert kit.ok("registry", "verify")["ok"] is True


def test_fork_refuses_a_hash_outside_the_chain(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    _, thread = solved(kit)
    other = kit.start(prompt="Other")
    foreign = kit.ok("thread", "step", other)["head"]
    log = cli.log_bytes()
    one_line_error(kit.uwf("thread", "fork", thread, "--at", foreign), 1, foreign,
                   "not a step of thread")
    one_line_error(kit.uwf("thread", "fork", thread, "--at", "not-a-hash!"), 1)
    assert cli.log_bytes() == log


def test_run_max_steps_stops_early_and_resumes(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    workflow = kit.put_workflow()
    thread = kit.start()
    partial = kit.ok("thread", "run", thread, "--max-steps", "2")
    assert partial["steps"] == 2
    assert partial["done"] is False
    assert partial["workflow"] == workflow
    log = kit.log(thread)
    assert [e["role"] for e in log] == ["planner", "developer"]
    assert partial["head"] == log[-1]["hash"]
    rest = kit.ok("thread", "run", thread, "--max-steps", "10")
    assert rest["steps"] == 3
    assert rest["done"] is True
    assert len(kit.log(thread)) == 5
    again = kit.ok("thread", "run", thread)
    assert again == {**rest, "steps": 0}
    assert kit.uwf("thread", "run", thread, "--max-steps", "0").code == 2


def test_thread_start_records_the_repo(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    repo = tmp_path / "somewhere"
    repo.mkdir()
    thread = kit.ok("thread", "start", "solve-issue", "-p", "x", "--repo", str(repo))["thread"]
    event = kit.events("thread.started")[-1]
    assert event["subject"] == f"thread/{thread}"
    assert event["data"]["repo"] == str(repo.resolve())
    assert len(thread) == 26


def test_thread_start_by_workflow_hash(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    workflow = kit.put_workflow()
    started = kit.ok("thread", "start", workflow, "-p", "by hash")
    assert started["workflow"] == workflow
    assert json.loads(kit.uwf("thread", "show", started["thread"]).out)["done"] is False


def test_reregistering_keeps_running_threads_on_their_hash(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    old = kit.put_workflow()
    running = kit.start(prompt="Old graph")
    kit.ok("thread", "step", running)
    document = yaml.safe_load(EXAMPLE.read_text())
    document["graph"]["planner"]["ready"]["prompt"] = "Build: {{plan}}"
    new = kit.put_workflow(kit.workflow_file(document, "v2.yaml"))
    assert new != old
    fresh = kit.start(prompt="New graph")
    assert kit.show(fresh)["workflow"] == new
    kit.ok("thread", "run", running, "--max-steps", "1")
    kit.ok("thread", "run", fresh, "--max-steps", "2")
    assert kit.show(running)["workflow"] == old
    assert kit.log(running)[1]["edgePrompt"] == "Implement: Reject empty passwords in login()"
    assert kit.log(fresh)[1]["edgePrompt"] == "Build: Reject empty passwords in login()"


def test_services_return_the_typed_results_the_cli_prints(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start(prompt=PROMPT)
    kit.ok("thread", "step", thread)
    store = Store.open(cli.home)
    try:
        shown = show_thread(store, thread)
        context = agent_context(store, thread, "developer", settings=store.settings)
    finally:
        store.close()
    assert isinstance(shown, ThreadShown)
    assert to_payload(shown) == kit.ok("thread", "show", thread)
    assert isinstance(context, StepContext)
    assert isinstance(context.history[0], HistoryStep)
    assert to_payload(context) == kit.ok("agent", "context", thread, "developer")
