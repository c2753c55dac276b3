"""`uwf queue ...` through the real CLI: order, filters, aliases, drain, pick per session,
key de-duplication, batch add, the timeline, and every refusal (one line, the SPEC's
exit code, the log unchanged)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.queuekit import Queue, at

SPEC_FIELDS = {"id", "status", "priority", "enqueuedAt", "workflow", "prompt", "run", "repo",
               "session", "agent", "timeoutSec", "idleTimeoutSec", "expectedArtifacts",
               "note", "key", "attempts", "lease", "nextEligibleAt", "parkedReason"}


def ids_of(payload: dict[str, object]) -> list[str]:
    entries = payload["entries"]
    assert isinstance(entries, list)
    return [entry["id"] for entry in entries]


def test_an_entry_has_every_field_with_its_default(q: Queue, tmp_path: Path) -> None:
    entry_id = q.add("--repo", str(tmp_path), now=at(0))
    entry = q.entry(entry_id)
    assert set(entry) >= SPEC_FIELDS
    assert entry["status"] == "ready"
    assert entry["jobStatus"] == "pending"
    assert (entry["priority"], entry["timeoutSec"], entry["idleTimeoutSec"]) == (100, 3600, 120)
    assert entry["enqueuedAt"] == at(0)
    assert entry["repo"] == str(tmp_path)
    assert (entry["attempts"], entry["lease"], entry["nextEligibleAt"]) == (0, None, None)
    assert entry["workflow"] == "solve-issue"
    assert len(entry["workflowHash"]) == 13
    full = q.ok("queue", "add", "--workflow", "solve-issue", "-p", "Ship it", "--priority",
                "7", "--note", "urgent", "--session", "tmux:a", "--agent", "uwf-mock",
                "--timeout", "60", "--idle-timeout", "5", "--artifact", "out.md",
                "--artifact", "log.txt", "--key", "ship")["entry"]
    assert {key: full[key] for key in ("priority", "note", "session", "agent", "timeoutSec",
                                       "idleTimeoutSec", "expectedArtifacts", "key")} == {
        "priority": 7, "note": "urgent", "session": "tmux:a", "agent": "uwf-mock",
        "timeoutSec": 60, "idleTimeoutSec": 5, "expectedArtifacts": ["out.md", "log.txt"],
        "key": "ship"}


def test_queue_order_is_priority_then_enqueued_at_then_id(q: Queue, tmp_path: Path) -> None:
    late_urgent = q.add("--priority", "1", now=at(30))
    first = q.add(now=at(10))
    second = q.add(now=at(20))
    low = q.add("--priority", "500", now=at(0))
    # One batch: the same enqueuedAt, so the ids (increasing in file order) break the tie.
    path = q.batch(tmp_path / "b.jsonl", [
        {"workflow": "solve-issue", "prompt": f"task {n}", "priority": 50} for n in range(3)])
    batch = q.ok("queue", "add", "--batch", str(path), now=at(40))["ids"]
    assert ids_of(q.ok("queue", "list")) == [late_urgent, *batch, first, second, low]
    page = q.ok("queue", "list", "--limit", "2", "--offset", "1")
    assert ids_of(page) == batch[:2]
    assert page["total"] == 7


def test_list_filters_by_status_repo_and_session_with_aliases(q: Queue, tmp_path: Path
                                                              ) -> None:
    repo_a, repo_b = tmp_path / "a", tmp_path / "b"
    repo_a.mkdir()
    repo_b.mkdir()
    a1 = q.add("--session", "s1", "--repo", str(repo_a), now=at(0))
    a2 = q.add("--session", "s2", "--repo", str(repo_a), now=at(1))
    b1 = q.add("--session", "s1", "--repo", str(repo_b), now=at(2))
    q.ok("queue", "status", a2, "--set", "completed")
    assert ids_of(q.ok("queue", "list", "--session", "s1")) == [a1, b1]
    assert ids_of(q.ok("queue", "list", "--repo", str(repo_a))) == [a1, a2]
    for word in ("ready", "pending"):
        assert ids_of(q.ok("queue", "list", "--status", word)) == [a1, b1]
    for word in ("drained", "completed"):
        assert ids_of(q.ok("queue", "list", "--status", word)) == [a2]
    assert ids_of(q.ok("queue", "list", "--status", "pending", "--repo", str(repo_b),
                       "--session", "s1")) == [b1]
    assert q.ok("queue", "list", "--status", "error")["total"] == 0


def test_status_set_takes_the_job_registry_words(q: Queue) -> None:
    entry_id = q.add()
    expected = {"error": ("parked", "error"), "pending": ("ready", "pending"),
                "completed": ("drained", "completed"), "cancelled": ("cancelled", "cancelled"),
                "ready": ("ready", "pending")}
    for word, (status, job) in expected.items():
        entry = q.ok("queue", "status", entry_id, "--set", word)
        assert (entry["status"], entry["jobStatus"]) == (status, job)
    assert q.entry(entry_id)["parkedReason"] is None


def test_drain_marks_the_next_ready_entries_in_order(q: Queue, tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    here = [q.add("--repo", str(tmp_path / "x"), "--priority", str(p), now=at(p))
            for p in (3, 1, 2)]
    other = q.add("--repo", str(tmp_path / "y"), "--priority", "0")
    drained = q.ok("queue", "drain", "--limit", "2", "--repo", str(tmp_path / "x"))
    assert [e["id"] for e in drained["drained"]] == [here[1], here[2]]
    assert {e["status"] for e in drained["drained"]} == {"drained"}
    rest = q.ok("queue", "drain")
    assert [e["id"] for e in rest["drained"]] == [other, here[0]]
    assert q.ok("queue", "drain") == {"count": 0, "drained": []}
    assert q.ok("queue", "list", "--status", "ready")["total"] == 0


def test_pick_leases_the_first_eligible_entry_of_its_session(q: Queue) -> None:
    q.policy("--max-concurrent", "2")
    a_late = q.add("--session", "a", now=at(5))
    b_only = q.add("--session", "b", now=at(0))
    a_first = q.add("--session", "a", "--priority", "10", now=at(9))
    assert q.text("queue", "pick", "--session", "a", now=at(10)) == a_first
    assert q.entry(a_first)["status"] == "leased"
    assert q.entry(a_first)["jobStatus"] == "running"
    assert q.text("queue", "pick", "--session", "a", now=at(10)) == a_late
    a_third = q.add("--session", "a", now=at(10))
    # Session a holds its ceiling's two leases: a third waits...
    err = q.refused(3, "queue", "pick", "--session", "a", now=at(10))
    assert "2 of 2 leases are active in session a" in err
    # ...but the ceiling is per session: b's work is never blocked by a's.
    assert q.text("queue", "pick", "--session", "b", now=at(10)) == b_only
    q.ok("queue", "status", a_first, "--set", "completed")
    assert q.text("queue", "pick", "--session", "a", now=at(11)) == a_third
    q.ok("queue", "cancel", a_late)
    err = q.refused(3, "queue", "pick", "--session", "c", now=at(11))
    assert "session c" in err


def test_a_key_returns_the_live_entry_instead_of_adding(q: Queue) -> None:
    first = q.ok("queue", "add", "--workflow", "solve-issue", "-p", "one", "--key", "K")
    again = q.ok("queue", "add", "--workflow", "solve-issue", "-p", "two", "--key", "K")
    assert first["added"] is True
    assert again["added"] is False
    assert again["entry"]["id"] == first["entry"]["id"]
    assert again["entry"]["prompt"] == "one"
    assert q.ok("queue", "list")["total"] == 1
    # Once the entry is cancelled (or drained) the key is free again.
    q.ok("queue", "cancel", first["entry"]["id"])
    third = q.ok("queue", "add", "--workflow", "solve-issue", "-p", "three", "--key", "K")
    assert third["added"] is True
    assert third["entry"]["id"] != first["entry"]["id"]


def test_batch_add_is_one_write_with_keys_and_runs(q: Queue, tmp_path: Path) -> None:
    run = q.ok("thread", "start", "solve-issue", "-p", "An old run", "--repo",
               str(tmp_path / "r"))["thread"]
    existing = q.ok("queue", "add", "--workflow", "solve-issue", "-p", "x", "--key",
                    "old")["entry"]["id"]
    before = len(q.events())
    path = q.batch(tmp_path / "batch.jsonl", [
        {"workflow": "solve-issue", "prompt": "one", "session": "s", "key": "k1"},
        "",
        {"run": run, "priority": 3, "expectedArtifacts": ["a.md"]},
        {"workflow": "solve-issue", "prompt": "dup", "key": "k1"},
        {"workflow": "solve-issue", "prompt": "dup of an old one", "key": "old"},
    ])
    result = q.ok("queue", "add", "--batch", str(path))
    assert (result["count"], result["added"], result["existing"]) == (4, 2, 2)
    ids = result["ids"]
    assert ids[2] == ids[0]
    assert ids[3] == existing
    events = q.events()[before:]
    assert [e["type"] for e in events] == ["queue.added", "queue.added"]
    assert [e["batch"] for e in events] == [[1, 2], [2, 2]]  # one write
    from_run = q.entry(ids[1])
    assert (from_run["run"], from_run["workflow"], from_run["prompt"]) == (run, None, None)
    assert from_run["repo"] == str(tmp_path / "r")


@pytest.mark.parametrize(("line", "code", "words"), [
    ("{not json", 2, "line 2"),
    ('{"workflow": "solve-issue", "prompt": "p", "priority": "high"}', 2, "priority"),
    ('{"workflow": "solve-issue", "prompt": "p", "colour": "red"}', 2, "colour"),
    ('{"workflow": "no-such-flow", "prompt": "p"}', 1, "no-such-flow"),
    ('{"run": "01MB23Y70010GPA2PQX31XGT24"}', 1, "no run"),
    ('{"workflow": "solve-issue"}', 2, "prompt"),
    # PostgreSQL keeps no NUL in text: such an entry could be added there, never leased.
    ('{"workflow": "solve-issue", "prompt": "a\\u0000b"}', 2, "prompt holds a NUL"),
    ('{"workflow": "solve-issue", "prompt": "p", "expectedArtifacts": ["x\\u0000"]}', 2,
     "expectedArtifacts holds a NUL"),
])
def test_one_bad_line_rejects_the_batch(q: Queue, tmp_path: Path, line: str, code: int,
                                        words: str) -> None:
    good = json.dumps({"workflow": "solve-issue", "prompt": "fine"})
    path = q.batch(tmp_path / "bad.jsonl", [good, line, good])
    err = q.refused(code, "queue", "add", "--batch", str(path))
    assert "line 2" in err
    assert words in err
    assert q.ok("queue", "list")["total"] == 0


def test_an_entry_with_a_nul_is_refused_on_every_surface(q: Queue, cli: Cli) -> None:
    """What MCP and the dashboard hand the service (the command line refuses a NUL in
    an argument before): refused, nothing written."""
    from uwf.errors import UsageError
    from uwf.queue.service import add, entry_spec
    from uwf.store import Store

    store = Store.open(cli.home)
    before = len(q.events())
    with pytest.raises(UsageError, match="note holds a NUL"):
        add(store, entry_spec({"workflow": "solve-issue", "prompt": "p", "note": "\x00"}),
            store.settings)
    assert len(q.events()) == before


def test_batch_refusals(q: Queue, tmp_path: Path) -> None:
    q.refused(1, "queue", "add", "--batch", str(tmp_path / "absent.jsonl"))
    empty = q.batch(tmp_path / "empty.jsonl", ["", "  "])
    q.refused(2, "queue", "add", "--batch", str(empty))
    good = q.batch(tmp_path / "good.jsonl", [{"workflow": "solve-issue", "prompt": "p"}])
    assert "--priority" in q.refused(2, "queue", "add", "--batch", str(good),
                                     "--priority", "3")


@pytest.mark.parametrize(("args", "code"), [
    (["--priority", "abc"], 2),
    (["--priority", "1.5"], 2),
    (["--priority", "10000000000"], 2),
    (["--priority", "-10000000000"], 2),
    (["--timeout", "0"], 2),
    (["--idle-timeout", "-1"], 2),
    (["--key", ""], 2),
])
def test_bad_add_values_are_usage_errors(q: Queue, args: list[str], code: int) -> None:
    q.refused(code, "queue", "add", "--workflow", "solve-issue", "-p", "p", *args)


def test_add_names_a_workflow_and_prompt_or_a_run(q: Queue) -> None:
    q.refused(1, "queue", "add", "--workflow", "nope", "-p", "p")
    q.refused(1, "queue", "add", "--workflow", "0000000000000", "-p", "p")
    q.refused(2, "queue", "add", "--workflow", "solve-issue")
    q.refused(2, "queue", "add", "--workflow", "solve-issue", "-p", "   ")
    q.refused(2, "queue", "add", "-p", "p")
    q.refused(1, "queue", "add", "--run", "01MB23Y70010GPA2PQX31XGT24")
    q.refused(2, "queue", "add", "--run", "not-a-run")
    run = q.ok("thread", "start", "solve-issue", "-p", "r")["thread"]
    q.refused(2, "queue", "add", "--run", run, "--workflow", "solve-issue", "-p", "p")
    q.refused(2, "queue", "add", "--run", run, "-p", "p")
    assert q.ok("queue", "add", "--run", run)["entry"]["run"] == run


def test_unknown_ids_and_statuses(q: Queue) -> None:
    entry_id = q.add()
    unknown = "01MB23Y70010GPA2PQX31XGT24"
    for command in (["queue", "show"], ["queue", "cancel"], ["queue", "logs"]):
        q.refused(1, *command, unknown)
        q.refused(2, *command, "bogus")
    q.refused(1, "queue", "status", unknown, "--set", "ready")
    q.refused(2, "queue", "status", entry_id, "--set", "bogus")
    q.refused(2, "queue", "list", "--status", "bogus")
    q.refused(1, "queue", "status", entry_id, "--set", "pending")  # already ready
    q.refused(1, "queue", "status", entry_id, "--set", "running")  # leased only by a lease
    q.ok("queue", "cancel", entry_id, "--reason", "not needed")
    q.refused(1, "queue", "cancel", entry_id)
    q.refused(2, "queue", "pick")
    q.refused(2, "queue", "logs")
    q.refused(2, "queue", "logs", entry_id, "--list")


def test_logs_show_the_entry_timeline(q: Queue) -> None:
    entry_id = q.add(now=at(0))
    other = q.add(now=at(1))
    lease = q.lease(now=at(2))[0]
    q.ok("sched", "release", entry_id, "--lease", lease["leaseId"], "--failed", "--reason",
         "boom", now=at(3))
    q.ok("queue", "status", entry_id, "--set", "error", now=at(4))
    timeline = q.ok("queue", "logs", entry_id)
    assert timeline["status"] == "parked"
    assert [(e["event"], e["from"], e["to"]) for e in timeline["events"]] == [
        ("registered", None, "ready"), ("leased", "ready", "leased"),
        ("released", "leased", "ready"), ("status_changed", "ready", "parked")]
    assert timeline["events"][2]["data"]["reason"] == "boom"
    assert timeline["events"][2]["data"]["attempts"] == 1
    assert [e["ts"] for e in timeline["events"]] == [at(0), at(2), at(3), at(4)]
    tail = q.ok("queue", "logs", entry_id, "--tail", "1")["events"]
    assert [e["event"] for e in tail] == ["status_changed"]
    listed = q.ok("queue", "logs", "--list")
    assert [(e["id"], e["status"], e["events"]) for e in listed["entries"]] == [
        (entry_id, "parked", 4), (other, "ready", 1)]
    human = q.text("queue", "logs", entry_id)  # not a terminal: JSON too
    assert json.loads(human)["id"] == entry_id


def test_views_rebuilt_print_the_same(q: Queue, cli: Cli) -> None:
    first = q.add("--session", "a", now=at(0))
    q.add("--priority", "5", now=at(1))
    q.policy("--max-concurrent", "3", "--backoff-base-ms", "500")
    leases = q.lease(now=at(2))
    q.ok("sched", "release", first, "--lease", next(
        lease["leaseId"] for lease in leases if lease["id"] == first), "--failed", now=at(3))
    commands = [["queue", "list"], ["queue", "show", first], ["sched", "plan"],
                ["sched", "policy", "show"], ["queue", "logs", "--list"]]
    before = [q.text(*command, now=at(4)) for command in commands]
    assert q.ok("registry", "verify")["ok"] is True
    assert q.ok("log", "verify")["ok"] is True
    shutil.rmtree(cli.home / "views")
    assert [q.text(*command, now=at(4)) for command in commands] == before


def test_the_cli_and_the_api_share_one_declaration_of_words_and_bounds() -> None:
    """The choices and bounds are declared once, in each feature's cheap `terms` module;
    the CLI's arguments and the services use the same objects, and importing the CLI
    loads no engine (`uwf --help` stays cheap)."""
    import subprocess
    import sys
    from typing import get_args

    from uwf.queue import commands, terms
    from uwf.queue import service as api
    from uwf.runs import commands as run_commands
    from uwf.runs import terms as run_terms
    from uwf.threads import commands as thread_commands
    from uwf.threads import terms as thread_terms

    assert vars(commands)["Priority"] is vars(api)["Priority"] is terms.Priority
    assert vars(commands)["Status"] is terms.StatusWord
    assert vars(commands)["TimeoutSec"] is vars(api)["TimeoutSec"]
    assert get_args(terms.StatusWord) == (*terms.STATUSES, *(
        word for word in terms.ALIASES if word not in terms.STATUSES))
    assert set(terms.ALIASES.values()) == set(terms.STATUSES)
    assert vars(run_commands)["Lifecycle"] is run_terms.Lifecycle
    assert run_terms.LIFECYCLES[:len(run_terms.DERIVED)] == run_terms.DERIVED
    assert vars(thread_commands)["StatusFilter"] is thread_terms.StatusFilter
    assert set(get_args(thread_terms.StatusFilter)) == {*thread_terms.STATES, "active"}
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, uwf.cli.main; "
         "print(sorted(m for m in sys.modules if m.startswith('uwf.engine')))"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


# -- typed results ------------------------------------------------------------------------

def test_the_services_return_typed_results_that_print_as_the_cli_does(q: Queue, cli: Cli
                                                                       ) -> None:
    from uwf.payload import to_payload
    from uwf.queue import sched
    from uwf.queue import service as api
    from uwf.queue.results import EntryRecord, Planned
    from uwf.store import Store

    first = q.add("--session", "a", now=at(0))
    q.add("--session", "a", now=at(1))
    q.add(now=at(2))
    q.lease("--session", "a", now=at(3))
    store = Store.open(cli.home, now=at(4))
    try:
        shown, planned = api.show(store.read(), first), sched.plan(store)
    finally:
        store.close()
    assert isinstance(shown, EntryRecord)
    assert shown.lease is not None
    assert to_payload(shown) == q.ok("queue", "show", first, now=at(4))
    assert isinstance(planned, Planned)
    assert planned.skipped_counts.concurrency_ceiling == 1
    assert to_payload(planned) == q.ok("sched", "plan", now=at(4))


def test_counts_are_per_status_with_the_window_s_throughput(q: Queue) -> None:
    """Every status named (0 when none), the total, and the entries added and finished
    (drained, by `queue drain` or `sched complete`) in the last N minutes only."""
    empty = q.ok("queue", "counts", now=at(0))
    assert empty["statuses"] == {"ready": 0, "leased": 0, "drained": 0, "parked": 0,
                                 "cancelled": 0, "waiting": 0}
    assert (empty["total"], empty["added"], empty["finished"]) == (0, 0, 0)
    early = q.add(now=at(0))
    q.ok("queue", "drain", "--limit", "1", now=at(10))  # drains `early`, long before
    late = [q.add(now=at(7200 + n)) for n in range(3)]
    q.ok("queue", "cancel", late[0], now=at(7210))
    [lease] = q.lease("--limit", "1", now=at(7220))
    q.ok("sched", "complete", lease["id"], "--lease", lease["leaseId"], now=at(7230))
    counts = q.ok("queue", "counts", now=at(7260))
    assert counts["statuses"] == {"ready": 1, "leased": 0, "drained": 2, "parked": 0,
                                  "cancelled": 1, "waiting": 0}
    assert counts["total"] == 4
    assert (counts["minutes"], counts["since"]) == (60, at(7260 - 3600))
    assert (counts["added"], counts["finished"], counts["exact"]) == (3, 1, True)
    whole = q.ok("queue", "counts", "--minutes", "1440", now=at(7260))
    assert (whole["added"], whole["finished"]) == (4, 2)
    assert q.entry(early)["status"] == "drained"
    refused = q.cli.run("queue", "counts", "--minutes", "0")
    assert refused.code == 2
    assert refused.err.splitlines() == [
        "uwf: error: argument --minutes: must be 1 or more, not 0; see `uwf queue counts "
        "--help`"]
