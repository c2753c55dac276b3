"""A step in flight has a thread state of its own (issue 17 item 1): `idle` (no step in
flight) and `running` (one is) split what `active` said, in `thread show`, `thread
list` and its `--status` filter (where `active` still means both), and the run record
says which step is in flight (`inFlight`) without changing its lifecycle words.

Everything runs through the real `uwf` on a scratch store (tests/runkit.py).
"""

from __future__ import annotations

import json
import shutil
from typing import Any

from tests.runkit import Fleet
from tests.threadkit import one_line_error


def listed(fleet: Fleet, *args: str) -> list[str]:
    return [row["thread"] for row in fleet.ok("thread", "list", *args)]


def row_of(fleet: Fleet, thread: str, *args: str) -> dict[str, Any]:
    rows = [row for row in fleet.ok("thread", "list", *args) if row["thread"] == thread]
    assert len(rows) == 1, rows
    row: dict[str, Any] = rows[0]
    return row


def test_a_step_in_flight_is_running_with_its_role_agent_and_start(fleet: Fleet) -> None:
    thread = fleet.start()
    before = fleet.ok("thread", "show", thread)
    assert (before["status"], before["currentRole"]) == ("idle", "a")
    assert "inFlight" not in before
    with fleet.in_flight(thread, "a") as started:
        event = [e for e in fleet.kit.events("thread.step_started")
                 if e["subject"] == f"thread/{thread}"][-1]
        flight = {"role": "a", "agent": started["agent"], "startedAt": event["ts"]}
        assert started["agent"] == "relay"
        shown = fleet.ok("thread", "show", thread)
        assert shown == {**before, "status": "running", "inFlight": flight}
        assert row_of(fleet, thread) == {"thread": thread, "workflow": fleet.relay,
                                         "head": before["head"], "status": "running",
                                         "currentRole": "a", "inFlight": flight}
        assert listed(fleet, "--status", "running") == [thread]
        assert listed(fleet, "--status", "idle") == []
        assert listed(fleet, "--status", "active") == [thread]  # idle or running
        run = fleet.run(thread)
        assert (run["lifecycle"], run["inFlight"]) == ("running", flight)
        counts = fleet.ok("registry", "show")["counts"]["threads"]
        assert counts == {"running": 1}
    after = fleet.ok("thread", "show", thread)
    assert (after["status"], after["currentRole"]) == ("idle", "b")
    assert "inFlight" not in after
    assert listed(fleet, "--status", "running") == []
    assert listed(fleet, "--status", "idle") == [thread]
    run = fleet.run(thread)
    assert (run["lifecycle"], run["inFlight"]) == ("running", None)  # rule 6: none in flight


def test_status_words_through_a_whole_run(fleet: Fleet) -> None:
    thread = fleet.start()
    assert fleet.ok("thread", "show", thread)["status"] == "idle"
    stepped = fleet.ok("thread", "step", thread)
    assert (stepped["status"], stepped["currentRole"]) == ("idle", "b")
    assert "inFlight" not in stepped
    fleet.act(b="fail")
    assert fleet.step(thread).code == 1  # a failed step leaves the thread idle again
    assert fleet.ok("thread", "show", thread)["status"] == "idle"
    fleet.act()
    ran = fleet.ok("thread", "run", thread)
    assert (ran["status"], ran["done"]) == ("ended", True)
    assert listed(fleet, "--status", "ended") == [thread]


def test_status_filters_and_their_words(fleet: Fleet) -> None:
    idle = fleet.start(prompt="idle")
    fleet.kit.write_config(fleet.config(default=False))
    blocked = fleet.start(prompt="blocked")
    one_line_error(fleet.step(blocked), 1, "no agent configured")
    fleet.kit.write_config(fleet.config())
    killed = fleet.start(prompt="killed")
    fleet.ok("thread", "kill", killed)
    assert listed(fleet) == [idle, blocked]
    with fleet.in_flight(idle, "a"):
        assert listed(fleet, "--status", "active") == [idle]
        assert listed(fleet, "--status", "running", "--status", "blocked") == [idle, blocked]
        assert listed(fleet, "--status", "active", "--status", "running") == [idle]
        assert listed(fleet, "--status", "idle") == []
    assert listed(fleet, "--status", "idle", "--status", "killed") == [idle, killed]
    assert listed(fleet, "--status", "active") == [idle]
    one_line_error(fleet.uwf("thread", "list", "--status", "done"), 2, "argument --status",
                   "'idle'", "'running'", "'active'", "'killed'")


def test_views_rebuilt_from_the_log_say_the_same(fleet: Fleet) -> None:
    """A store's views are derived: deleted and rebuilt, show, list, run show and
    registry show print the same bytes, and both verifiers agree."""
    done = fleet.start(prompt="done")
    fleet.ok("thread", "step", done)
    thread = fleet.start()
    with fleet.in_flight(thread, "a"):
        reads = [("thread", "show", thread), ("thread", "list", "--all"),
                 ("thread", "list", "--status", "running"), ("run", "show", thread),
                 ("run", "search"), ("history",)]
        before = [fleet.uwf(*args) for args in reads]
        counts = json.loads(fleet.uwf("registry", "show").out)["counts"]
        shutil.rmtree(fleet.cli.home / "views")
        after = [fleet.uwf(*args) for args in reads]
        assert [(r.code, r.out) for r in after] == [(r.code, r.out) for r in before]
        assert json.loads(fleet.uwf("registry", "show").out)["counts"] == counts
        assert counts["threads"] == {"idle": 1, "running": 1}
        assert fleet.ok("registry", "verify")["ok"] is True
    assert fleet.ok("log", "verify")["ok"] is True
    assert fleet.ok("registry", "verify")["ok"] is True
