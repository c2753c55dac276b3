"""A human in the loop (docs/threads.md#a-human-in-the-loop), end to end through the
command line: examples/approve-deploy.yaml driven by uwf-mock, whose approver asks
first; `thread answer` answers it, refuses a wrong answer and an answer to a thread
that does not wait; a question past its deadline takes the `$TIMEOUT` edge; the worker
gives a waiting entry back and resumes it; `log verify` names a forged answer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.brokerkit import Broker
from tests.conftest import BIN, ROOT, Cli, snapshot

WORKFLOW = ROOT / "examples" / "approve-deploy.yaml"
MOCK = f"uwf-mock {ROOT / 'examples' / 'mock-approve-deploy.yaml'}"
QUESTION = "Deploy version 2.1.0 to production?"


def ok(cli: Cli, *args: str) -> Any:
    result = cli.run(*args, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out) if result.out.strip() else None


def started(cli: Cli, *now: str) -> str:
    ok(cli, "workflow", "put", str(WORKFLOW))
    return str(ok(cli, *now, "thread", "start", "approve-deploy", "-p", "ship 2.1.0")["thread"])


def test_an_approval_asked_answered_and_resumed_through_the_cli(cli: Cli) -> None:
    thread = started(cli)
    ran = ok(cli, "thread", "run", thread, "--agent", MOCK)
    # The builder, then the approver's question: the run stops there, without an error.
    assert (ran["status"], ran["steps"], ran["currentRole"]) == ("waiting", 2, "approver")
    assert ran["question"]["question"] == QUESTION
    assert ran["question"]["answerSchema"]["required"] == ["approved"]
    assert "dueAt" in ran["question"]
    listed = ok(cli, "thread", "list", "--waiting")
    assert [(row["thread"], row["question"]) for row in listed] == [(thread, QUESTION)]
    assert ok(cli, "thread", "list", "--status", "active") == []
    runs = ok(cli, "run", "list", "--status", "waiting")["runs"]
    assert [run["runId"] for run in runs] == [thread]

    # Nothing runs while it waits: a step is refused, naming the question.
    before = snapshot(cli.home)
    refused = cli.run("thread", "step", thread, "--agent", MOCK)
    assert refused.code == 1
    assert refused.err.startswith(f"uwf: error: thread {thread} is waiting for an answer: ")
    assert f"uwf thread answer {thread} --answer" in refused.err

    # A wrong answer is refused against the question's schema; nothing is written.
    wrong = cli.run("thread", "answer", thread, "--answer", '{"approved": "yes"}')
    assert (wrong.code, wrong.out) == (1, "")
    assert wrong.err == (
        'uwf: error: the answer does not match the question\'s schema: approved: "yes" is '
        f"not of type \"boolean\"; see the schema with `uwf thread show {thread}` "
        "(question.answerSchema), and answer again\n")
    neither = cli.run("thread", "answer", thread)
    assert neither.code == 2
    assert "give the answer with --answer JSON or --file FILE" in neither.err
    assert snapshot(cli.home) == before

    answer_file = cli.home.parent / "answer.json"
    answer_file.write_text('{"approved": true, "note": "go"}', "utf-8")
    answered = ok(cli, "thread", "answer", thread, "--file", str(answer_file), "--by", "alice")
    assert answered["status"] == "idle"
    assert answered["question"]["answer"] == {"approved": True, "note": "go"}
    assert answered["question"]["answeredBy"] == "alice"

    # Answered once: a second answer is refused, the log unchanged.
    before = snapshot(cli.home)
    again = cli.run("thread", "answer", thread, "--answer", '{"approved": false}')
    assert again.code == 1
    assert again.err.startswith(f"uwf: error: thread {thread} is not waiting for an answer "
                                "(it is idle); ")
    assert snapshot(cli.home) == before

    # The approver resumes with the answer in its context (the agent kit's `question`).
    context = ok(cli, "agent", "context", thread, "approver")
    assert context["question"]["answer"] == {"approved": True, "note": "go"}
    assert context["edgePrompt"] == (f'You asked: "{QUESTION}". The answer: '
                                     '{"approved": true, "note": "go"}')
    done = ok(cli, "thread", "run", thread, "--agent", MOCK)
    assert (done["status"], done["steps"]) == ("ended", 2)
    steps = [json.loads(line) for line in cli.run("thread", "log", thread).out.splitlines()]
    assert [(step["role"], step["status"]) for step in steps] == [
        ("builder", "built"), ("approver", "$ASK"), ("approver", "approved"),
        ("deployer", "deployed")]
    assert ok(cli, "log", "verify")["problems"] == []
    # The per-run archive keeps the question and its answer.
    archive = cli.home.parent / "archive"
    ok(cli, "archive", "sync", str(archive))
    lines = [json.loads(line) for line in
             (archive / "runs" / thread / "transitions.jsonl").read_text("utf-8").splitlines()]
    asked = [line for line in lines if line["event"] in ("question", "answer")]
    assert [(line["event"], line.get("question"), line.get("by")) for line in asked] == [
        ("question", QUESTION, None), ("answer", None, "alice")]
    assert ok(cli, "archive", "verify", str(archive))["problems"] == []


def test_a_question_past_its_deadline_takes_the_timeout_edge(cli: Cli) -> None:
    thread = started(cli, "--now", "2026-11-20T10:00:00Z")
    ran = ok(cli, "--now", "2026-11-20T10:00:00Z", "thread", "run", thread, "--agent", MOCK)
    assert ran["question"]["dueAt"] == "2026-11-21T10:00:00.000Z"  # timeoutSeconds 86400
    # Before its deadline it waits; after it, an answer is refused...
    assert cli.run("--now", "2026-11-21T09:59:59Z", "thread", "step", thread,
                   "--agent", MOCK).code == 1
    late = cli.run("--now", "2026-11-21T10:00:00Z", "thread", "answer", thread,
                   "--answer", '{"approved": true}')
    assert late.code == 1
    assert "question was due by 2026-11-21T10:00:00.000Z" in late.err
    # ... and the next step takes the approver's $TIMEOUT edge (here: $END).
    stepped = ok(cli, "--now", "2026-11-21T10:00:00Z", "thread", "step", thread,
                 "--agent", MOCK)
    assert (stepped["status"], stepped["done"]) == ("ended", True)
    assert stepped["question"]["timedOut"] is True
    events = [json.loads(line) for line in cli.run(
        "log", "tail", "--subject", f"thread/{thread}", "-n", "3").out.splitlines()]
    assert [event["type"] for event in events] == [
        "thread.asked", "thread.timed_out", "thread.ended"]
    assert ok(cli, "log", "verify")["problems"] == []


def test_log_verify_names_a_forged_answer(cli: Cli) -> None:
    from uwf.engine.events import NewEvent
    from uwf.engine.journal import Outcome
    from uwf.store import Store
    from uwf.threads.events import ThreadAnswered

    thread = started(cli)
    ok(cli, "thread", "run", thread, "--agent", MOCK)
    ok(cli, "thread", "answer", thread, "--answer", '{"approved": true}')
    shown = ok(cli, "thread", "show", thread)
    step, answer = shown["question"]["stepId"], None
    store = Store.open(Path(cli.env["UWF_HOME"]))
    try:
        answer = store.read().get("threads", thread).asked.answer
        forged = ThreadAnswered(step, answer, "mallory")  # a second answer, past the rules
        store.journal.write(lambda _views: Outcome([NewEvent(f"thread/{thread}", forged)]))
        seq = store.log.head().seq
    finally:
        store.close()
    verified = cli.run("log", "verify", "--json")
    assert verified.code == 1
    problems = json.loads(verified.out)["problems"]
    assert [(p["seq"], p["problem"]) for p in problems] == [
        (seq, f"question of step {step} answered while thread/{thread} was idle, "
              "not waiting")]


def test_the_worker_gives_a_waiting_entry_back_and_resumes_it_once_answered(
        cli: Cli, broker: Broker) -> None:
    """The job publishes `waiting` and the question over MQTT, `queue subscribe` shows
    it; the entry waits (no attempt failed, no lease held) and the worker resumes it."""
    pytest.importorskip("paho.mqtt")
    ok(cli, "workflow", "put", str(WORKFLOW))
    entry = ok(cli, "queue", "add", "--workflow", "approve-deploy", "-p", "ship 2.1.0",
               "--session", "w", "--agent", MOCK, "--broker", broker.url)["entry"]["id"]
    # A first subscribe makes the broker keep the job's messages for the follower.
    assert cli.run("queue", "subscribe", entry, "--wait", "0.2").code == 0
    following = subprocess.Popen([str(BIN / "uwf"), "queue", "subscribe", entry, "--follow"],
                                 env=cli.env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    try:
        worked = ok(cli, "worker", "--session", "w", "--once", "--allow-entry-commands")
        assert (worked["outcome"], worked["reason"]) == ("waiting", QUESTION)
        run = worked["run"]
        shown = ok(cli, "queue", "show", entry)
        assert (shown["status"], shown["jobStatus"], shown["attempts"], shown["lease"]) == (
            "waiting", "waiting", 0, None)
        # Nothing to lease while it waits: a worker moves on (exit 3, nothing eligible).
        assert cli.run("worker", "--session", "w", "--once", "--json").code == 3
        ok(cli, "thread", "answer", run, "--answer", '{"approved": true}')
        resumed = ok(cli, "worker", "--session", "w", "--once", "--allow-entry-commands")
        assert (resumed["outcome"], resumed["run"], resumed["attempt"]) == (
            "completed", run, 1)
        out, err = following.communicate(timeout=60)
    finally:
        following.kill()
    assert following.returncode == 0, err
    events = [json.loads(line)["event"] for line in out.splitlines()]
    assert events == [
        {"type": "status", "status": "running", "attempt": 1},
        {"type": "status", "status": "waiting", "attempt": 1, "outcome": "waiting",
         "question": QUESTION},
        {"type": "status", "status": "running", "attempt": 1},
        {"type": "status", "status": "completed", "attempt": 1, "outcome": "completed"}]
    kinds = [event["event"] for event in ok(cli, "queue", "logs", entry)["events"]]
    assert "waiting" in kinds
    assert "resumed" in kinds
    assert ok(cli, "log", "verify")["problems"] == []


# -- the moderator's reserved statuses, and when a waiting entry may go on -----------------

GRAPH = {"approver": {"approved": {"role": "deployer", "prompt": "Deploy"}}}
ASKED = {"status": "$ASK", "question": "Deploy?", "answerSchema": {"type": "boolean"},
         "answer": True}


def test_an_answered_question_resumes_the_asking_role_unless_an_edge_is_declared() -> None:
    from uwf.language.moderator import evaluate

    resumed = evaluate(GRAPH, "approver", ASKED, "ship")
    assert (resumed.role, resumed.status) == ("approver", "$ASK")
    assert resumed.prompt == 'You asked: "Deploy?". The answer: true'
    declared = {"approver": {**GRAPH["approver"],
                             "$ASK": {"role": "deployer", "prompt": "{{answer}}"}}}
    assert evaluate(declared, "approver", ASKED, "ship").role == "deployer"


def test_a_timeout_takes_its_declared_edge_or_blocks() -> None:
    from uwf.language.moderator import NoTransition, evaluate

    timed_out = {**ASKED, "status": "$TIMEOUT"}
    with pytest.raises(NoTransition) as blocked:
        evaluate(GRAPH, "approver", timed_out, "ship")
    assert blocked.value.what == 'no transition for role "approver" with status "$TIMEOUT"'
    assert blocked.value.status == "$TIMEOUT"
    declared = {"approver": {**GRAPH["approver"], "$TIMEOUT": {"role": "$END", "prompt": ""}}}
    assert evaluate(declared, "approver", timed_out, "ship").ends


def test_a_waiting_entry_goes_on_once_answered_killed_or_past_its_deadline() -> None:
    from uwf.queue.waiting import why_resume
    from uwf.threads.projection import Asked, ThreadState

    asked = Asked("S1", "approver", "Deploy?", "H", "2026-01-01T00:00:00.000Z", 1000)
    waiting = ThreadState("T", "W", "wf", "S", "/r", "t0", "t0", state="waiting", asked=asked)
    assert why_resume(waiting, 999) is None
    assert why_resume(waiting, 1000) == "its question's deadline passed"
    answered = msgspec.structs.replace(waiting, state="idle", asked=msgspec.structs.replace(
        asked, answer="A"))
    assert why_resume(answered, 0) == "answered"
    assert why_resume(msgspec.structs.replace(waiting, state="killed"), 0) == (
        "its run is killed")
    assert why_resume(None, 0) == "its run is gone"


def test_a_workflow_may_declare_ask_and_timeout_edges(cli: Cli, tmp_path: Path) -> None:
    """`$ASK` and `$TIMEOUT` are the moderator's statuses: an edge for either is taken
    whatever the role's schema lists, and its prompt may read the question and answer."""
    text = WORKFLOW.read_text("utf-8").replace(
        "    $TIMEOUT: $END\n",
        '    $TIMEOUT: $END\n    $ASK: {role: deployer, prompt: "{{question}}: {{answer.note}}"}\n')
    declared = tmp_path / "approve-deploy.yaml"
    declared.write_text(text, "utf-8")
    put = cli.run("workflow", "put", str(declared), "--json")
    assert put.code == 0, put.err
    assert "warnings" not in json.loads(put.out)
    assert put.err == ""
    thread = str(ok(cli, "thread", "start", "approve-deploy", "-p", "ship")["thread"])
    ok(cli, "thread", "run", thread, "--agent", MOCK)
    ok(cli, "thread", "answer", thread, "--answer", '{"approved": true, "note": "ok by ann"}')
    context = ok(cli, "agent", "context", thread, "deployer")
    assert context["edgePrompt"] == f"{QUESTION}: ok by ann"
