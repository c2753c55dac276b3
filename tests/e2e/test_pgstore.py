"""A whole store on PostgreSQL (`--store postgresql://...` / UWF_HOME), against a real
server (tests/pgkit.py): the commands answer as on a folder store, ids and times
aside; a URL never becomes a folder; the password is never printed; a server that
cannot be reached is one line."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.brokerkit import Broker
from tests.conftest import BIN, EXAMPLE, Cli
from tests.e2e.test_mcp_parity import normalised
from tests.pgkit import Server
from uwf.engine.dburl import shown

pytest.importorskip("psycopg")  # the `postgres` extra; `dev` installs it, so CI never skips

NOW = "2026-03-02T09:00:00Z"


def env_for(home: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
    env.update(UWF_HOME=home, UWF_NOW=NOW, UWF_DURABILITY="none",
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    return env


def scenario(cli: Cli) -> list[tuple[str, int, Any]]:
    """Workflows, threads, the run registry, the queue and the scheduler, the log."""
    steps: list[tuple[str, int, Any]] = []

    def run(*args: str) -> Any:
        result = cli.run(*args, "--json")
        payload = json.loads(result.out) if result.out.strip() else result.err.strip()
        steps.append((" ".join(args[:2]), result.code, payload))
        return payload

    run("workflow", "put", str(EXAMPLE))
    run("workflow", "list")
    thread = run("thread", "start", "solve-issue", "-p", "Fix the login bug")["thread"]
    run("thread", "show", thread)
    run("thread", "list", "--all")
    run("run", "search", "--text", "login")
    run("run", "show", thread)
    run("history")
    run("thread", "kill", thread, "--reason", "not needed")
    entry = run("queue", "add", "--workflow", "solve-issue", "-p", "Queued", "--session",
                "a")["entry"]["id"]
    run("queue", "add", "--workflow", "solve-issue", "-p", "Second", "--session", "a")
    run("sched", "policy", "set", "--max-concurrent", "1")
    run("sched", "plan")
    lease = run("sched", "lease", "--session", "a")["leases"][0]
    run("sched", "lease", "--session", "a")  # the ceiling holds: exit 3
    run("sched", "release", lease["id"], "--lease", lease["leaseId"], "--failed")
    run("queue", "show", entry)
    run("queue", "list")
    run("queue", "logs", entry)
    run("registry", "show")
    run("registry", "verify")
    run("registry", "rebuild")
    run("log", "verify")
    run("thread", "show", "01J7K9M2XNPQR5VWBCDF8G3H4T")  # a refusal, the same on both
    return steps


def located(old: str, new: str, then: Callable[[Any], Any] = lambda value: value
            ) -> Callable[[Any], Any]:
    """A function giving a payload with the string `old` (where the store is) as `new`."""
    def replaced(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(old, new)
        if isinstance(value, dict):
            return {key: replaced(item) for key, item in value.items()}
        if isinstance(value, list):
            return [replaced(item) for item in value]
        return value
    return lambda value: then(replaced(value))


def test_a_postgresql_store_answers_as_a_folder_store(pg_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    on_disk = scenario(Cli(folder, env_for(str(folder), tmp_path)))
    on_server = scenario(Cli(tmp_path / "unused", env_for(pg_url, tmp_path)))
    names: dict[str, str] = {}
    theirs: dict[str, str] = {}
    # Where the store is: its folder (and its log, a run's statePath) or its database.
    server = located(shown(pg_url), "<STORE>")
    disk = located(str(folder / "events"), "<STORE>", located(str(folder), "<STORE>"))
    for mine, other in zip(on_server, on_disk, strict=True):
        assert mine[:2] == other[:2]
        if mine[0] == "registry show":  # a table has no segment files
            assert "segments" not in mine[2]
            other[2].pop("segments")
        assert normalised(server(mine[2]), tmp_path, names) == normalised(
            disk(other[2]), tmp_path, theirs), mine[0]
    assert not (tmp_path / "unused").exists()


def test_a_url_never_becomes_a_folder_and_its_password_is_never_shown(
        pg_server: Server, tmp_path: Path) -> None:
    url = pg_server.create_database().replace("postgres@", "postgres:s3cret@")
    cli = Cli(tmp_path / "unused", env_for(url, tmp_path))
    work = tmp_path / "work"
    work.mkdir()
    outputs = []
    for args in (("workflow", "put", str(EXAMPLE)), ("registry", "show"),
                 ("registry", "show", "--json"), ("log", "tail", "-n", "5"),
                 ("run", "list", "--json")):
        done = cli.call("uwf", args, b"", cwd=work)
        assert done.code == 0, done.err
        outputs.append(done.out + done.err)
    assert all("s3cret" not in text for text in outputs)
    shown = json.loads(outputs[2])["store"]
    assert shown.startswith("postgresql://postgres@/uwf_test_")
    assert "s3cret" not in shown
    assert list(work.iterdir()) == []  # no folder named `postgresql:` anywhere


def test_a_server_that_cannot_be_reached_is_one_line(tmp_path: Path) -> None:
    url = f"postgresql://postgres:s3cret@/uwf?host={tmp_path}/nowhere&port=5432"
    cli = Cli(tmp_path / "unused", env_for(url, tmp_path))
    result = cli.run("workflow", "list")
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert "Traceback" not in result.err
    assert result.err.startswith(f"uwf: error: PostgreSQL database uwf on {tmp_path}/nowhere")
    assert "s3cret" not in result.err


def test_an_unknown_url_is_refused_not_made_a_folder(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "unused", env_for("mysql://me@host/db", tmp_path))
    result = cli.run("workflow", "list")
    assert result.code == 2
    assert "is a URL uwf does not know" in result.err


ENV_DUMPING_MOCK = """import json, os, sys
from uwf.agents import mock
with open(os.environ["DUMP_TO"], "a") as out:
    out.write(json.dumps(dict(os.environ)) + "\\n")
sys.exit(mock.main([os.environ["MOCK_SCRIPT"], *sys.argv[1:]]))
"""


def test_agents_run_on_postgresql_without_its_credentials(pg_server: Server,
                                                          tmp_path: Path) -> None:
    """Agent processes step threads on a PostgreSQL store (as the worker's), through
    their staging folders; none of them sees the URL, the password or a PG* variable."""
    import sys
    import textwrap

    import yaml

    from tests.threadkit import MOCK_SCRIPT

    url = pg_server.create_database().replace("postgres@", "postgres:s3cret@")
    env = env_for(url, tmp_path)
    env.update(PGPASSWORD="s3cret", PGCONNECT_TIMEOUT="5", DUMP_TO=str(tmp_path / "envs"),
               MOCK_SCRIPT=str(tmp_path / "mock.yaml"))
    (tmp_path / "mock.yaml").write_text(yaml.safe_dump(MOCK_SCRIPT), "utf-8")
    agent = tmp_path / "dumping-mock"
    agent.write_text(f"#!{sys.executable}\n" + textwrap.dedent(ENV_DUMPING_MOCK), "utf-8")
    agent.chmod(0o755)
    config = tmp_path / "config" / "uwf" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"defaultAgent": "dump", "agents": {
        "dump": {"command": str(agent)}}}), "utf-8")
    cli = Cli(tmp_path / "unused", env)
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    thread = json.loads(cli.run("thread", "start", "solve-issue", "-p", "x").out)["thread"]
    ran = cli.run("thread", "run", thread, "--json")
    assert ran.code == 0, ran.err
    assert json.loads(ran.out)["done"] is True
    assert cli.run("queue", "add", "--workflow", "solve-issue", "-p", "y").code == 0
    worked = cli.run("worker", "--once")
    assert worked.code == 0, worked.err
    entry = json.loads(cli.run("queue", "list", "--json").out)["entries"][0]
    assert entry["status"] == "drained", entry
    dumps = [json.loads(line) for line in (tmp_path / "envs").read_text().splitlines()]
    assert len(dumps) >= 6  # the thread's steps and the queued run's
    for seen in dumps:
        assert "UWF_HOME" not in seen
        assert not [name for name in seen if name.startswith("PG")]
        assert not [value for value in seen.values() if "s3cret" in value or
                    "postgresql://" in value]
        assert not Path(seen["UWF_STEP_DIR"]).exists()  # removed after the step
    assert cli.run("log", "verify").code == 0
    assert not (tmp_path / "unused").exists()


def test_a_subflow_on_postgresql_fails_its_step_in_one_line(pg_url: str,
                                                            tmp_path: Path) -> None:
    """uwf-subflow starts threads in the store, which an agent on a server cannot reach."""
    cli = Cli(tmp_path / "unused", env_for(pg_url, tmp_path))
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    thread = json.loads(cli.run("thread", "start", "solve-issue", "-p", "x").out)["thread"]
    stepped = cli.run("thread", "step", thread, "--agent", "uwf-subflow solve-issue")
    assert stepped.code == 1
    assert stepped.err.count("\n") == 1
    assert "credentials agents never get" in stepped.err
    assert json.loads(cli.run("thread", "show", thread).out)["status"] == "idle"


def test_without_the_driver_the_error_names_the_extra(tmp_path: Path) -> None:
    """psycopg is an optional extra: a store URL without it is one line naming it."""
    import sys

    probe = ("import sys; sys.modules['psycopg'] = None  # as if not installed\n"
             "from uwf.cli.main import main\n"
             "sys.exit(main(['workflow', 'list']))")
    env = env_for("postgresql://uwf@db.example/uwf", tmp_path)
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2
    assert done.stderr == ("uwf: error: a postgresql:// store needs the PostgreSQL driver, "
                           "which is not installed; pip install 'uwf[postgres]'\n")


def test_the_bridge_keeps_its_place_in_the_database(pg_server: Server, broker: Broker,
                                                    tmp_path: Path) -> None:
    """Every event to the broker, its last acknowledged seq in `uwf_bridge`, a second
    bridge to the same place refused while one holds it."""
    from tests.e2e.test_bridge import covers, subscribed

    url = pg_server.create_database().replace("postgres@", "postgres:s3cret@")
    cli = Cli(tmp_path / "unused", env_for(url, tmp_path))
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    assert cli.run("thread", "start", "solve-issue", "-p", "Fix it").code == 0
    lines = cli.run("log", "tail", "-n", "100", "--json").out.splitlines()
    with subscribed(broker, "pg") as subscriber:
        done = cli.run("bridge", "mqtt", "--broker", broker.url, "--once", "--json")
        assert done.code == 0, done.err
        subscriber.until(covers(len(lines)))
    assert [message.payload for message in subscriber.got] == [line.encode() for line in lines]
    result = json.loads(done.out)
    assert (result["from"], result["to"], result["published"]) == (1, len(lines), len(lines))
    assert result["state"] == f"uwf_bridge (127.0.0.1:{broker.port}, uwf)"
    again = json.loads(cli.run("bridge", "mqtt", "--broker", broker.url, "--once",
                               "--json").out)
    assert (again["from"], again["published"]) == (None, 0)

    from uwf.bridge.service import DatabasePlace, target
    from uwf.store import Store

    store = Store.open(url)
    try:
        assert store.database is not None
        with DatabasePlace(store.database, target(broker.url, "uwf", 1, None)).held():
            busy = cli.run("bridge", "mqtt", "--broker", broker.url, "--once")
        assert busy.code == 1
        assert "another `uwf bridge mqtt`" in busy.err
        assert "s3cret" not in busy.err
    finally:
        store.close()


def test_an_idle_worker_wakes_when_an_entry_is_added(pg_url: str, tmp_path: Path) -> None:
    """On PostgreSQL an idle worker LISTENs: an entry added while it waits on a 60 s
    poll is run within seconds (the NOTIFY of the entry's event wakes it)."""
    import time

    import yaml

    from tests.threadkit import MOCK_SCRIPT, mock_config

    script = tmp_path / "mock.yaml"
    script.write_text(yaml.safe_dump(MOCK_SCRIPT), "utf-8")
    config = tmp_path / "config" / "uwf" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump(mock_config(script)), "utf-8")
    env = {**env_for(pg_url, tmp_path), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    cli = Cli(tmp_path / "unused", env)
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    # Its next poll an hour away: a line at all (before the test's time limit) is a
    # worker woken by the add, never a timed wait.
    worker = subprocess.Popen([str(BIN / "uwf"), "worker", "--poll", "3600"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2.0)  # it has found nothing, and waits
        assert cli.run("queue", "add", "--workflow", "solve-issue", "-p", "late").code == 0
        assert worker.stdout is not None
        line = worker.stdout.readline()  # the entry's end, printed as it happens
    finally:
        worker.terminate()
        _, err = worker.communicate(timeout=30)
    assert "completed" in line, (line, err)
    assert "Traceback" not in err
