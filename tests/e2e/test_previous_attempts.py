"""Upstream's `previousAttempts`: a StepNode the checks refused is kept and named by
its failure (`thread.step_failed`'s `node`), and the StepNode that then passes names
every such attempt as its `previousAttempts`, under a built-in type of its own
(RetriedStepNode), so a StepNode without them hashes exactly as before.

The agents are real processes (scripts of tests/threadkit.py, and uwf-mock); the
CLI runs as the `cli` fixture runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.threadkit import Kit, make_kit
from uwf.cas.builtins import builtin_hash
from uwf.cas.hashing import node_hash

# A StepNode's type and one StepNode's hash, as uwf named them before RetriedStepNode
# existed (json-cas agreement: a node without previousAttempts must not move).
STEP_NODE_TYPE = "2YCQJQYQY605N"
OLD_STEP = {"start": "5QVSXN533E6HB", "prev": None, "role": "planner",
            "output": "1JP9NC7WST1YH", "detail": "EVYQJ25B6W9GF", "agent": "uwf-mock",
            "edgePrompt": "Fix the login bug", "startedAtMs": 1, "completedAtMs": 2}
OLD_STEP_HASH = "F6RTCMTJT2WXG"  # computed by main at 80a43da

LOOSE_PLANNER = '''
ctx = context()
loose = put("Schema", {"type": "object"})
out = put(loose, {"status": "maybe", "plan": 42})
step = {"start": ctx["start"], "prev": ctx["head"], "role": ROLE, "output": out,
        "detail": put("Text", "d"), "agent": "loose"}
print(put("StepNode", step))
'''


def test_a_step_node_without_attempts_hashes_as_before() -> None:
    assert builtin_hash("StepNode") == STEP_NODE_TYPE
    assert node_hash(builtin_hash("StepNode"), OLD_STEP) == OLD_STEP_HASH
    assert builtin_hash("RetriedStepNode") != STEP_NODE_TYPE


def _kit(cli: Cli, tmp_path: Path) -> tuple[Kit, str]:
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    return kit, kit.start()


@pytest.mark.parametrize("nodes", ["log", "loose"])
def test_refused_attempts_are_kept_and_named_by_the_step_that_passes(
        cli: Cli, tmp_path: Path, nodes: str) -> None:
    """With the step's nodes as log records (the default) and as loose files (which gc
    removes once nothing reaches them)."""
    kit, thread = _kit(cli, tmp_path)
    kit.cli.env["UWF_NODES"] = nodes
    loose = kit.agent("loose", LOOSE_PLANNER)
    refused = []
    for _ in range(2):
        assert kit.step(thread, "--agent", str(loose)).code == 1
        failure = kit.events("thread.step_failed")[-1]["data"]
        assert failure["reason"] == "schema"
        refused.append(failure["node"])
    for hash_ in refused:
        node = kit.node(hash_)
        assert node["type"] == STEP_NODE_TYPE
        assert node["payload"]["agent"] == "loose"
    # The agent sees them in its context; uwf-mock's StepNode names them, oldest first.
    context = kit.ok("agent", "context", thread, "planner")
    assert context["previousAttempts"] == refused
    head = kit.ok("thread", "step", thread)["head"]
    node = kit.node(head)
    assert node["type"] == builtin_hash("RetriedStepNode")
    assert node["payload"]["previousAttempts"] == refused
    assert node["payload"]["agent"] == "uwf-mock"
    # json-cas follows them (walk, verify), gc keeps them, log verify is clean.
    walked = kit.cli.cas("walk", head)
    assert walked.code == 0, walked
    for hash_ in refused:
        assert hash_ in walked.out
    assert kit.cli.cas("verify", head).code == 0
    assert kit.cli.cas("gc", "--grace", "0", "--yes").code == 0
    for hash_ in refused:
        assert kit.node(hash_)["payload"]["role"] == "planner"
    assert kit.uwf("log", "verify").code == 0
    # The next step follows a step that passed: a plain StepNode again.
    nxt = kit.ok("thread", "step", thread)["head"]
    assert kit.node(nxt)["type"] == STEP_NODE_TYPE
    assert "previousAttempts" not in kit.ok("agent", "context", thread, "reviewer")
    log = kit.log(thread)
    assert [step["role"] for step in log] == ["planner", "developer"]
    assert log[0]["previousAttempts"] == refused
    assert "previousAttempts" not in log[1]


def test_a_failure_without_a_step_node_of_its_own_names_none(
        cli: Cli, tmp_path: Path) -> None:
    """An agent that exits non-zero, and one that replays another step's StepNode
    (stale-prev: not an attempt at this step), leave no `node`; the step after them
    is a plain StepNode."""
    kit, thread = _kit(cli, tmp_path)
    kit.ok("thread", "step", thread)
    first = kit.show(thread)["head"]
    crash = kit.agent("crash", 'sys.exit(3)\n')
    replay = kit.agent("replay", f'print({first!r})\n')
    assert kit.step(thread, "--agent", str(crash)).code == 1
    assert kit.step(thread, "--agent", str(replay)).code == 1
    failures = [event["data"] for event in kit.events("thread.step_failed")]
    assert [f["reason"] for f in failures] == ["exit", "stale-prev"]
    assert all("node" not in failure for failure in failures)
    head = kit.ok("thread", "step", thread)["head"]
    assert kit.node(head)["type"] == STEP_NODE_TYPE


def test_log_verify_names_a_refused_step_node_that_is_gone(cli: Cli, tmp_path: Path) -> None:
    """The failure's `node` is a reference: `log verify` checks the node is there (a
    loose file, removed here by hand)."""
    kit, thread = _kit(cli, tmp_path)
    kit.cli.env["UWF_NODES"] = "loose"
    assert kit.step(thread, "--agent", str(kit.agent("loose", LOOSE_PLANNER))).code == 1
    refused = kit.events("thread.step_failed")[-1]["data"]["node"]
    assert kit.uwf("log", "verify").code == 0
    (kit.home / "cas" / refused[:2] / f"{refused}.json").unlink()
    verified = kit.uwf("log", "verify", "--json")
    assert verified.code == 1
    assert f"refers to CAS node {refused} which is missing" in verified.out
