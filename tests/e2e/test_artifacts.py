"""expectedArtifacts are checked when the work claims to be done (issue 17 item 3): the
worker after a run reaches `$END`, and `queue status ID --set completed`. A missing
artifact is a failed attempt (backoff, or parked at maxAttempts) recorded as
`queue.released`, its reason naming the file."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.conftest import Cli
from tests.e2e.test_worker import add, lines, setup, verified


def test_the_worker_fails_an_entry_whose_artifact_is_missing(cli: Cli, tmp_path: Path) -> None:
    _, q = setup(cli, tmp_path)
    # A retry waits 1.5 s: out of reach of this --once run, which then stops.
    q.policy("--max-attempts", "2", "--backoff-base-ms", "1500", "--backoff-cap-ms", "1500")
    (tmp_path / "present.md").write_text("done\n", "utf-8")
    there = add(q, tmp_path, "Fix the login bug", "--artifact", "present.md")
    missing = add(q, tmp_path, "Fix the logout bug", "--artifact", "present.md",
                  "--artifact", "report/out.md")

    result = cli.run("worker", "--once")
    assert result.code == 0, result
    outcomes = {item["id"]: item for item in lines(result.out)}
    assert outcomes[there]["outcome"] == "completed"
    assert outcomes[missing]["outcome"] == "failed"
    assert "'report/out.md' is missing from" in outcomes[missing]["reason"]
    entry = q.entry(missing)
    assert (entry["status"], entry["attempts"]) == ("ready", 1)
    released = [event for event in q.events() if event["type"] == "queue.released"
                and event["subject"] == f"queue/{missing}"]
    assert released[-1]["data"]["failed"] is True
    assert "report/out.md" in released[-1]["data"]["reason"]

    # The second attempt fails the same way and parks (maxAttempts 2); once the file is
    # there, a reset entry completes.
    time.sleep(1.6)
    cli.run("worker", "--once")
    assert q.entry(missing)["status"] == "parked"
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "out.md").write_text("done\n", "utf-8")
    q.ok("sched", "reset", missing)
    result = cli.run("worker", "--once")
    assert [item["outcome"] for item in lines(result.out)] == ["completed"]
    verified(q)


def test_status_set_completed_checks_the_artifacts(cli: Cli, tmp_path: Path) -> None:
    _, q = setup(cli, tmp_path)
    q.policy("--backoff-base-ms", "1", "--backoff-cap-ms", "1")
    entry_id = add(q, tmp_path, "Fix the login bug", "--session", "s",
                   "--artifact", "out.md")
    # Not leased: nothing to count, refused with nothing written.
    error = q.refused(1, "queue", "status", entry_id, "--set", "completed")
    assert "'out.md' is missing from" in error
    # Leased (the job registry's pick): a failed attempt, recorded, then refused.
    assert q.text("queue", "pick", "--session", "s") == entry_id
    count = len(q.events())
    result = cli.run("queue", "status", entry_id, "--set", "completed")
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert "not completed: expected artifact 'out.md' is missing" in result.err
    assert "recorded as a failed attempt" in result.err
    events = q.events()
    assert len(events) == count + 1
    assert events[-1]["type"] == "queue.released"
    assert events[-1]["data"]["failed"] is True
    assert q.entry(entry_id)["attempts"] == 1
    # With the file there, the same command completes it.
    (tmp_path / "out.md").write_text("done\n", "utf-8")
    time.sleep(0.01)  # past the 1 ms backoff
    assert q.text("queue", "pick", "--session", "s") == entry_id
    shown = q.ok("queue", "status", entry_id, "--set", "completed")
    assert shown["status"] == "drained"
    assert json.loads(cli.run("log", "verify", "--json").out)["ok"] is True
