"""The run registry through the real CLI (SPEC §7): the lifecycle table rule by rule
and where rules conflict, archive and retention, resume, a run whose nodes are
gone, and bad input. Search, history and rebuilds are in test_run_search.py,
reruns in test_rerun.py; the helpers in runkit.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import snapshot
from tests.runkit import (
    DAY_MS,
    NOW,
    Fleet,
    git_repo,
    make_fleet,
    ms,
    new_cli,
    relay_workflow,
    run_in,
    ts,
)
from tests.threadkit import one_line_error

UNKNOWN = "01J7K9M2XNPQR5VWBCDF8G3H4T"  # a valid ULID no run has


def classified(fleet: Fleet, thread: str, expected: str, now: str | None = None) -> None:
    """`run show` says `expected`, derived and shown, and `run search --status` agrees."""
    run = fleet.run(thread, now)
    assert (run["lifecycle"], run["derivedLifecycle"]) == (expected, expected), run
    assert run["freshness"] == "valid"
    assert thread in fleet.search("--status", expected, now=now)


# -- the lifecycle table, one rule at a time -----------------------------------------------

def test_rule_7_a_run_with_no_step_is_queued(fleet: Fleet) -> None:
    thread = fleet.start()
    classified(fleet, thread, "queued")
    assert fleet.run(thread)["steps"] == 0
    assert fleet.invocations() == []


def test_a_record_has_a_bounded_title_and_inputs_digest(fleet: Fleet) -> None:
    prompt = "\n   \n  " + "T" * 100 + "\n" + "d" * 990 + " tail-beyond-the-digest"
    run = fleet.run(fleet.start(prompt=prompt))
    assert run["title"] == "T" * 80  # the first non-empty line, at most 80 characters
    assert run["inputsDigest"] == prompt[:1000]
    assert fleet.search("--text", "ddd") == [run["runId"]]
    assert fleet.search("--text", "tail-beyond") == []  # past the digest's bound


def test_rule_6_a_run_with_steps_and_nothing_in_flight_is_running(fleet: Fleet) -> None:
    thread = fleet.start()
    assert fleet.step(thread).code == 0
    classified(fleet, thread, "running")
    run = fleet.run(thread)
    assert (run["steps"], run["lastRole"], run["lastStatus"]) == (1, "a", "ok")


def test_rule_1_a_step_in_flight_is_running_until_its_deadline(fleet: Fleet) -> None:
    thread = fleet.start()
    with fleet.in_flight(thread, "a") as flight:
        deadline = flight["deadlineMs"]
        assert fleet.run(thread)["steps"] == 0  # no step yet: rule 7 would say queued
        classified(fleet, thread, "running")  # the wall clock: an hour before the deadline
        classified(fleet, thread, "running", now=str(deadline))  # at it: not past it
        assert thread not in fleet.search("--status", "stalled", now=str(deadline))
        resumed = fleet.ok("run", "resume", thread)
        assert resumed["next"] == {"role": "a", "prompt": "Carry the message",
                                   "agent": "relay", "inFlight": True}
    classified(fleet, thread, "running")  # the step ended: one step, rule 6


def test_rule_1_a_step_in_flight_past_its_deadline_is_stalled(fleet: Fleet) -> None:
    thread = fleet.start()
    with fleet.in_flight(thread, "a") as flight:
        past = str(flight["deadlineMs"] + 1)
        classified(fleet, thread, "stalled", now=past)
        assert thread not in fleet.search("--status", "running", now=past)
        # Stalled is the clock's word, not the log's: an earlier reading says running.
        classified(fleet, thread, "running", now=str(flight["deadlineMs"] - 1))


def test_rule_2_a_step_with_no_transition_blocks(fleet: Fleet) -> None:
    thread = fleet.start()
    fleet.act(a="stuck")
    assert fleet.step(thread).code == 0  # a reports a status its graph has no edge for
    classified(fleet, thread, "running")
    one_line_error(fleet.step(thread), 1, 'no transition for role "a" with status "stuck"')
    classified(fleet, thread, "blocked")
    assert [line.split()[1] for line in fleet.invocations()] == ["a"]


def test_rule_2_no_agent_configured_blocks(fleet: Fleet) -> None:
    fleet.kit.write_config(fleet.config(default=False))
    thread = fleet.start()
    one_line_error(fleet.step(thread), 1, "no agent configured", 'role "a"')
    classified(fleet, thread, "blocked")
    assert fleet.invocations() == []


@pytest.mark.parametrize("action", ["fail", "garbage"])
def test_rule_3_a_failed_last_step_is_failed(fleet: Fleet, action: str) -> None:
    thread = fleet.start()
    assert fleet.step(thread).code == 0
    head = fleet.run(thread)["head"]
    fleet.act(b=action)  # b exits non-zero, or prints what is not a StepNode hash
    one_line_error(fleet.step(thread), 1, "step failed")
    classified(fleet, thread, "failed")
    assert fleet.run(thread)["head"] == head  # the head did not move


def test_rule_4_a_run_ended_by_end_is_completed(fleet: Fleet) -> None:
    thread = fleet.start()
    assert fleet.ok("thread", "run", thread)["done"] is True
    classified(fleet, thread, "completed")
    assert fleet.run(thread)["steps"] == 3


def test_rule_5_a_killed_run_is_cancelled(fleet: Fleet) -> None:
    thread = fleet.start()
    fleet.ok("thread", "kill", thread, "--reason", "not needed")
    classified(fleet, thread, "cancelled")


def test_a_failure_then_a_good_step_is_no_longer_failed(fleet: Fleet) -> None:
    thread = fleet.start()
    fleet.act(a="fail")
    assert fleet.step(thread).code == 1
    classified(fleet, thread, "failed")
    fleet.act()
    assert fleet.step(thread).code == 0
    classified(fleet, thread, "running")  # the last step did not fail: rule 6


# -- where rules conflict: the first that matches wins ---------------------------------------

def test_a_step_in_flight_after_a_failure_is_running(fleet: Fleet) -> None:
    thread = fleet.start()
    fleet.act(a="fail")
    assert fleet.step(thread).code == 1
    classified(fleet, thread, "failed")
    with fleet.in_flight(thread, "a") as flight:
        classified(fleet, thread, "running", now=str(flight["deadlineMs"]))  # rule 1 over 3
        classified(fleet, thread, "stalled", now=str(flight["deadlineMs"] + 1))


def test_a_blocked_run_after_a_failure_is_blocked(fleet: Fleet) -> None:
    thread = fleet.start()
    fleet.act(a="fail")
    assert fleet.step(thread).code == 1
    fleet.kit.write_config(fleet.config(default=False))
    one_line_error(fleet.step(thread), 1, "no agent configured")
    classified(fleet, thread, "blocked")  # rule 2 over rule 3


def test_a_killed_run_whose_last_step_failed_is_failed(fleet: Fleet) -> None:
    thread = fleet.start()
    assert fleet.step(thread).code == 0
    fleet.act(b="fail")
    assert fleet.step(thread).code == 1
    fleet.ok("thread", "kill", thread)
    classified(fleet, thread, "failed")  # rule 3 over rule 5


def test_a_killed_run_with_steps_and_no_failure_is_cancelled(fleet: Fleet) -> None:
    thread = fleet.start()
    assert fleet.step(thread).code == 0
    fleet.ok("thread", "kill", thread)
    classified(fleet, thread, "cancelled")  # rule 5 over rule 6


# -- archive ---------------------------------------------------------------------------------

def test_archive_is_an_overlay_that_keeps_the_run_searchable(fleet: Fleet) -> None:
    done = fleet.start(prompt="First, a run that completes")
    fleet.ok("run", "resume", done, "--drive")
    failed = fleet.start(prompt="Then one that fails")
    fleet.act(a="fail")
    assert fleet.step(failed).code == 1
    before = fleet.ok("run", "show", failed, now=NOW)

    archived = fleet.ok("run", "archive", failed, "--reason", "a flaky agent", now=NOW)
    assert archived["found"] is True
    run = archived["run"]
    assert (run["lifecycle"], run["derivedLifecycle"], run["archived"]) == (
        "archived", "failed", True)
    assert (run["archivedAt"], run["archiveReason"]) == (NOW, "a flaky agent")
    assert fleet.ok("run", "show", failed, now=NOW) == archived
    # The archive mark is an event of the run: its sourceFingerprint moves on too.
    overlay = ("lifecycle", "archived", "archivedAt", "archiveReason", "sourceFingerprint")
    assert {key: value for key, value in run.items() if key not in overlay} == {
        key: value for key, value in before["run"].items() if key not in overlay}
    assert run["sourceFingerprint"] != before["run"]["sourceFingerprint"]

    listed = fleet.ok("run", "search", now=NOW)["runs"]
    assert [(r["runId"], r["lifecycle"], r["derivedLifecycle"]) for r in listed] == [
        (done, "completed", "completed"), (failed, "archived", "failed")]
    assert fleet.search("--include-archived", "false") == [done]
    assert fleet.search("--include-archived", "true") == [done, failed]
    assert fleet.search("--status", "archived") == [failed]
    assert fleet.search("--status", "failed") == [failed]  # by its derived lifecycle
    assert fleet.search("--status", "failed", "--include-archived", "false") == []
    assert fleet.search("--text", "archived") == [failed]

    # Archiving it again is refused: one line, exit 1, nothing written.
    store = snapshot(fleet.cli.home)
    one_line_error(fleet.uwf("run", "archive", failed), 1, "already archived")
    assert snapshot(fleet.cli.home) == store

    restored = fleet.ok("run", "archive", failed, "--unarchive", now=NOW)
    fingerprint = restored["run"].pop("sourceFingerprint")
    assert fingerprint not in (run["sourceFingerprint"], before["run"].pop("sourceFingerprint"))
    assert restored == before
    assert fleet.search("--status", "archived") == []
    assert fleet.search("--include-archived", "false") == [done, failed]
    store = snapshot(fleet.cli.home)
    one_line_error(fleet.uwf("run", "archive", failed, "--unarchive"), 1, "not archived")
    assert snapshot(fleet.cli.home) == store
    types = [e["type"] for e in fleet.kit.events("run.")]
    assert types == ["run.archived", "run.unarchived"]


def test_retention_archives_only_what_the_window_and_states_select(fleet: Fleet) -> None:
    now = ms(NOW)

    def at(days_ago: float) -> str:
        return ts(now - int(days_ago * DAY_MS))

    completed = fleet.start(prompt="old and completed", now=at(40))
    fleet.ok("run", "resume", completed, "--drive", now=at(40))
    failed = fleet.start(prompt="old and failed", now=at(39))
    fleet.act(a="fail")
    assert fleet.step(failed, now=at(39)).code == 1
    queued = fleet.start(prompt="old and queued", now=at(38))
    # Created long ago, but its last activity (a failed step) was 5 days ago.
    recent = fleet.start(prompt="old but recently active", now=at(41))
    assert fleet.step(recent, now=at(5)).code == 1
    edge = fleet.start(prompt="idle for exactly 30 days", now=at(30))
    assert fleet.run(edge)["updatedAt"] == at(30)
    runs = [completed, failed, queued, recent, edge]

    def retain(*args: str) -> dict[str, Any]:
        result: dict[str, Any] = fleet.ok("run", "archive", *args, now=NOW)
        return result

    def archived() -> set[str]:
        return {run for run in runs if fleet.run(run)["archived"]}

    # No window, nothing archived: 0 days is the default policy, and writes nothing.
    store = snapshot(fleet.cli.home)
    nothing = retain("--older-than-days", "0", "--state", "failed")
    assert (nothing["archived"], nothing["count"]) == ([], 0)
    assert snapshot(fleet.cli.home) == store

    picked = retain("--older-than-days", "30", "--state", "completed", "--state", "failed")
    assert picked["archived"] == [completed, failed]  # by createdAt
    assert (picked["count"], picked["cutoff"], picked["states"]) == (
        2, at(30), ["completed", "failed"])
    assert archived() == {completed, failed}
    assert fleet.run(failed)["derivedLifecycle"] == "failed"
    reasons = {e["data"]["reason"] for e in fleet.kit.events("run.archived")}
    assert reasons == {"retention: no activity for 30 days"}

    # Without states, every lifecycle: the old queued run; `edge` is not older than 30
    # days (its last activity is exactly the cutoff), `recent` was active 5 days ago.
    assert retain("--older-than-days", "30")["archived"] == [queued]
    store = snapshot(fleet.cli.home)
    assert retain("--older-than-days", "30")["archived"] == []  # nothing left to do
    assert snapshot(fleet.cli.home) == store
    assert retain("--older-than-days", "29", "--state", "failed")["archived"] == []
    assert retain("--older-than-days", "29")["archived"] == [edge]
    assert archived() == {completed, failed, queued, edge}
    assert retain("--older-than-days", "4", "--state", "failed")["archived"] == [recent]
    assert len(fleet.kit.events("run.archived")) == 5


# -- resume ----------------------------------------------------------------------------------

def test_resume_is_read_only_and_the_same_on_repeat(fleet: Fleet) -> None:
    thread = fleet.start(prompt="Resume me")
    assert fleet.step(thread).code == 0
    store = snapshot(fleet.cli.home)
    first = fleet.uwf("run", "resume", thread, now=NOW)
    second = fleet.uwf("run", "resume", thread, now=NOW)
    assert first.code == 0, first
    assert first.err == "", first
    assert second.out == first.out
    assert snapshot(fleet.cli.home) == store
    assert fleet.invocations() == [f"{thread} a"]
    resumed = fleet.ok("run", "resume", thread, "--limit", "0", now=NOW)
    assert resumed["next"] == {
        "role": "b", "prompt": "After a: a says ok",
        "agent": {"name": "relay", "argv": [str(fleet.kit.tmp / "agents" / "relay")],
                  "source": "defaultAgent"}}
    assert resumed["run"] == fleet.run(thread, now=NOW)
    assert resumed["recentSteps"] == []
    log = fleet.kit.log(thread)
    recent = fleet.ok("run", "resume", thread, "--limit", "3")["recentSteps"]
    assert recent == [{"hash": log[0]["hash"], "role": "a", "agent": "script"}]


def test_resume_once_takes_one_step_and_drive_steps_to_the_end(fleet: Fleet) -> None:
    thread = fleet.start()
    once = fleet.ok("run", "resume", thread, "--once")
    assert (once["drive"], once["run"]["steps"]) == ({"mode": "once"}, 1)
    assert once["run"]["lifecycle"] == "running"
    assert fleet.invocations() == [f"{thread} a"]
    driven = fleet.ok("run", "resume", thread, "--drive")
    assert (driven["drive"], driven["run"]["steps"]) == ({"mode": "drive"}, 3)
    assert driven["run"]["lifecycle"] == "completed"
    assert fleet.invocations() == [f"{thread} {role}" for role in "abc"]
    assert fleet.ok("run", "resume", thread)["nextActions"] == [f"uwf run rerun {thread}"]
    store = snapshot(fleet.cli.home)
    one_line_error(fleet.uwf("run", "resume", thread, "--once"), 1, "has ended")
    assert snapshot(fleet.cli.home) == store


@pytest.mark.parametrize("mode", ["--once", "--drive"])
def test_resume_with_no_agent_configured_fails_closed_as_blocked(fleet: Fleet,
                                                                 mode: str) -> None:
    fleet.kit.write_config(fleet.config(default=False))
    thread = fleet.start()
    shown = fleet.ok("run", "resume", thread)  # read-only: says what is missing
    assert shown["next"] == {"role": "a", "prompt": "Carry the message", "agent": None}
    assert "configure an agent" in shown["nextActions"][0]
    one_line_error(fleet.uwf("run", "resume", thread, mode), 1, "no agent configured")
    classified(fleet, thread, "blocked")
    assert fleet.invocations() == []
    assert [e["data"]["reason"] for e in fleet.kit.events("thread.blocked")] == ["no-agent"]


# -- a run whose nodes are gone ------------------------------------------------------------

def test_a_run_whose_nodes_are_gone_shows_as_missing_never_live(fleet: Fleet) -> None:
    fleet.cli.env["UWF_NODES"] = "loose"  # the older layout: loose node files
    done = fleet.start(prompt="Its head will be lost")
    fleet.ok("run", "resume", done, "--drive")
    queued = fleet.start(prompt="Its start will be lost")
    intact = fleet.start(prompt="Nothing lost here")
    known = fleet.run(done, now=NOW)
    start = fleet.ok("thread", "show", queued)["head"]
    for hash_ in (known["head"], start):
        (fleet.cli.home / "cas" / hash_[:2] / f"{hash_}.json").unlink()

    shown = fleet.ok("run", "show", done, now=NOW)
    assert "run" not in shown  # never a live record
    assert (shown["found"], shown["freshness"], shown["missingNodes"]) == (
        False, "missing", [known["head"]])
    assert shown["lastKnown"] == {**known, "freshness": "missing"}
    assert fleet.ok("run", "show", queued)["missingNodes"] == [start]
    found = fleet.ok("run", "search", now=NOW)["runs"]
    assert [(r["runId"], r["freshness"]) for r in found] == [
        (done, "missing"), (queued, "missing"), (intact, "valid")]

    store = snapshot(fleet.cli.home)
    for args in (["run", "resume", done], ["run", "rerun", done], ["run", "rerun", queued]):
        one_line_error(fleet.uwf(*args), 1, "no longer holds")
    assert snapshot(fleet.cli.home) == store


# -- bad input -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Fleet, dict[str, str]]:
    """A store with a completed run, an archived one and one running (idle)."""
    tmp = tmp_path_factory.mktemp("bad-input")
    fleet = make_fleet(new_cli(tmp), tmp)
    ids = {"completed": fleet.start(), "archived": fleet.start(), "running": fleet.start()}
    fleet.ok("run", "resume", ids["completed"], "--drive")
    fleet.ok("run", "archive", ids["archived"])
    fleet.ok("run", "resume", ids["running"], "--once")
    fleet.kit.workflow_file(relay_workflow("b"), "relay-changed.yaml")
    return fleet, ids


BAD_INPUT: list[tuple[list[str], int, str]] = [
    # Unknown runs: a valid ULID no run has is not found (1); not a ULID is usage (2).
    *[([*command, UNKNOWN], 1, f"no run {UNKNOWN}") for command in (
        ["run", "show"], ["run", "resume"], ["run", "resume", "--once"],
        ["run", "resume", "--drive"], ["run", "archive"], ["run", "archive", "--unarchive"],
        ["run", "rerun"], ["run", "rerun", "--incremental"])],
    *[([*command, "not-a-run"], 2, "is not a thread id") for command in (
        ["run", "show"], ["run", "resume"], ["run", "archive"], ["run", "rerun"])],
    # (A run id in lower case, or its start, is accepted: tests/e2e/test_cli_conventions.py.)
    (["run", "show", "{completed}x"], 2, "is not a thread id"),
    # Times, limits, offsets, status words, scopes.
    (["run", "search", "--since", "yesterday"], 2, "invalid time 'yesterday'"),
    (["run", "search", "--until", "2030-13-01"], 2, "invalid time '2030-13-01'"),
    (["run", "list", "--since", "2030-01-01T25:00:00Z"], 2, "invalid time"),
    *[([*command, "--limit", value], 2, "--limit") for value in ("-1", "x", "1.5")
      for command in (["run", "search"], ["run", "list"], ["history"])],
    (["run", "search", "--offset", "-1"], 2, "--offset"),
    # Past SQLite's 64-bit INTEGER: refused, not an overflow inside the query.
    (["run", "search", "--limit", "99999999999999999999"], 2, "--limit: must be at most"),
    (["history", "--offset", str(2**63)], 2, "--offset: must be at most"),
    (["history", "--offset", "many"], 2, "--offset"),
    (["run", "resume", "{running}", "--limit", "-1"], 2, "--limit"),
    *[([*command, "--status", "done"], 2, "invalid choice: 'done'")
      for command in (["run", "search"], ["run", "list"], ["history"])],
    (["run", "archive", "--older-than-days", "3", "--state", "archived"], 2, "--state"),
    (["run", "search", "--include-archived", "maybe"], 2, "--include-archived"),
    (["run", "search", "--scope", "everywhere"], 2, "--scope"),
    # An unknown workflow is not found.
    *[([*command, flag, "no-such-flow"], 1, "no workflow named 'no-such-flow'")
      for command in (["run", "search"], ["history"]) for flag in ("--workflow", "--app")],
    (["run", "rerun", "{completed}", "--workflow", "no-such-flow"], 1, "no-such-flow"),
    # Flags that exclude each other, or a command with nothing to act on.
    (["run", "resume", "{running}", "--once", "--drive"], 2, "--once and --drive"),
    (["run", "archive"], 2, "--older-than-days"),
    (["run", "archive", "--reason", "tidy"], 2, "--older-than-days"),
    (["run", "archive", "--state", "failed"], 2, "--older-than-days"),
    (["run", "archive", "{completed}", "--state", "failed"], 2, "--older-than-days"),
    (["run", "archive", "{completed}", "--older-than-days", "3"], 2, "--older-than-days"),
    (["run", "archive", "--older-than-days", "3", "--unarchive"], 2, "--older-than-days"),
    (["run", "archive", "--older-than-days", "-1"], 2, "--older-than-days"),
    # Refused by the state of the run.
    (["run", "archive", "{archived}"], 1, "already archived"),
    (["run", "archive", "{completed}", "--unarchive"], 1, "not archived"),
    (["run", "rerun", "{running}"], 1, "is running"),
    (["run", "rerun", "{running}", "--incremental"], 1, "is running"),
    (["run", "rerun", "{running}", "--workflow", "{file}"], 1, "is running"),  # not put
    (["run", "resume", "{completed}", "--drive"], 1, "has ended"),
]


@pytest.mark.parametrize(("args", "code", "says"), BAD_INPUT,
                         ids=[" ".join(args) for args, _, _ in BAD_INPUT])
def test_bad_input_is_one_line_with_the_spec_exit_code_and_writes_nothing(
        seeded: tuple[Fleet, dict[str, str]], args: list[str], code: int, says: str) -> None:
    fleet, ids = seeded
    values = {**ids,
              "file": str(fleet.kit.tmp / "relay-changed.yaml")}
    argv = [arg.format(**values) for arg in args]
    store = snapshot(fleet.cli.home)
    log = fleet.cli.log_bytes()
    one_line_error(fleet.uwf(*argv), code, says)
    assert fleet.cli.log_bytes() == log
    assert snapshot(fleet.cli.home) == store
    assert fleet.invocations() == [f"{ids['completed']} {role}" for role in "abc"] + [
        f"{ids['running']} a"]


# -- the service's typed result is the CLI's payload ---------------------------------------

def test_run_show_returns_a_run_record_that_prints_as_the_cli_json(fleet: Fleet) -> None:
    from uwf.payload import to_payload
    from uwf.runs.results import RunRecord, RunShown
    from uwf.runs.service import show
    from uwf.store import Store

    thread = fleet.start()
    assert fleet.step(thread).code == 0
    store = Store.open(fleet.cli.home)
    try:
        shown = show(store, thread)
    finally:
        store.close()
    assert isinstance(shown, RunShown)
    assert isinstance(shown.run, RunRecord)
    assert shown.run.last_role == "a"
    assert to_payload(shown) == fleet.ok("run", "show", thread, "--json")


def test_run_counts_are_the_registrys_lifecycle_counts_without_a_scan(fleet: Fleet) -> None:
    """`run counts`: runs per derived lifecycle (archived ones too), in all and
    archived; the same counts as `registry show` and as `run search`'s totals."""
    assert fleet.ok("run", "counts") == {"scope": "home", "total": 0, "lifecycles": {},
                                         "archived": 0}
    done = fleet.start(prompt="A run that completes")
    fleet.ok("run", "resume", done, "--drive")
    failed = fleet.start(prompt="One that fails")
    fleet.act(a="fail")
    assert fleet.step(failed).code == 1
    repo = git_repo(fleet.cli.home.parent / "kestrel")
    fleet.start(prompt="One never stepped", repo=repo)
    fleet.ok("run", "archive", failed, "--reason", "flaky", now=NOW)

    counted = fleet.ok("run", "counts")
    assert counted == {"scope": "home", "total": 3, "archived": 1,
                       "lifecycles": {"completed": 1, "failed": 1, "queued": 1}}
    assert fleet.ok("registry", "show")["runs"]["lifecycles"] == counted["lifecycles"]
    for state, count in counted["lifecycles"].items():
        assert fleet.ok("run", "search", "--status", state, now=NOW)["total"] == count
    # --scope repo: the runs of the working directory's repo, one index count each.
    scoped = run_in(fleet.cli, repo, "run", "counts", "--scope", "repo")
    assert scoped.code == 0, scoped.err
    assert json.loads(scoped.out) == {"scope": "repo", "total": 1, "archived": 0,
                                      "lifecycles": {"queued": 1}}
    # Bad input: one line, exit 2, nothing written.
    store = snapshot(fleet.cli.home)
    one_line_error(fleet.uwf("run", "counts", "--scope", "nope"), 2, "--scope", "nope")
    one_line_error(fleet.uwf("run", "counts", "extra"), 2, "unrecognized arguments")
    assert snapshot(fleet.cli.home) == store
