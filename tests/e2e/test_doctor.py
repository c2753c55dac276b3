"""`uwf doctor` (docs/doctor.md): a healthy store and its servers say ok; a torn tail,
stale or absent views, a missing agent command, an unreachable server and a store of a
newer format each say what is wrong and what to do, on their own line; a failure exits 1,
a warning does not; doctor writes nothing, and never prints a URL's password."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.brokerkit import Broker, free_port
from tests.conftest import EXAMPLE, Cli, snapshot
from tests.pgkit import Server


def doctor(cli: Cli, *args: str, code: int | None = 0) -> dict[str, Any]:
    result = cli.run("doctor", *args, "--json")
    assert code is None or result.code == code, (result.code, result.out, result.err)
    payload: dict[str, Any] = json.loads(result.out)
    assert payload["ok"] is (result.code == 0)
    return payload


def panel(payload: dict[str, Any]) -> str:
    """What a terminal shows."""
    from uwf.cli.doctor import DOCTOR_COMMANDS

    human = DOCTOR_COMMANDS[0].human
    assert human is not None
    return human(payload)


def by_name(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in payload["checks"]}


def statuses(payload: dict[str, Any]) -> dict[str, str]:
    return {check["name"]: check["status"] for check in payload["checks"]}


def with_config(cli: Cli, tmp_path: Path, agents: dict[str, Any]) -> Path:
    config = tmp_path / "config" / "uwf" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"agents": agents}), "utf-8")  # JSON is YAML
    return config


def used_store(cli: Cli) -> str:
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    started = cli.run("thread", "start", "solve-issue", "--prompt", "Fix it", "--json")
    assert started.code == 0, started.err
    thread: str = json.loads(started.out)["thread"]
    return thread


def test_a_healthy_store_with_its_servers_is_all_ok(cli: Cli, tmp_path: Path,
                                                    pg_server: Server,
                                                    broker: Broker) -> None:
    used_store(cli)
    with_config(cli, tmp_path, {"mock": {"command": "uwf-mock", "args": ["x.yaml"]}})
    before = snapshot(cli.home)
    payload = doctor(cli, "--database", pg_server.url(), "--broker", broker.url)
    assert set(statuses(payload).values()) == {"ok"}, payload
    names = list(statuses(payload))
    assert names == ["python", "extras", "store", "format", "lock", "views", "log tail",
                     "disk", "anchors", "config", "agent mock", "postgres", "mqtt"]
    checks = by_name(payload)
    assert checks["format"]["detail"] == "format 2, hash rule json-cas"
    assert checks["views"]["detail"].startswith("fresh at seq ")
    assert checks["agent mock"]["detail"].startswith("uwf-mock -> ")
    assert "PostgreSQL" in checks["postgres"]["detail"]
    assert snapshot(cli.home) == before  # doctor writes nothing
    # On a terminal: one line a check, then the count.
    assert panel(payload).splitlines()[-1] == f"all {len(names)} checks ok"


def test_a_store_not_made_yet_is_fine(cli: Cli) -> None:
    payload = doctor(cli)
    assert statuses(payload) == {"python": "ok", "extras": "ok", "store": "ok", "disk": "ok",
                                 "config": "ok"}
    assert "no store at" in by_name(payload)["store"]["detail"]
    assert not cli.home.exists()  # looking made nothing


def test_a_torn_tail_is_a_warning_until_the_next_write_repairs_it(cli: Cli) -> None:
    used_store(cli)
    segment = sorted((cli.home / "events").glob("*.jsonl"))[-1]
    with segment.open("ab") as handle:
        handle.write(b'{"seq":99,"half')
    torn = segment.read_bytes()
    payload = doctor(cli)  # a warning: exit 0
    tail = by_name(payload)["log tail"]
    assert tail["status"] == "warn"
    assert tail["detail"].startswith(f"torn: 15 bytes without a newline at the end of "
                                     f"{segment.name}")
    assert "the next command that writes cuts it" in tail["detail"]
    assert segment.read_bytes() == torn  # doctor never cuts it
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0  # a write repairs it
    assert by_name(doctor(cli))["log tail"]["status"] == "ok"


def test_a_cut_batch_is_a_warning(cli: Cli) -> None:
    used_store(cli)
    segment = sorted((cli.home / "events").glob("*.jsonl"))[-1]
    last = json.loads(segment.read_bytes().splitlines()[-1])
    # The first line of a two-line batch whose second line was never written.
    cut = {**last, "seq": last["seq"] + 1, "batch": [1, 2]}
    with segment.open("ab") as handle:
        handle.write(json.dumps(cut, separators=(",", ":")).encode() + b"\n")
    tail = by_name(doctor(cli, code=None))["log tail"]
    assert tail["status"] == "warn"
    assert tail["detail"].startswith(f"the last batch is cut: seq {cut['seq']} is line 1 of 2")


def test_stale_and_absent_views_are_warnings_naming_the_fix(cli: Cli) -> None:
    used_store(cli)
    views = cli.home / "views"
    kept = cli.home.parent / "views-then"
    shutil.copytree(views, kept)
    assert cli.run("workflow", "put", str(EXAMPLE.parent / "seed-conditions.yaml")).code == 0
    shutil.rmtree(views)
    shutil.copytree(kept, views)  # the views as they were before the last write
    check = by_name(doctor(cli))["views"]
    assert check["status"] == "warn"
    assert check["detail"].startswith("stale: every view 1 event behind the log")
    assert check["detail"].endswith("run `uwf registry refresh`")
    assert by_name(doctor(cli))["views"]["status"] == "warn"  # doctor caught nothing up
    shutil.rmtree(views)
    check = by_name(doctor(cli))["views"]
    assert (check["status"], check["detail"].split(" (")[0]) == ("warn", "absent")
    assert not views.exists()  # nor rebuilt them
    assert cli.run("registry", "rebuild").code == 0
    assert by_name(doctor(cli))["views"]["status"] == "ok"


def test_a_missing_or_unrunnable_agent_command_fails(cli: Cli, tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n", "utf-8")  # not executable
    config = with_config(cli, tmp_path, {
        "mock": {"command": "uwf-mock"},
        "ghost": {"command": "no-such-agent-anywhere"},
        "script": {"command": str(script)}})
    result = cli.run("doctor", "--json")
    assert result.code == 1
    payload = json.loads(result.out)
    checks = by_name(payload)
    assert payload["ok"] is False
    assert checks["agent mock"]["status"] == "ok"
    assert checks["agent ghost"] == {
        "name": "agent ghost", "status": "fail",
        "detail": "its command no-such-agent-anywhere is not found on PATH; install it, or "
                  f"fix agents.ghost.command in {config}"}
    assert checks["agent script"]["status"] == "fail"
    assert checks["agent script"]["detail"].startswith(f"its command {script} is not "
                                                       f"executable; chmod +x {script}")
    shown = panel(payload).splitlines()
    assert any(line.startswith("FAIL  agent ghost") for line in shown)
    assert shown[-1].startswith("2 failed, ")


def test_a_config_that_does_not_load_fails(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "config" / "uwf" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("agents: {mock: {comand: uwf-mock}}\n", "utf-8")
    check = by_name(doctor(cli, code=1))["config"]
    assert check["status"] == "fail"
    assert check["detail"].startswith(f"invalid config {config}: ")


def test_unreachable_servers_fail_and_no_password_is_printed(cli: Cli,
                                                             pg_server: Server) -> None:
    used_store(cli)
    nobody = free_port()
    secret = "s3cret-Pw"
    result = cli.run("doctor", "--json", "--timeout", "1",
                     "--database", f"postgresql://bob:{secret}@127.0.0.1:{nobody}/uwf",
                     "--broker", f"mqtt://127.0.0.1:{nobody}")
    assert result.code == 1
    assert secret not in result.out + result.err
    checks = by_name(json.loads(result.out))
    assert checks["postgres"]["status"] == "fail"
    assert checks["postgres"]["detail"].startswith(
        f"cannot reach postgresql://bob@127.0.0.1:{nobody}/uwf: ")
    assert "check that the server runs" in checks["postgres"]["detail"]
    assert checks["mqtt"]["status"] == "fail"
    assert checks["mqtt"]["detail"].startswith(f"the MQTT broker 127.0.0.1:{nobody} is "
                                               "unavailable")
    # A reachable server, its URL with a password (the test server trusts anyone).
    url = pg_server.url().replace("postgres@", f"postgres:{secret}@")
    reached = cli.run("doctor", "--json", "--database", url)
    assert reached.code == 0, reached.out
    assert secret not in reached.out + reached.err


def test_a_store_on_a_server_that_is_down_fails(cli: Cli) -> None:
    url = f"postgresql://uwf:hidden-pw@127.0.0.1:{free_port()}/uwf"
    result = cli.run("--store", url, "doctor", "--json", "--timeout", "1")
    assert result.code == 1
    assert "hidden-pw" not in result.out + result.err
    payload = json.loads(result.out)
    assert payload["store"] == url.replace(":hidden-pw", "")
    assert statuses(payload)["store"] == "fail"
    assert "format" not in statuses(payload)  # nothing of the store could be looked at


def test_a_store_on_postgresql_is_checked_there(cli: Cli, pg_url: str) -> None:
    assert cli.run("--store", pg_url, "workflow", "put", str(EXAMPLE)).code == 0
    result = cli.run("--store", pg_url, "doctor", "--json")
    assert result.code == 0, result.out
    assert statuses(json.loads(result.out)) == {
        "python": "ok", "extras": "ok", "store": "ok", "format": "ok", "views": "ok",
        "anchors": "ok", "config": "ok"}


def test_a_newer_format_fails(cli: Cli) -> None:
    used_store(cli)
    segment = sorted((cli.home / "events").glob("*.jsonl"))[0]
    data = segment.read_bytes()
    first = data.split(b"\n", 1)[0]
    assert b'"format":2' in first
    segment.write_bytes(data.replace(b'"format":2', b'"format":9', 1))
    check = by_name(doctor(cli, code=1))["format"]
    assert check == {"name": "format", "status": "fail",
                     "detail": "format 9, written by a newer uwf (this one reads up to 2); "
                               "upgrade uwf"}


def test_anchors_folder_says_how_far_behind_the_newest_is(cli: Cli, tmp_path: Path) -> None:
    used_store(cli)
    folder = tmp_path / "anchors"
    folder.mkdir()
    check = by_name(doctor(cli, "--anchors", str(folder)))["anchors"]
    assert (check["status"], check["detail"].split(";")[0]) == ("warn", f"no anchor in {folder}")
    key = tmp_path / "key.pem"
    assert cli.run("log", "anchor", "--new-key", "--key", str(key)).code == 0
    assert cli.run("log", "anchor", "--key", str(key), "--out",
                   str(folder / "a1.json")).code == 0
    assert cli.run("workflow", "put", str(EXAMPLE.parent / "seed-conditions.yaml")).code == 0
    check = by_name(doctor(cli, "--anchors", str(folder)))["anchors"]
    assert check["status"] == "ok"
    assert check["detail"].startswith("newest a1.json: seq ")
    assert " 1 event and " in check["detail"]


def test_bad_server_urls_are_usage_errors(cli: Cli) -> None:
    for args, said in ((("--database", "mysql://x@y/z"), "is not a postgresql:// URL"),
                       (("--broker", "http://host"), "is not an mqtt:// or mqtts:// URL")):
        result = cli.run("doctor", *args)
        assert result.code == 2
        assert result.out == ""
        [line] = result.err.splitlines()
        assert line.startswith("uwf: error: ")
        assert said in line
