"""The seed's condition routing: named JSONata conditions and list-form graph entries.

The moderator's rules in Python first (first holding entry wins, `null` is the
fallback, only boolean true holds, failures name the condition); then the seed's
example workflow through the real CLI with uwf-mock, to `$END`, and threads that
block because no condition holds or one fails.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BIN, ROOT, Cli
from tests.threadkit import Kit, make_kit, mock_config, one_line_error
from uwf.language.conditions import TIMEOUT_MS, holds, scope_of
from uwf.language.moderator import END, START, ConditionFailed, NoTransition, evaluate

SEED = ROOT / "examples" / "seed-conditions.yaml"
SEED_MOCK = ROOT / "examples" / "mock-seed-conditions.yaml"
PROMPT = "Fix the login bug"

CONDITIONS = {
    "needsClarification": {"description": "", "expression":
                           "$exists(steps[-1].output.needsClarification)"},
    "notApproved": {"description": "", "expression": "steps[-1].output.approved = false"},
    "broken": {"description": "", "expression": '$error("the output is odd")'},
    "text": {"description": "", "expression": '"yes"'},
    "number": {"description": "", "expression": "1"},
    "list": {"description": "", "expression": "[true]"},
    "nothing": {"description": "", "expression": "steps[-1].output.missing"},
    "empty": {"description": "", "expression": "$count(steps) = 0 and lastOutput = null"},
}


def entry(role: str, condition: str | None, prompt: str = "") -> dict[str, Any]:
    return {"role": role, "condition": condition, "prompt": prompt}


def step(role: str, output: Any) -> dict[str, Any]:
    return {"role": role, "status": "_", "output": output, "agent": "test"}


def decide(edges: list[dict[str, Any]], output: Any, last_role: str = "reviewer",
           history: list[dict[str, Any]] | None = None) -> tuple[str, str, str]:
    steps = history if history is not None else [step(last_role, output)]
    decision = evaluate({last_role: edges}, last_role, output, "the task",
                        conditions=CONDITIONS, steps=lambda: steps)
    return decision.role, decision.status, decision.prompt


# -- the moderator ------------------------------------------------------------------

def test_the_first_holding_entry_wins_and_its_condition_is_the_status() -> None:
    edges = [entry("developer", "notApproved", "Fix: {{comments}}"), entry(END, None, "Done")]
    assert decide(edges, {"approved": False, "comments": "add a test"}) == (
        "developer", "notApproved", "Fix: add a test")
    assert decide(edges, {"approved": True}) == (END, "_", "Done")


def test_entries_are_tried_in_order() -> None:
    edges = [entry("a", "notApproved"), entry("b", "notApproved"), entry("c", None)]
    assert decide(edges, {"approved": False})[0] == "a"
    assert decide([entry("c", None), entry("a", "notApproved")], {"approved": False})[0] == "c"


@pytest.mark.parametrize("condition", ["text", "number", "list", "nothing"])
def test_only_boolean_true_holds(condition: str) -> None:
    edges = [entry("yes", condition), entry("no", None)]
    assert decide(edges, {"approved": True})[:2] == ("no", "_")


def test_start_sees_no_steps_and_a_null_last_output() -> None:
    edges = [entry("planner", "empty", "{{prompt}}")]
    decision = evaluate({START: edges}, START, None, "the task", conditions=CONDITIONS)
    assert (decision.role, decision.status, decision.prompt) == ("planner", "empty", "the task")


def test_conditions_read_the_whole_history() -> None:
    history = [step("reviewer", {"approved": False}), step("developer", {"files": []}),
               step("reviewer", {"approved": True})]
    conditions = {"rejectedBefore": {"expression": "steps[role = 'reviewer'][0].output."
                                                   "approved = false and $count(steps) = 3"}}
    decision = evaluate({"reviewer": [entry("again", "rejectedBefore")]}, "reviewer",
                        {"approved": True}, "the task", conditions=conditions,
                        steps=lambda: history)
    assert (decision.role, decision.status) == ("again", "rejectedBefore")


def test_the_history_is_read_only_when_a_condition_needs_it() -> None:
    def unread() -> list[dict[str, Any]]:
        raise AssertionError("the history was read")

    decision = evaluate({"developer": [entry("reviewer", None)]}, "developer", {}, "the task",
                        conditions=CONDITIONS, steps=unread)
    assert decision.role == "reviewer"


def test_no_holding_entry_is_no_transition_naming_the_conditions() -> None:
    with pytest.raises(NoTransition) as caught:
        decide([entry("developer", "notApproved"), entry("x", "needsClarification")],
               {"approved": True})
    assert caught.value.what == ('no transition for role "reviewer": no condition holds '
                                 "(notApproved, needsClarification)")
    assert caught.value.status is None
    assert not isinstance(caught.value, ConditionFailed)


def test_a_failing_condition_blocks_naming_it() -> None:
    with pytest.raises(ConditionFailed) as caught:
        decide([entry("developer", "broken"), entry(END, None)], {"approved": True})
    assert caught.value.what.startswith('condition "broken" of role "reviewer" failed: '
                                        "the output is odd")
    assert isinstance(caught.value, NoTransition)  # blocks the thread like a missing edge


def test_a_condition_the_workflow_does_not_define_fails_closed() -> None:
    with pytest.raises(ConditionFailed, match=r'condition "ghost" .* does not define it'):
        decide([entry("developer", "ghost")], {})


def test_runaway_recursion_is_stopped() -> None:
    deep = "($f := function($n) { $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100000)) = 0"
    with pytest.raises(ConditionFailed, match='condition "deep" of role "r" failed'):
        evaluate({"r": [entry("x", "deep")]}, "r", {}, "t",
                 conditions={"deep": {"expression": deep}}, steps=list)


def test_an_endless_loop_is_stopped_by_the_time_limit() -> None:
    # Tail calls run in constant depth, so only the clock stops this one.
    endless = "($f := function($n) { $f($n + 1) }; $f(0))"
    with pytest.raises(ConditionFailed, match="D1012") as caught:
        evaluate({"r": [entry("x", "endless")]}, "r", {}, "t",
                 conditions={"endless": {"expression": endless}}, steps=list)
    assert f"{TIMEOUT_MS} milliseconds" in caught.value.what


def test_evaluation_leaves_the_history_as_it_was() -> None:
    history = [step("b", {"n": 2, "items": [3, 1, 2]}), step("a", {"n": 1, "items": []})]
    before = json.dumps(history)
    scope = scope_of(history, "the task")
    assert holds("$count($sort(steps, function($l, $r) { $l.role > $r.role })) = 2", scope)
    assert holds("$count(steps ~> |output|{'n': 0}, ['items']|) = 2", scope)
    assert json.dumps(history) == before


def test_routing_by_status_never_imports_jsonata_and_conditions_keep_the_recursion_limit(
) -> None:
    code = (
        "import sys\n"
        "from uwf.language.moderator import evaluate\n"
        "limit = sys.getrecursionlimit()\n"
        "evaluate({'r': {'ok': {'role': 'x', 'prompt': ''}}}, 'r', {'status': 'ok'}, 't')\n"
        "print('jsonata' in sys.modules)\n"
        "evaluate({'r': [{'role': 'x', 'condition': 'c', 'prompt': ''}]}, 'r', {}, 't',\n"
        "         conditions={'c': {'expression': 'true'}}, steps=list)\n"
        "print('jsonata' in sys.modules, sys.getrecursionlimit() == limit)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.split() == ["False", "True", "True"]


# -- through the CLI ------------------------------------------------------------------

def seeded(cli: Cli, tmp_path: Path, script: dict[str, list[dict[str, Any]]] | None = None
           ) -> Kit:
    """A kit whose uwf-mock plays examples/mock-seed-conditions.yaml (or `script`)."""
    kit = make_kit(cli, tmp_path, mock=False)
    path = kit.mock_script(script, "seed-mock.yaml") if script is not None else SEED_MOCK
    kit.write_config(mock_config(path))
    return kit


def test_the_seed_workflow_runs_to_end_with_a_rejection_and_the_fallbacks(
        cli: Cli, tmp_path: Path) -> None:
    kit = seeded(cli, tmp_path)
    workflow = kit.put_workflow(SEED)  # no warnings: stderr stays empty
    definition = kit.ok("workflow", "show", workflow)["definition"]
    assert definition["graph"]["reviewer"] == [
        {"role": "developer", "condition": "notApproved", "prompt": "Fix: {{comments}}"},
        {"role": END, "condition": None, "prompt": ""},
    ]
    assert definition["conditions"]["notApproved"] == {
        "description": "Reviewer rejected the implementation",
        "expression": "steps[-1].output.approved = false",
    }
    thread = kit.start("solve-issue-conditions", PROMPT)
    results = [kit.ok("thread", "step", thread) for _ in range(5)]
    assert [result["done"] for result in results] == [False, False, False, False, True]
    log = kit.log(thread)
    assert [(s["role"], s.get("edgePrompt", "")) for s in log] == [
        ("planner", PROMPT),                                     # $START's fallback
        ("developer", ""),                                       # the planner's fallback
        ("reviewer", ""),
        ("developer", "Fix: Add a test for the empty password"),  # notApproved held
        ("reviewer", ""),
    ]
    assert log[-1]["output"] == {"approved": True}  # the fallback: $END
    one_line_error(kit.step(thread), 1, "has ended")


def test_a_condition_can_end_the_thread_at_once(cli: Cli, tmp_path: Path) -> None:
    kit = seeded(cli, tmp_path, {"planner": [{"needsClarification": "Which login?"}]})
    kit.put_workflow(SEED)
    thread = kit.start("solve-issue-conditions", PROMPT)
    assert kit.ok("thread", "step", thread)["done"] is True
    assert [s["role"] for s in kit.log(thread)] == ["planner"]


def test_no_holding_condition_blocks_the_thread(cli: Cli, tmp_path: Path) -> None:
    kit = seeded(cli, tmp_path, {"worker": [{"approved": True}]})
    kit.put_workflow(kit.workflow_file(strict_workflow(), "strict.yaml"))
    thread = kit.start("strict", PROMPT)
    assert kit.ok("thread", "step", thread)["done"] is False
    message = 'no transition for role "worker": no condition holds (notApproved)'
    one_line_error(kit.step(thread), 1, message, "fix the workflow's graph")
    blocked = kit.events("thread.blocked")
    assert [(b["data"]["reason"], b["data"]["message"], b["data"]["role"], b["data"]["status"])
            for b in blocked] == [("no-transition", message, "worker", None)]
    # The agent kit still answers for a blocked thread: no edge prompt to give.
    context = kit.ok("agent", "context", thread, "worker")
    assert context["edgePrompt"] == ""


def test_a_failing_condition_blocks_the_thread_naming_it(cli: Cli, tmp_path: Path) -> None:
    kit = seeded(cli, tmp_path, {"worker": [{"approved": True}]})
    document = strict_workflow()
    document["conditions"]["notApproved"]["expression"] = '$error("no verdict")'
    kit.put_workflow(kit.workflow_file(document, "broken.yaml"))
    thread = kit.start("strict", PROMPT)
    kit.ok("thread", "step", thread)
    line = one_line_error(kit.step(thread), 1, 'condition "notApproved" of role "worker" '
                          "failed: no verdict", "fix its expression in the workflow")
    assert "Traceback" not in line
    blocked = kit.events("thread.blocked")[-1]["data"]
    assert (blocked["reason"], blocked["role"]) == ("no-transition", "worker")
    assert blocked["message"] in line


def strict_workflow() -> dict[str, Any]:
    """One role; the thread goes back to it while not approved, with no fallback."""
    return {
        "name": "strict",
        "roles": {"worker": {"meta": {"type": "object", "required": ["approved"],
                                      "properties": {"approved": {"type": "boolean"}}}}},
        "conditions": {"notApproved": {"expression": "steps[-1].output.approved = false"}},
        "graph": {"$START": [{"role": "worker", "condition": None}],
                  "worker": [{"role": "worker", "condition": "notApproved",
                              "prompt": "Again"}]},
    }


def test_show_on_a_terminal_labels_list_edges_by_condition(cli: Cli, tmp_path: Path) -> None:
    kit = seeded(cli, tmp_path)
    kit.put_workflow(SEED)
    main, terminal = pty.openpty()  # the panel is what a terminal gets
    try:
        done = subprocess.run([str(BIN / "uwf"), "workflow", "show", "solve-issue-conditions"],
                              stdout=terminal, stderr=subprocess.PIPE, env=cli.env,
                              timeout=60, check=False)
    finally:
        os.close(terminal)
    chunks = []
    try:
        while chunk := os.read(main, 65536):
            chunks.append(chunk)
    except OSError:  # EIO: the terminal's other side is closed and drained
        pass
    finally:
        os.close(main)
    assert done.returncode == 0, done.stderr
    shown = b"".join(chunks).decode().replace("\r\n", "\n")
    assert "  reviewer --notApproved--> developer\n" in shown
    assert "  reviewer --_--> $END" in shown
    assert "  planner --needsClarification--> $END\n" in shown
