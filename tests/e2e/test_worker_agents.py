"""A queue entry chooses its agent only among the worker's own (docs/worker.md#agents):
an entry's `agent` must be an alias of the worker's config (or absent, the config
decides). A command line is run only by a worker started with
`--allow-entry-commands`; any other worker releases the entry as failed (an attempt,
recorded as `queue.released`), with a reason naming the alias to configure, runs
nothing, and goes on with the other entries. Real workers, real agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Cli
from tests.queuekit import Queue
from tests.threadkit import Kit, make_kit, mock_config

SHORT_SCRIPT = {"planner": [{"status": "ready", "plan": "Reject empty passwords"}],
                "developer": [{"status": "done", "files": ["auth/login.py"]}],
                "reviewer": [{"status": "approved"}]}


def lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def setup(cli: Cli, tmp_path: Path) -> tuple[Kit, Queue, Path, Path]:
    """A store with the example workflow, a config whose only alias is `mock`, and an
    agent command (not in the config) that leaves a marker file when it runs."""
    kit = make_kit(cli, tmp_path)
    script = kit.mock_script(SHORT_SCRIPT)
    kit.write_config(mock_config(script))
    kit.put_workflow()
    marker = tmp_path / "the-command-ran"
    command = kit.agent("planted", f"""
        open({str(marker)!r}, "a").write(ROLE + "\\n")
        os.execv(os.path.join(BIN, "uwf-mock"), ["uwf-mock", {str(script)!r}, THREAD, ROLE])
    """)
    return kit, Queue(cli), command, marker


def add(q: Queue, tmp_path: Path, prompt: str, *args: str) -> str:
    return q.add("--repo", str(tmp_path), *args, prompt=prompt)


def test_an_entrys_command_is_refused_and_the_worker_goes_on(cli: Cli, tmp_path: Path
                                                              ) -> None:
    kit, q, command, marker = setup(cli, tmp_path)
    q.policy("--max-attempts", "2", "--backoff-base-ms", "600000", "--backoff-cap-ms",
             "600000")  # a retry waits ten minutes: one attempt per worker run here
    planted = add(q, tmp_path, "Fix the login bug", "--agent", f"{command} --flag")
    plain = add(q, tmp_path, "Fix the logout bug")  # the config's defaultAgent
    named = add(q, tmp_path, "Fix the signup bug", "--agent", "mock")  # an alias

    result = cli.run("worker", "--once")
    assert result.code == 0, result
    assert result.err == ""
    done = {item["id"]: item for item in lines(result.out)}
    assert (done[plain]["outcome"], done[named]["outcome"]) == ("completed", "completed")
    refusal = done[planted]
    assert (refusal["outcome"], refusal["run"], refusal["attempt"]) == ("failed", None, 1)
    reason = refusal["reason"]
    assert reason.startswith(f"the entry's agent '{command} --flag' is not an agent alias "
                             f"of this worker's config ({kit.config_path})"), reason
    assert "aliases: mock" in reason
    assert "--agent NAME" in reason
    assert "--allow-entry-commands" in reason
    assert not marker.exists(), "the entry's command ran"
    # No run was started for it, and the refusal is the release event's reason.
    assert len(q.ok("run", "list")["runs"]) == 2
    shown = q.entry(planted)
    assert (shown["status"], shown["attempts"], shown["lease"]) == ("ready", 1, None)
    released = [event["data"] for event in q.events()
                if event["type"] == "queue.released"
                and event["subject"] == f"queue/{planted}"]
    assert [(data["failed"], data["reason"]) for data in released] == [(True, reason)]

    # Refused again at maxAttempts, it parks: kept, never lost, until `sched reset`.
    from uwf.engine.clock import format_ts, parse_instant

    later = format_ts(parse_instant(shown["nextEligibleAt"]) + 1000)
    again = cli.run("worker", "--once", "--now", later)
    assert again.code == 0, again
    (item,) = lines(again.out)
    assert (item["id"], item["outcome"], item["reason"]) == (planted, "parked", reason)
    assert q.entry(planted)["status"] == "parked"
    assert not marker.exists()
    assert q.ok("log", "verify")["ok"] is True


def test_a_worker_that_opts_in_runs_an_entrys_command(cli: Cli, tmp_path: Path) -> None:
    _, q, command, marker = setup(cli, tmp_path)
    entry = add(q, tmp_path, "Fix the login bug", "--agent", str(command))
    result = cli.run("worker", "--once", "--allow-entry-commands")
    assert result.code == 0, result
    (item,) = lines(result.out)
    assert (item["id"], item["outcome"]) == (entry, "completed")
    assert marker.read_text().split() == ["planner", "developer", "reviewer"]
    agents = {event["data"]["agent"] for event in q.events()
              if event["type"] == "thread.step_started"}
    assert agents == {str(command)}


def test_without_a_config_an_entrys_command_names_no_alias(cli: Cli, tmp_path: Path
                                                           ) -> None:
    kit, q, command, marker = setup(cli, tmp_path)
    kit.config_path.unlink()
    entry = add(q, tmp_path, "Fix the login bug", "--agent", str(command))
    result = cli.run("worker", "--once")
    assert result.code == 0, result
    (item,) = lines(result.out)
    assert (item["id"], item["outcome"]) == (entry, "failed")
    assert "is not an agent alias of this worker's config; it has none:" in item["reason"]
    assert not marker.exists()
