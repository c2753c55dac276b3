"""A human in the loop, where no `uwf worker` looks (docs/queue.md#waiting): an answered
run's entry is ready to whoever leases (`sched lease`, `queue pick`); a question past
its deadline is timed out by the worker's loop and `sched reclaim`, its `$TIMEOUT` edge
taken (or the thread blocked) at once; a fork at an asking step, and an incremental
rerun that takes one over, ask the question again; `sched plan` counts waiting entries.

Through the CLI (`main(argv)`), the agent uwf-mock a real process; deadlines by `--now`
(times set in the past or future), never by sleeping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT, Cli

WORKFLOW = ROOT / "examples" / "approve-deploy.yaml"
MOCK = f"uwf-mock {ROOT / 'examples' / 'mock-approve-deploy.yaml'}"
QUESTION = "Deploy version 2.1.0 to production?"
ASKED_AT = "2026-11-20T10:00:00Z"
BEFORE_DUE = "2026-11-21T09:00:00Z"
AFTER_DUE = "2026-11-21T10:00:01Z"  # timeoutSeconds 86400


def ok(cli: Cli, *args: str) -> Any:
    result = cli.run(*args, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out) if result.out.strip() else None


def waiting_thread(cli: Cli, workflow: Path = WORKFLOW) -> str:
    """A thread of the approval workflow run up to its question, asked at ASKED_AT."""
    ok(cli, "workflow", "put", str(workflow))
    thread = str(ok(cli, "--now", ASKED_AT, "thread", "start", "approve-deploy",
                    "-p", "ship 2.1.0")["thread"])
    ran = ok(cli, "--now", ASKED_AT, "thread", "run", thread, "--agent", MOCK)
    assert ran["status"] == "waiting"
    return thread


def waiting_entry(cli: Cli) -> tuple[str, str]:
    """A queue entry whose run the worker gave back as waiting: (entry, run)."""
    ok(cli, "workflow", "put", str(WORKFLOW))
    entry = ok(cli, "--now", ASKED_AT, "queue", "add", "--workflow", "approve-deploy",
               "-p", "ship 2.1.0", "--session", "w", "--agent", MOCK)["entry"]["id"]
    worked = ok(cli, "--now", ASKED_AT, "worker", "--session", "w", "--once",
                "--allow-entry-commands")
    assert worked["outcome"] == "waiting"
    assert ok(cli, "queue", "show", entry)["status"] == "waiting"
    return entry, worked["run"]


def events_of(cli: Cli, subject: str, count: int) -> list[str]:
    out = cli.run("log", "tail", "--subject", subject, "-n", str(count)).out
    return [json.loads(line)["type"] for line in out.splitlines()]


# -- (a) an answered run's entry is ready to whoever leases --------------------------------

def test_an_answered_entry_is_leased_by_sched_lease_without_a_worker(cli: Cli) -> None:
    entry, run = waiting_entry(cli)
    # Unanswered, nothing is eligible: the entry waits.
    assert cli.run("--now", BEFORE_DUE, "sched", "lease", "--session", "w").code == 3
    ok(cli, "--now", BEFORE_DUE, "thread", "answer", run, "--answer", '{"approved": true}')
    leased = ok(cli, "--now", BEFORE_DUE, "sched", "lease", "--session", "w")
    assert [lease["id"] for lease in leased["leases"]] == [entry]
    kinds = [event["event"] for event in ok(cli, "queue", "logs", entry)["events"]]
    assert kinds[-3:] == ["waiting", "resumed", "leased"]
    assert ok(cli, "log", "verify")["problems"] == []


def test_an_answered_entry_is_picked_by_queue_pick(cli: Cli) -> None:
    entry, run = waiting_entry(cli)
    ok(cli, "--now", BEFORE_DUE, "thread", "answer", run, "--answer", '{"approved": false}')
    picked = cli.run("--now", BEFORE_DUE, "queue", "pick", "--session", "w")
    assert picked.code == 0, picked.err
    assert entry in picked.out


# -- (b) deadlines noticed by the worker's loop and the scheduler ---------------------------

def test_the_worker_times_out_a_question_past_its_deadline(cli: Cli) -> None:
    """No queue entry at all: the worker's loop finds nothing to lease (exit 3), and
    still records the timeout; approve-deploy's $TIMEOUT edge is $END: the thread ends."""
    thread = waiting_thread(cli)
    assert cli.run("--now", BEFORE_DUE, "worker", "--once").code == 3
    assert ok(cli, "thread", "show", thread)["status"] == "waiting"
    assert cli.run("--now", AFTER_DUE, "worker", "--once").code == 3
    shown = ok(cli, "thread", "show", thread)
    assert (shown["status"], shown["done"]) == ("ended", True)
    assert shown["question"]["timedOut"] is True
    assert events_of(cli, f"thread/{thread}", 3) == [
        "thread.asked", "thread.timed_out", "thread.ended"]
    assert ok(cli, "log", "verify")["problems"] == []


def test_sched_reclaim_times_out_a_question_and_blocks_a_role_without_a_timeout_edge(
        cli: Cli, tmp_path: Path) -> None:
    document = yaml.safe_load(WORKFLOW.read_text("utf-8"))
    del document["graph"]["approver"]["$TIMEOUT"]
    strict = tmp_path / "approve-deploy.yaml"
    strict.write_text(yaml.safe_dump(document, sort_keys=False), "utf-8")
    thread = waiting_thread(cli, strict)
    assert ok(cli, "--now", BEFORE_DUE, "sched", "reclaim")["count"] == 0
    assert ok(cli, "thread", "show", thread)["status"] == "waiting"
    ok(cli, "--now", AFTER_DUE, "sched", "reclaim")
    shown = ok(cli, "thread", "show", thread)
    assert (shown["status"], shown["currentRole"]) == ("blocked", "approver")
    assert events_of(cli, f"thread/{thread}", 2) == ["thread.timed_out", "thread.blocked"]
    # Once timed out, nothing more to do: a second sweep writes nothing.
    before = cli.run("log", "tail", "-n", "1").out
    ok(cli, "--now", AFTER_DUE, "sched", "reclaim")
    assert cli.run("log", "tail", "-n", "1").out == before
    assert ok(cli, "log", "verify")["problems"] == []


def test_a_queued_run_past_its_deadline_is_settled_by_the_worker(cli: Cli) -> None:
    entry, run = waiting_entry(cli)
    worked = ok(cli, "--now", AFTER_DUE, "worker", "--session", "w", "--once",
                "--allow-entry-commands")
    assert (worked["id"], worked["run"], worked["outcome"]) == (entry, run, "completed")
    assert ok(cli, "thread", "show", run)["question"]["timedOut"] is True


# -- (c) a fork or a rerun at an asking step asks again --------------------------------------

def test_a_fork_at_an_asking_step_asks_again(cli: Cli) -> None:
    thread = waiting_thread(cli)
    ok(cli, "--now", BEFORE_DUE, "thread", "answer", thread, "--answer", '{"approved": true}')
    steps = [json.loads(line) for line in cli.run("thread", "log", thread).out.splitlines()]
    asking = next(step["hash"] for step in steps if step["status"] == "$ASK")
    forked = ok(cli, "--now", "2026-11-25T10:00:00Z", "thread", "fork", thread,
                "--at", asking)["thread"]
    shown = ok(cli, "thread", "show", forked)
    assert shown["status"] == "waiting"
    assert shown["question"]["question"] == QUESTION
    assert "answer" not in shown["question"]
    assert shown["question"]["dueAt"] == "2026-11-26T10:00:00.000Z"  # from the fork
    assert [row["thread"] for row in ok(cli, "thread", "list", "--waiting")] == [forked]
    ok(cli, "--now", "2026-11-25T11:00:00Z", "thread", "answer", forked,
       "--answer", '{"approved": false, "note": "not today"}')
    context = ok(cli, "agent", "context", forked, "approver")
    assert context["question"]["answer"] == {"approved": False, "note": "not today"}
    assert ok(cli, "log", "verify")["problems"] == []


def test_an_incremental_rerun_that_takes_over_an_asking_step_asks_again(
        cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"agents": {"mock": {"command": "uwf-mock", "args": [
        str(ROOT / "examples" / "mock-approve-deploy.yaml")]}}, "defaultAgent": "mock"}),
        "utf-8")
    cli.env["UWF_CONFIG"] = str(config)
    ok(cli, "workflow", "put", str(WORKFLOW))
    thread = str(ok(cli, "thread", "start", "approve-deploy", "-p", "ship 2.1.0")["thread"])
    assert ok(cli, "thread", "run", thread)["status"] == "waiting"
    ok(cli, "thread", "answer", thread, "--answer", '{"approved": true}')
    assert ok(cli, "thread", "run", thread)["status"] == "ended"
    rerun = ok(cli, "run", "rerun", thread, "--incremental")
    assert len(rerun["reused"]) == 2  # the builder and the approver's question
    shown = ok(cli, "thread", "show", rerun["runId"])
    assert (shown["status"], shown["question"]["question"]) == ("waiting", QUESTION)
    assert "answer" not in shown["question"]
    ok(cli, "thread", "answer", rerun["runId"], "--answer", '{"approved": true}')
    assert ok(cli, "thread", "run", rerun["runId"])["status"] == "ended"
    assert ok(cli, "log", "verify")["problems"] == []


# -- (d) sched plan counts waiting entries ---------------------------------------------------

def test_sched_plan_counts_and_lists_a_waiting_entry(cli: Cli) -> None:
    entry, _ = waiting_entry(cli)
    plan = ok(cli, "--now", BEFORE_DUE, "sched", "plan")
    assert plan["skippedCounts"]["waiting"] == 1
    assert sum(plan["skippedCounts"].values()) == 1
    assert plan["skipped"] == [{"id": entry, "reason": "waiting"}]
