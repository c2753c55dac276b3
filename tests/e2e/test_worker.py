"""`uwf worker` through the real CLI, with real agents (uwf-mock and scripts): one
session's entries run to completion, a failing agent parks its entry, timeouts kill
the agent, SIGTERM gives the lease back, a SIGKILLed worker's lease is reclaimed and
another worker finishes, and a fleet of three workers drains a queue with no double
run."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.queuekit import Queue
from tests.threadkit import Kit, kill_quietly, make_kit, mock_config, popen_uwf, wait_dead

# The entries below name agent scripts by path, not by an alias of the config: the
# worker runs them only when it opts in (test_worker_agents.py: refused otherwise).
OPT_IN = ("--allow-entry-commands",)
# planner -> developer -> reviewer -> $END: three steps.
SHORT_SCRIPT = {"planner": [{"status": "ready", "plan": "Reject empty passwords"}],
                "developer": [{"status": "done", "files": ["auth/login.py"]}],
                "reviewer": [{"status": "approved"}]}
# planner -> $END: one step, for the fleet.
ONE_STEP_SCRIPT = {"planner": [{"status": "unclear", "question": "Which login?"}]}


def setup(cli: Cli, tmp_path: Path, script: dict[str, Any] | None = None) -> tuple[Kit, Queue]:
    kit = make_kit(cli, tmp_path)
    kit.write_config(mock_config(kit.mock_script(script or SHORT_SCRIPT)))
    kit.put_workflow()
    return kit, Queue(cli)


def add(q: Queue, tmp_path: Path, prompt: str, *args: str) -> str:
    return q.add("--repo", str(tmp_path), *args, prompt=prompt)


def lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def verified(q: Queue) -> None:
    assert q.ok("log", "verify")["ok"] is True
    assert q.ok("registry", "verify")["ok"] is True


def waiting_agent(kit: Kit, folder: Path) -> Path:
    """An agent that says it started (its pid in `started`), waits for the file `go`,
    then acts as uwf-mock with the short script."""
    script = kit.mock_script(SHORT_SCRIPT, "short.yaml")
    return kit.agent("waiting", f"""
        from pathlib import Path
        folder = Path({str(folder)!r})
        (folder / "started").write_text(str(os.getpid()))
        while not (folder / "go").exists():
            time.sleep(0.05)
        os.execv(os.path.join(BIN, "uwf-mock"), ["uwf-mock", {str(script)!r}, THREAD, ROLE])
    """)


def started_pid(folder: Path, seconds: float = 20) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        marker = folder / "started"
        if marker.exists() and (text := marker.read_text().strip()):
            return int(text)
        time.sleep(0.02)
    raise AssertionError("the agent never started")


# -- a session's entries, to completion ------------------------------------------------

def test_worker_once_runs_one_sessions_entries(cli: Cli, tmp_path: Path) -> None:
    _, q = setup(cli, tmp_path)
    q.policy("--max-concurrent", "2")
    a1 = add(q, tmp_path, "Fix the login bug", "--session", "A")
    b1 = add(q, tmp_path, "Fix the logout bug", "--session", "B")
    a2 = add(q, tmp_path, "Fix the signup bug", "--session", "A")

    result = cli.run("worker", "--session", "A", "--once", "--concurrency", "2")
    assert result.code == 0, result
    done = lines(result.out)
    assert sorted(item["id"] for item in done) == sorted([a1, a2])
    for item in done:
        assert (item["outcome"], item["attempt"]) == ("completed", 1)
        assert "reason" not in item
        run = q.ok("run", "show", item["run"])["run"]
        assert run["lifecycle"] == "completed"
        assert run["steps"] == 3
        entry = q.entry(item["id"])
        assert (entry["status"], entry["jobStatus"], entry["lease"]) == ("drained",
                                                                         "completed", None)
    assert q.entry(b1)["status"] == "ready"  # another session's entry is left alone

    # Nothing of session A is left: exit 3 with one line, and the log unchanged.
    error = q.refused(3, "worker", "--session", "A", "--once")
    assert "no queue entry is eligible for session A" in error

    # Without a session, the worker takes B's entry; the entry's agent overrides.
    override = kit_script_agent(cli, tmp_path)
    b2 = add(q, tmp_path, "Fix the help page", "--session", "B", "--agent", str(override))
    result = cli.run("worker", "--once", *OPT_IN)
    assert result.code == 0, result
    assert [(item["id"], item["outcome"]) for item in lines(result.out)] == [
        (b1, "completed"), (b2, "completed")]
    runs = {item["id"]: item["run"] for item in lines(result.out)}
    agents = [event["data"]["agent"] for event in q.events()
              if event["type"] == "thread.step_started"
              and event["subject"] == f"thread/{runs[b2]}"]
    assert agents
    assert all(agent == str(override) for agent in agents)
    verified(q)


def kit_script_agent(cli: Cli, tmp_path: Path) -> Path:
    """An agent command (not a config name) that runs uwf-mock with the short script."""
    kit = Kit(cli, tmp_path)
    script = kit.mock_script(SHORT_SCRIPT, "override.yaml")
    return kit.agent("override", f"""
        os.execv(os.path.join(BIN, "uwf-mock"), ["uwf-mock", {str(script)!r}, THREAD, ROLE])
    """)


# -- failures ----------------------------------------------------------------------------

def test_a_failing_agent_parks_its_entry_after_max_attempts(cli: Cli, tmp_path: Path
                                                             ) -> None:
    kit, q = setup(cli, tmp_path)
    failing = kit.agent("failing", """
        sys.stderr.write("the model is down\\n")
        sys.exit(3)
    """)
    q.policy("--max-attempts", "2", "--backoff-base-ms", "1", "--backoff-cap-ms", "1")
    entry = add(q, tmp_path, "Fix the login bug", "--agent", str(failing))

    seen: list[dict[str, Any]] = []
    for _ in range(4):  # a retry waits out a 1 ms backoff: a later --once may take it
        result = cli.run("worker", "--once", *OPT_IN)
        assert result.code in (0, 3), result
        seen += lines(result.out)
        if q.entry(entry)["status"] == "parked":
            break
    assert [(item["outcome"], item["attempt"]) for item in seen] == [("failed", 1),
                                                                    ("parked", 2)]
    for item in seen:
        assert "agent exited with status 3: the model is down" in item["reason"]
        assert q.ok("run", "show", item["run"])["run"]["lifecycle"] == "failed"
    # docs/worker.md: the next attempt continues the run the failed one started.
    assert seen[0]["run"] == seen[1]["run"]
    assert len(q.ok("run", "list")["runs"]) == 1
    shown = q.entry(entry)
    assert shown["attempts"] == 2
    assert "the model is down" in shown["parkedReason"]
    assert "(attempt 2 of 2)" in shown["parkedReason"]
    q.refused(3, "worker", "--once")  # a parked entry is never leased
    verified(q)


def test_the_idle_timeout_kills_the_agent_and_fails_the_attempt(cli: Cli, tmp_path: Path
                                                                ) -> None:
    kit, q = setup(cli, tmp_path)
    sleeper = kit.agent("sleeper", f"""
        open({str(tmp_path / 'sleeper.pid')!r}, "w").write(str(os.getpid()))
        time.sleep(600)
    """)
    q.policy("--max-attempts", "1")
    entry = add(q, tmp_path, "Fix the login bug", "--agent", str(sleeper),
                "--idle-timeout", "1")
    result = cli.run("worker", "--once", *OPT_IN)  # returns: the sleeper did not hold it
    assert result.code == 0, result
    (item,) = lines(result.out)
    assert item["outcome"] == "parked"
    assert item["reason"].startswith("idle timeout: no step finished within idleTimeoutSec "
                                     "(1s)")
    assert wait_dead(int((tmp_path / "sleeper.pid").read_text()))
    assert q.entry(entry)["status"] == "parked"
    verified(q)


# -- signals and crashes -------------------------------------------------------------------
# The worker signalled or killed, and a fleet's workers, are processes (popen_uwf); the
# commands around them run in this process.

def test_sigterm_mid_run_releases_the_lease(cli: Cli, tmp_path: Path) -> None:
    kit, q = setup(cli, tmp_path)
    folder = tmp_path / "wait"
    folder.mkdir()
    agent = waiting_agent(kit, folder)
    entry = add(q, tmp_path, "Fix the login bug", "--agent", str(agent))
    worker = popen_uwf(cli, "worker", *OPT_IN, "--poll", "0.2")
    try:
        agent_pid = started_pid(folder)
        assert q.entry(entry)["status"] == "leased"
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
    finally:
        kill_quietly(worker.pid)
    assert worker.returncode == 0, err
    (item,) = lines(out)
    assert (item["id"], item["outcome"], item["reason"]) == (entry, "released",
                                                             "worker stopped")
    assert wait_dead(agent_pid), "the agent outlived its worker"
    shown = q.entry(entry)
    assert (shown["status"], shown["attempts"], shown["lease"]) == ("ready", 0, None)
    released = [event for event in q.events() if event["type"] == "queue.released"]
    assert [(event["data"]["failed"], event["data"]["reason"]) for event in released] == [
        (False, "worker stopped")]
    assert shown["run"] == item["run"]  # the entry keeps the run it started
    verified(q)

    # The next worker continues that run rather than starting another.
    (folder / "go").write_text("")
    again = cli.run("worker", "--once", *OPT_IN)
    assert again.code == 0, again
    (finished,) = lines(again.out)
    assert (finished["id"], finished["run"], finished["outcome"]) == (
        entry, item["run"], "completed")
    assert q.entry(entry)["run"] == item["run"]
    assert [run["runId"] for run in q.ok("run", "list")["runs"]] == [item["run"]]
    verified(q)


def test_a_killed_workers_lease_is_reclaimed_and_another_worker_finishes(
        cli: Cli, tmp_path: Path) -> None:
    from uwf.engine.clock import format_ts, parse_instant

    kit, q = setup(cli, tmp_path)
    folder = tmp_path / "wait"
    folder.mkdir()
    agent = waiting_agent(kit, folder)
    entry = add(q, tmp_path, "Fix the login bug", "--agent", str(agent))
    worker = popen_uwf(cli, "worker", *OPT_IN, "--poll", "0.2")
    try:
        agent_pid = started_pid(folder)
        lease = q.entry(entry)["lease"]
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        kill_quietly(worker.pid)
    kill_quietly(agent_pid)  # its own process group: the worker's death does not reach it
    assert wait_dead(agent_pid)
    assert q.entry(entry)["status"] == "leased"  # nobody gave it back

    expired = parse_instant(lease["expiresAt"])
    later = format_ts(expired + 1000)
    reclaimed = q.ok("sched", "reclaim", now=later)
    assert reclaimed["count"] == 1
    assert reclaimed["reclaimed"][0]["attempts"] == 1
    shown = q.entry(entry)
    assert (shown["status"], shown["attempts"]) == ("ready", 1)

    (folder / "go").write_text("go")
    after_backoff = format_ts(expired + 1000 + 60_000)
    result = cli.run("worker", "--once", *OPT_IN, "--now", after_backoff)
    assert result.code == 0, result
    (item,) = lines(result.out)
    assert (item["id"], item["outcome"], item["attempt"]) == (entry, "completed", 2)
    assert q.ok("run", "show", item["run"])["run"]["lifecycle"] == "completed"
    # docs/worker.md: a killed worker never recorded the run it started, so this
    # attempt is a new run; the first is left as it was.
    assert len(q.ok("run", "list")["runs"]) == 2
    assert q.entry(entry)["status"] == "drained"
    verified(q)


# -- a fleet ---------------------------------------------------------------------------------

def test_a_fleet_drains_the_queue_with_no_double_run(cli: Cli, tmp_path: Path) -> None:
    _, q = setup(cli, tmp_path, ONE_STEP_SCRIPT)
    q.policy("--max-concurrent", "2")
    entries = {}
    for number in range(12):
        prompt = f"Task {number:02d}"
        session = "A" if number % 2 else "B"
        entries[add(q, tmp_path, prompt, "--session", session)] = prompt
    workers = [popen_uwf(cli, "worker", *flags, "--concurrency", "2", "--poll", "0.1")
               for flags in (["--session", "A"], ["--session", "B"], [])]
    outputs = []
    try:
        # Drained before the workers are stopped: on a loaded machine 60 s was not
        # enough (68 s seen), and the SIGTERM then landed mid-entry (a worker exited -11).
        deadline = time.monotonic() + 240
        while True:
            listed = q.ok("queue", "list", "--status", "drained", "--limit", "0")
            if listed["total"] == len(entries):
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.2)
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            out, err = worker.communicate(timeout=30)
            assert worker.returncode == 0, err
            outputs += lines(out)
    finally:
        for worker in workers:
            kill_quietly(worker.pid)

    # Every entry completed exactly once, by one run of its own prompt.
    assert sorted(item["id"] for item in outputs) == sorted(entries)
    assert {item["outcome"] for item in outputs} == {"completed"}
    runs = q.ok("run", "list", "--limit", "100")["runs"]
    assert len(runs) == len(entries)
    assert {run["lifecycle"] for run in runs} == {"completed"}
    assert sorted(run["title"] for run in runs) == sorted(entries.values())
    by_run = {item["run"]: item["id"] for item in outputs}
    assert {by_run[run["runId"]] for run in runs} == set(entries)
    for run in runs:
        assert entries[by_run[run["runId"]]] == run["title"]

    # Replaying the log: never two leases of one entry at once, never more than 2 active
    # in a session's pool (the ceiling is per session: A and B together may hold 4).
    holder: dict[str, str | None] = {}
    session_of: dict[str, str | None] = {}
    most = {"A": 0, "B": 0}
    for event in q.events():
        if not event["subject"].startswith("queue/"):
            continue
        entry = event["subject"].removeprefix("queue/")
        if event["type"] == "queue.added":
            session_of[entry] = event["data"]["session"]
        if event["type"] == "queue.leased":
            assert holder.get(entry) is None, f"{entry} leased twice at once"
            holder[entry] = event["data"]["leaseId"]
        elif event["type"] in ("queue.completed", "queue.released", "queue.reclaimed"):
            assert holder.get(entry) == event["data"]["leaseId"]
            holder[entry] = None
        for pool, peak in most.items():
            most[pool] = max(peak, sum(1 for held, lease in holder.items()
                                       if lease is not None and session_of[held] == pool))
    assert max(most.values()) <= 2
    leased = [event for event in q.events() if event["type"] == "queue.leased"]
    assert len(leased) == len(entries)  # no entry ran twice
    verified(q)


@pytest.mark.parametrize("args", [["--concurrency", "0"], ["--concurrency", "x"],
                                  ["--poll", "0"], ["--session"]])
def test_bad_flags_are_usage_errors(cli: Cli, tmp_path: Path, args: list[str]) -> None:
    setup(cli, tmp_path)
    result = cli.run("worker", "--once", *args)
    assert result.code == 2, result
    assert "Traceback" not in result.err



def test_main_runs_the_worker_in_process_again_and_again(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from uwf.cli.main import main

    _, q = setup(cli, tmp_path, ONE_STEP_SCRIPT)
    for name in ("UWF_HOME", "XDG_CONFIG_HOME", "UWF_DURABILITY", "PATH"):
        monkeypatch.setenv(name, cli.env[name])
    handlers = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    for number in range(2):
        entry = add(q, tmp_path, f"Task {number}")
        capsys.readouterr()
        assert main(["worker", "--once"]) == 0
        (item,) = lines(capsys.readouterr().out)
        assert (item["id"], item["outcome"]) == (entry, "completed")
    assert main(["worker", "--once"]) == 3
    # The worker's signal handlers are its own while it runs, and put back after.
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers


def test_the_lease_is_renewed_while_the_agent_works(cli: Cli, tmp_path: Path) -> None:
    kit, q = setup(cli, tmp_path)
    script = kit.mock_script(ONE_STEP_SCRIPT, "one.yaml")
    slow = kit.agent("slow", f"""
        time.sleep(1.5)
        os.execv(os.path.join(BIN, "uwf-mock"), ["uwf-mock", {str(script)!r}, THREAD, ROLE])
    """)
    q.policy("--lease-ttl-ms", "600")  # would expire 3 times over without renewals
    entry = add(q, tmp_path, "Fix the login bug", "--agent", str(slow))
    result = cli.run("worker", "--once", *OPT_IN)
    assert result.code == 0, result
    (item,) = lines(result.out)
    assert (item["id"], item["outcome"]) == (entry, "completed")
    renewed = [event for event in q.events() if event["type"] == "queue.renewed"]
    assert len(renewed) >= 3
    verified(q)


# -- anchors ---------------------------------------------------------------------------

def test_the_worker_anchors_the_log_every_n_events(cli: Cli, tmp_path: Path) -> None:
    _, q = setup(cli, tmp_path)
    q.policy("--max-concurrent", "2")
    entries = [add(q, tmp_path, f"Fix bug #{n}") for n in range(2)]
    key = tmp_path / "anchor.pem"
    q.ok("log", "anchor", "--new-key", "--key", str(key))
    # No key: refused before anything is leased.
    refused = q.refused(1, "worker", "--once", "--anchors", str(tmp_path / "anchors"),
                        "--anchor-key", str(tmp_path / "missing.pem"))
    assert "no anchor key" in refused
    q.refused(2, "worker", "--once", "--anchor-every", "5")  # without --anchors
    assert all(q.entry(entry)["status"] == "ready" for entry in entries)

    folder = tmp_path / "anchors"
    result = cli.run("worker", "--once", "--anchors", str(folder), "--anchor-every", "5",
                     "--anchor-key", str(key))
    assert result.code == 0, result.err
    done = lines(result.out)
    assert sorted(item["id"] for item in done) == sorted(entries)
    written = sorted(folder.glob("*.json"))
    assert written, "each entry grew the log by more than 5 events: anchors are due"
    assert [item["anchor"] for item in done if "anchor" in item] == [str(p) for p in written]
    # Every anchor holds against the log, with the public key only.
    args = [arg for path in written for arg in ("--anchor", str(path))]
    report = q.ok("log", "verify", "--key", f"{key}.pub", *args)
    assert report["ok"] is True
    assert [entry["seq"] for entry in report["anchors"]] == [int(p.stem) for p in written]
    verified(q)


# -- typed results -----------------------------------------------------------------------

def test_an_entry_s_end_is_a_typed_result_printed_as_the_worker_prints_it(
        cli: Cli, tmp_path: Path) -> None:
    from contextlib import closing

    from uwf.config.settings import Settings
    from uwf.payload import to_payload
    from uwf.store import Store
    from uwf.worker import commands as workers
    from uwf.worker.commands import WorkerArgs
    from uwf.worker.results import EntryDone

    _, q = setup(cli, tmp_path)
    printed = add(q, tmp_path, "Fix the login bug")
    (line,) = lines(cli.run("worker", "--once", "--json").out)
    typed = add(q, tmp_path, "Fix the logout bug")
    with closing(Store.open(settings=Settings.from_env(cli.env, tmp_path))) as store:
        worker = workers.worker(WorkerArgs(once=True), store)
        (done,) = [result.record() for result in worker.results()]
    assert isinstance(done, EntryDone)
    payload = to_payload(done)
    assert (line["id"], payload["id"]) == (printed, typed)
    assert list(payload) == list(line)  # id, run, outcome, attempt: no reason
    assert {**payload, "id": printed, "run": line["run"]} == line


@pytest.mark.parametrize("broker", [False, True])
def test_a_store_read_failing_after_an_entry_ends_never_loses_it(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broker: bool) -> None:
    """The entry's end is recorded; the store then goes away (a dropped connection)
    before its end is announced. The entry is reported completed, never `lost`; with a
    broker, the status it could not send is its publish error."""
    from contextlib import closing

    from uwf.config.settings import Settings
    from uwf.errors import StoreUnavailable
    from uwf.store import Store
    from uwf.worker import commands as workers
    from uwf.worker.commands import WorkerArgs
    from uwf.worker.service import Worker

    _, q = setup(cli, tmp_path, ONE_STEP_SCRIPT)
    # A broker no one listens on: the `running` status is not taken either.
    # No --timeout: 1 s for the whole entry failed it on a loaded machine (its agent
    # took longer to start); the broker's refusal is immediate.
    extra = ("--broker", "mqtt://127.0.0.1:9") if broker else ()
    entry = add(q, tmp_path, "Fix the login bug", *extra)
    ended = []
    real_run = Worker._run_entry

    def run_entry(self: Worker, held: Any, started: float) -> Any:
        result = real_run(self, held, started)
        ended.append(result)
        return result

    monkeypatch.setattr(Worker, "_run_entry", run_entry)
    with closing(Store.open(settings=Settings.from_env(cli.env, tmp_path))) as store:
        real_read = Store.read

        def read(self: Store, *args: Any, **kwargs: Any) -> Any:
            if ended and self is store:
                raise StoreUnavailable("server closed the connection unexpectedly",
                                       "check the server")
            return real_read(self, *args, **kwargs)

        monkeypatch.setattr(Store, "read", read)  # (a Store has slots: patch its class)
        worker = workers.worker(WorkerArgs(once=True), store)
        (result,) = list(worker.results())
    assert (result.id, result.outcome) == (entry, "completed"), result
    assert (result.publish_error is not None) is broker
    assert json.loads(cli.run("queue", "show", entry, "--json").out)["status"] == "drained"
