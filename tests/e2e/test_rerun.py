"""`run rerun` through the real CLI (SPEC §7): a new linked run beside the original,
chains with a pinned origin, the original untouched, and `--incremental`, which
takes over the unchanged prefix of the original (counted in agent invocations)
and runs live from the first step whose inputs changed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import snapshot
from tests.runkit import NOW, Fleet, relay_workflow
from tests.threadkit import one_line_error


def events_of(fleet: Fleet, thread: str) -> list[dict[str, Any]]:
    result = fleet.uwf("log", "tail", "-n", "100000", "--subject", f"thread/{thread}")
    assert result.code == 0, result
    return [json.loads(line) for line in result.out.splitlines()]


def outputs(fleet: Fleet, thread: str) -> list[tuple[str, Any]]:
    return [(step["role"], step["output"]) for step in fleet.kit.log(thread)]


def live(fleet: Fleet, thread: str) -> list[str]:
    """The roles the relay agent really ran for `thread`, in order."""
    return [line.split()[1] for line in fleet.invocations() if line.split()[0] == thread]


def failed_at_b(fleet: Fleet, prompt: str = "Carry the message") -> str:
    """A run whose a succeeded and whose b failed."""
    thread = fleet.start(prompt=prompt)
    fleet.act(b="fail")
    one_line_error(fleet.uwf("run", "resume", thread, "--drive"), 1, "step failed")
    fleet.act()
    assert fleet.run(thread)["lifecycle"] == "failed"
    return thread


def test_rerun_chains_keep_their_origin_and_leave_the_original_untouched(
        fleet: Fleet) -> None:
    original = failed_at_b(fleet, "Carry the message\nwith a second line")
    first = fleet.run(original, now=NOW)
    history = events_of(fleet, original)

    chain = [original]
    for generation in (1, 2, 3):
        made = fleet.ok("run", "rerun", chain[-1], "--reason", f"try {generation}")
        assert (made["rerunOf"], made["originRunId"], made["generation"]) == (
            chain[-1], original, generation)
        assert made["reused"] == []
        run = made["run"]
        assert run["runId"] == made["runId"] not in chain
        assert run["provenance"] == {
            "rerunOf": chain[-1], "rerunOfRepo": first["repo"], "originRunId": original,
            "generation": generation, "reason": f"try {generation}", "incremental": False}
        # The same workflow, prompt and repo; a new run with no step yet.
        assert run["workflow"] == first["workflow"] == {"name": "relay",
                                                        "hash": fleet.relay}
        assert (run["title"], run["inputsDigest"], run["repo"]) == (
            first["title"], first["inputsDigest"], first["repo"])
        assert (run["lifecycle"], run["steps"], run["reusedSteps"]) == ("queued", 0, 0)
        assert fleet.ok("thread", "show", run["runId"])["head"] != fleet.ok(
            "thread", "show", original)["head"]
        assert fleet.run(run["runId"]) == run
        chain.append(run["runId"])

    assert fleet.run(original, now=NOW) == first
    assert events_of(fleet, original) == history
    linked = fleet.kit.events("run.rerun_linked")
    assert [(e["subject"], e["data"]["rerunOf"], e["data"]["originRunId"],
             e["data"]["generation"]) for e in linked] == [
        (f"thread/{chain[n]}", chain[n - 1], original, n) for n in (1, 2, 3)]

    # The last one runs to its end like any run; the first failure stays on record.
    assert fleet.ok("run", "resume", chain[3], "--drive")["run"]["lifecycle"] == "completed"
    assert live(fleet, chain[3]) == ["a", "b", "c"]
    assert fleet.run(original, now=NOW) == first
    assert fleet.search("--status", "failed") == [original]


def test_a_full_rerun_runs_every_step_again(fleet: Fleet) -> None:
    original = fleet.start()
    fleet.ok("run", "resume", original, "--drive")
    again = fleet.ok("run", "rerun", original, "--drive")
    assert again["run"]["lifecycle"] == "completed"
    assert (again["run"]["steps"], again["run"]["reusedSteps"]) == (3, 0)
    assert live(fleet, again["runId"]) == ["a", "b", "c"]
    assert outputs(fleet, again["runId"]) == outputs(fleet, original)


def test_incremental_rerun_of_an_unchanged_run_runs_no_agent(fleet: Fleet) -> None:
    original = fleet.start()
    fleet.ok("run", "resume", original, "--drive")
    assert len(fleet.invocations()) == 3
    history = events_of(fleet, original)
    old_log = fleet.kit.log(original)

    made = fleet.ok("run", "rerun", original, "--incremental", "--drive")
    new = made["runId"]
    assert fleet.invocations() == [f"{original} {role}" for role in "abc"]  # none more
    assert made["reused"] == [step["hash"] for step in old_log]
    run = made["run"]
    assert (run["lifecycle"], run["steps"], run["reusedSteps"]) == ("completed", 3, 3)
    assert run["provenance"]["incremental"] is True
    new_log = fleet.kit.log(new)
    assert outputs(fleet, new) == outputs(fleet, original)
    # New StepNodes of the new run's chain, pointing at the original's outputs. (The
    # StartNode is the same node: the same workflow and prompt.)
    assert not {step["hash"] for step in new_log} & {step["hash"] for step in old_log}
    assert [step["output"] for step in new_log] == [step["output"] for step in old_log]
    nodes = [fleet.kit.payload(step["hash"]) for step in new_log]
    assert {node["start"] for node in nodes} == {fleet.kit.payload(old_log[0]["hash"])["start"]}
    assert [node["prev"] for node in nodes] == [None, new_log[0]["hash"], new_log[1]["hash"]]
    reused = [e["data"]["reused"] for e in fleet.kit.events("thread.stepped")
              if e["subject"] == f"thread/{new}"]
    assert reused == made["reused"]
    assert events_of(fleet, original) == history
    assert fleet.ok("registry", "verify")["ok"] is True

    # A rerun of the rerun takes over the same steps (followed back to the agent's run).
    again = fleet.ok("run", "rerun", new, "--incremental")
    assert (again["run"]["lifecycle"], again["run"]["reusedSteps"]) == ("completed", 3)
    assert (again["generation"], again["originRunId"]) == (2, original)
    assert len(fleet.invocations()) == 3


def test_log_verify_accepts_the_steps_an_incremental_rerun_took_over(fleet: Fleet) -> None:
    original = fleet.start()
    fleet.ok("run", "resume", original, "--drive")
    assert fleet.ok("run", "rerun", original, "--incremental")["run"]["reusedSteps"] == 3
    verified = fleet.uwf("log", "verify")
    assert verified.code == 0, verified.out


def test_incremental_rerun_takes_over_a_loop_of_revisits(fleet: Fleet) -> None:
    """solve-issue with uwf-mock: the developer and reviewer visited twice each, with
    different edge prompts; every step is taken over, none runs."""
    original = fleet.start("solve-issue", "Fix the login bug")
    fleet.ok("run", "resume", original, "--drive")
    made = fleet.ok("run", "rerun", original, "--incremental")
    new = made["runId"]
    assert (made["run"]["lifecycle"], made["run"]["reusedSteps"]) == ("completed", 5)
    assert [role for role, _ in outputs(fleet, new)] == [
        "planner", "developer", "reviewer", "developer", "reviewer"]
    assert outputs(fleet, new) == outputs(fleet, original)
    assert [e for e in fleet.kit.events("thread.step_started")
            if e["subject"] == f"thread/{new}"] == []


def test_incremental_rerun_of_a_failed_run_runs_live_from_the_failed_step(
        fleet: Fleet) -> None:
    original = failed_at_b(fleet)
    assert live(fleet, original) == ["a", "b"]
    made = fleet.ok("run", "rerun", original, "--incremental", "--drive")
    new = made["runId"]
    assert len(made["reused"]) == 1
    assert live(fleet, new) == ["b", "c"]  # a was taken over; b failed, so it runs live
    run = made["run"]
    assert (run["lifecycle"], run["steps"], run["reusedSteps"]) == ("completed", 3, 1)
    assert fleet.run(original)["lifecycle"] == "failed"


@pytest.mark.parametrize(("changed", "reused"), [("a", 0), ("b", 1), ("c", 2)])
def test_incremental_rerun_under_a_changed_role_runs_live_from_that_role(
        fleet: Fleet, changed: str, reused: int) -> None:
    original = fleet.start()
    fleet.ok("run", "resume", original, "--drive")
    first = fleet.run(original, now=NOW)
    history = events_of(fleet, original)
    newer = fleet.kit.put_workflow(fleet.kit.workflow_file(relay_workflow(changed),
                                                           "relay-v2.yaml"))
    assert newer != fleet.relay

    made = fleet.ok("run", "rerun", original, "--incremental", "--workflow", "relay",
                    "--drive")
    new = made["runId"]
    roles = "abc"
    assert live(fleet, new) == list(roles[reused:])  # the changed role and all after it
    assert len(made["reused"]) == reused
    assert made["workflow"] == newer
    run = made["run"]
    assert run["workflow"] == {"name": "relay", "hash": newer}
    assert (run["lifecycle"], run["steps"], run["reusedSteps"]) == ("completed", 3, reused)
    assert fleet.run(original, now=NOW) == first  # still under the first version
    assert events_of(fleet, original) == history
    # Both versions are runs of `relay`; a hash selects one version.
    assert fleet.search("--workflow", "relay") == [original, new]
    assert fleet.search("--workflow", fleet.relay) == [original]
    assert fleet.search("--workflow", newer) == [new]


def test_incremental_rerun_runs_live_where_the_edge_prompt_changed(fleet: Fleet) -> None:
    original = fleet.start()
    fleet.ok("run", "resume", original, "--drive")
    reworded = relay_workflow()
    reworded["graph"]["a"]["ok"]["prompt"] = "Now b, after a said: {{note}}"
    fleet.kit.put_workflow(fleet.kit.workflow_file(reworded, "relay-reworded.yaml"))
    made = fleet.ok("run", "rerun", original, "--incremental", "--workflow", "relay",
                    "--drive")
    assert len(made["reused"]) == 1
    assert live(fleet, made["runId"]) == ["b", "c"]
    assert fleet.kit.log(made["runId"])[1]["edgePrompt"] == "Now b, after a said: a says ok"


def test_a_blocked_run_reruns_under_a_fixed_graph_from_a_workflow_file(fleet: Fleet) -> None:
    original = fleet.start()
    fleet.act(a="stuck")
    one_line_error(fleet.uwf("run", "resume", original, "--drive"), 1, "no transition")
    assert fleet.run(original)["lifecycle"] == "blocked"
    next_actions = fleet.ok("run", "resume", original)["nextActions"]
    assert "--incremental --workflow" in next_actions[0]
    fixed = relay_workflow()
    fixed["graph"]["a"]["stuck"] = {"role": "c", "prompt": "Unstuck: {{note}}"}
    path = fleet.kit.workflow_file(fixed, "relay-fixed.yaml")
    fleet.act()
    made = fleet.ok("run", "rerun", original, "--incremental", "--workflow", str(path),
                    "--drive")
    assert len(made["reused"]) == 1  # a's step, whose status now has an edge
    assert live(fleet, made["runId"]) == ["c"]
    run = made["run"]
    assert (run["lifecycle"], run["steps"], run["reusedSteps"]) == ("completed", 2, 1)
    assert run["workflow"]["hash"] == made["workflow"] != fleet.relay
    assert fleet.kit.log(made["runId"])[1]["edgePrompt"] == "Unstuck: a says stuck"
    assert fleet.run(original)["lifecycle"] == "blocked"


def test_incremental_rerun_runs_live_where_the_resolved_agent_changed(fleet: Fleet) -> None:
    original = fleet.start()
    fleet.ok("run", "resume", original, "--drive")
    config = fleet.config()
    config["agents"]["relay-too"] = config["agents"]["relay"]
    config["agentOverrides"]["relay"] = {"c": "relay-too"}
    fleet.kit.write_config(config)
    made = fleet.ok("run", "rerun", original, "--incremental", "--drive")
    assert len(made["reused"]) == 2
    assert live(fleet, made["runId"]) == ["c"]


def test_incremental_rerun_of_a_run_with_no_step_reuses_nothing(fleet: Fleet) -> None:
    original = fleet.start()
    made = fleet.ok("run", "rerun", original, "--incremental")
    assert (made["reused"], made["run"]["lifecycle"]) == ([], "queued")


def test_rerunning_a_running_run_is_refused_and_writes_nothing(fleet: Fleet) -> None:
    idle = fleet.start()
    assert fleet.step(idle).code == 0  # one step, none in flight: running
    store = snapshot(fleet.cli.home)
    for args in ([], ["--incremental"], ["--drive"], ["--incremental", "--drive"]):
        one_line_error(fleet.uwf("run", "rerun", idle, *args), 1, f"run {idle} is running")
    assert snapshot(fleet.cli.home) == store

    busy = fleet.start()
    with fleet.in_flight(busy, "a"):
        store = snapshot(fleet.cli.home)
        one_line_error(fleet.uwf("run", "rerun", busy), 1, f"run {busy} is running")
        assert snapshot(fleet.cli.home) == store
    # Ended (killed), it can be rerun.
    fleet.ok("thread", "kill", idle)
    assert fleet.ok("run", "rerun", idle)["generation"] == 1
