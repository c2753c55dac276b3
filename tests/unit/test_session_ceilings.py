"""Ceilings per session label (SPEC §8, issue 17): sessions with different labels
partition the work and never block each other, sessions sharing a label compete
under its ceiling, entries without a session share a default pool, and an optional
overall cap bounds them all. All of it is policy data, replayed like any event."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import Cli
from tests.queuekit import Queue, at
from uwf.engine.clock import parse_instant


def test_a_session_holding_a_job_never_blocks_another_session(q: Queue) -> None:
    """The default policy (maxConcurrent 1): tmux:a's lease leaves tmux:b's pool free."""
    a_job = q.add("--session", "tmux:a", now=at(0))
    b_job = q.add("--session", "tmux:b", now=at(1))
    a_next = q.add("--session", "tmux:a", now=at(2))
    assert q.text("queue", "pick", "--session", "tmux:a", now=at(3)) == a_job
    assert q.text("queue", "pick", "--session", "tmux:b", now=at(3)) == b_job
    # Sharing a label, they compete: tmux:a's second job waits for its first.
    err = q.refused(3, "queue", "pick", "--session", "tmux:a", now=at(3))
    assert "1 of 1 leases are active in session tmux:a" in err
    q.ok("queue", "status", a_job, "--set", "completed", now=at(4))
    assert q.text("queue", "pick", "--session", "tmux:a", now=at(5)) == a_next


def test_entries_without_a_session_share_the_default_pool(q: Queue) -> None:
    plain = [q.add(now=at(n)) for n in range(2)]
    tagged = q.add("--session", "s1", now=at(3))
    granted = q.ok("sched", "lease", now=at(4))  # every pool with ready work, once each
    assert [lease["id"] for lease in granted["leases"]] == [plain[0], tagged]
    err = q.refused(3, "sched", "lease", now=at(4))
    assert "the default pool" in err
    plan = q.ok("sched", "plan", now=at(4))
    assert plan["pools"] == [{"session": None, "ceiling": 1, "active": 1}]
    assert plan["skippedCounts"]["concurrency-ceiling"] == 1


def test_a_session_ceiling_of_its_own_and_an_overall_cap(q: Queue) -> None:
    policy = q.ok("sched", "policy", "set", "--session", "big", "--max-concurrent", "3")
    assert policy["policy"]["sessions"] == {"big": 3}
    assert policy["policy"]["maxConcurrent"] == 1
    big = [q.add("--session", "big", now=at(n)) for n in range(4)]
    small = q.add("--session", "small", now=at(5))
    leases = q.lease("--session", "big", now=at(6))
    assert [lease["id"] for lease in leases] == big[:3]
    q.refused(3, "sched", "lease", "--session", "big", now=at(6))
    # An overall cap of 3 is reached already: small waits, though its pool is empty.
    q.policy("--max-total", "3")
    err = q.refused(3, "sched", "lease", "--session", "small", now=at(7))
    assert "maxTotal" in err
    assert q.ok("sched", "plan", now=at(7))["available"] == 0
    q.policy("--max-total", "0")  # 0 removes the cap
    assert q.ok("sched", "policy", "show")["policy"]["maxTotal"] is None
    assert [lease["id"] for lease in q.lease(now=at(8))] == [small]
    assert q.ok("log", "verify")["ok"] is True


def test_session_policy_is_recorded_and_replayed(q: Queue, cli: Cli) -> None:
    q.ok("sched", "policy", "set", "--session", "tmux:a", "--max-concurrent", "2")
    q.policy("--max-total", "5")
    event = q.events()[-1]
    assert event["type"] == "sched.policy_set"
    assert event["data"]["sessions"] == {"tmux:a": 2}
    assert event["data"]["maxTotal"] == 5
    count = len(q.events())
    q.ok("sched", "policy", "set", "--session", "tmux:a", "--max-concurrent", "2")
    assert len(q.events()) == count  # already so: nothing recorded
    before = q.text("sched", "policy", "show")
    shutil.rmtree(cli.home / "views")
    assert q.text("sched", "policy", "show") == before


@pytest.mark.parametrize("args", [
    ["--session", "s", "--max-attempts", "2"],  # a session has a ceiling only
    ["--session", "s", "--max-concurrent", "2", "--max-total", "3"],
    ["--session", "", "--max-concurrent", "2"],
    ["--session", "s", "--max-concurrent", "0"],
    ["--max-total", "-1"],
    ["--max-total", "100001"],
    ["--session", "s"],
])
def test_bad_session_policy_values_are_usage_errors(q: Queue, args: list[str]) -> None:
    q.refused(2, "sched", "policy", "set", *args)


def test_log_verify_holds_each_pool_to_its_ceiling(q: Queue, cli: Cli) -> None:
    """A forged lease over a session's ceiling is named; leases of another session at the
    same moment are not."""
    from uwf.engine.events import NewEvent
    from uwf.engine.journal import Outcome
    from uwf.queue.events import QueueLeased
    from uwf.store import Store

    a_first = q.add("--session", "a", now=at(0))
    a_second = q.add("--session", "a", now=at(1))
    q.add("--session", "b", now=at(2))
    q.lease(now=at(3))  # a_first and b's entry: one per pool
    assert q.ok("log", "verify")["ok"] is True
    store = Store.open(cli.home, now=at(4))
    try:
        expires = parse_instant(at(4)) + 300_000
        store.journal.write(lambda views: Outcome([NewEvent(
            f"queue/{a_second}", QueueLeased("01KB0000000000000000000000", expires, 1))]))
    finally:
        store.close()
    result = cli.run("log", "verify", "--json")
    assert result.code == 1
    (problem,) = json.loads(result.out)["problems"]
    assert a_second in problem["problem"]
    assert "1 leases of session a were active" in problem["problem"]
    assert a_first not in problem["problem"]
