"""Jobs over MQTT against a real mosquitto (tests/brokerkit.py): a subscriber follows a
job live, forged and replayed messages are refused, a broker that is down or restarts
loses nothing, and the job's own writes never wait on it (docs/mqtt.md)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.brokerkit import Broker, free_port
from tests.conftest import BIN, EXAMPLE, Cli

pytest.importorskip("paho.mqtt")  # the `mqtt` extra; `dev` installs it, so CI never skips

MOCK = f"uwf-mock {EXAMPLE.parent / 'mock-solve-issue.yaml'}"


def ok(cli: Cli, *args: str) -> Any:
    result = cli.run(*args, "--json") if "--json" not in args else cli.run(*args)
    assert result.code == 0, result.err
    return json.loads(result.out)


def job(cli: Cli, url: str, *more: str) -> str:
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    added = ok(cli, "queue", "add", "--workflow", "solve-issue", "-p", "Fix the login bug",
               "--session", "w", "--agent", MOCK, "--broker", url, *more)
    entry = added["entry"]
    assert entry["broker"]["port"] == int(url.rsplit(":", 1)[1])
    assert entry["topicPrefix"] == f"uwf/jobs/{entry['id']}"
    assert len(entry["authToken"]) >= 40
    assert entry["lastSeq"] == 0
    return str(entry["id"])


def follower(cli: Cli, entry: str) -> subprocess.Popen[str]:
    """`uwf queue subscribe ID --follow` as a process, once its session is at the broker
    (a first subscribe without --follow makes the broker keep the job's messages)."""
    assert cli.run("queue", "subscribe", entry, "--wait", "0.2").code == 0
    return subprocess.Popen([str(BIN / "uwf"), "queue", "subscribe", entry, "--follow"],
                            env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def lines(process: subprocess.Popen[str], timeout: float = 60) -> list[dict[str, Any]]:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


def test_a_subscriber_follows_a_job_live(cli: Cli, broker: Broker) -> None:
    entry = job(cli, broker.url)
    watching = follower(cli, entry)
    for pct in (10, 50):
        published = ok(cli, "queue", "publish", entry, "--event",
                       json.dumps({"type": "progress", "pct": pct}))
        assert published["topic"] == f"uwf/jobs/{entry}/events"
    worked = cli.run("worker", "--session", "w", "--once", "--allow-entry-commands", "--json")
    assert worked.code == 0, worked.err
    assert "publishError" not in json.loads(worked.out)
    received = lines(watching)
    assert [line["seq"] for line in received] == [1, 2, 3, 4]
    assert [line["event"] for line in received] == [
        {"type": "progress", "pct": 10}, {"type": "progress", "pct": 50},
        {"type": "status", "status": "running", "attempt": 1},
        {"type": "status", "status": "completed", "attempt": 1, "outcome": "completed"}]
    shown = ok(cli, "queue", "show", entry)
    assert (shown["lastSeq"], shown["receivedSeq"], shown["undelivered"]) == (4, 4, [])
    timeline = ok(cli, "queue", "logs", entry)["events"]
    assert [e["event"] for e in timeline].count("published") == 4
    assert [e["event"] for e in timeline].count("received") == 4
    assert cli.run("log", "verify").code == 0


def test_forged_and_replayed_messages_are_refused(cli: Cli, broker: Broker) -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    entry = job(cli, broker.url)
    assert cli.run("queue", "subscribe", entry, "--wait", "0.2").code == 0
    ok(cli, "queue", "publish", entry, "--event", '{"n": 1}')
    first = cli.run("queue", "subscribe", entry, "--wait", "1")
    assert [json.loads(line)["seq"] for line in first.out.splitlines()] == [1]
    token = ok(cli, "queue", "show", entry)["authToken"]

    def raw(seq: int, token: str | None) -> bytes:
        return json.dumps({"job": entry, "seq": seq, "ts": "2026-01-01T00:00:00.000Z",
                           "token": token, "event": {"forged": seq}}).encode()

    sender = mqtt.Client(CallbackAPIVersion.VERSION2)
    sender.connect("127.0.0.1", broker.port)
    sender.loop_start()
    for payload in (raw(2, "not-the-token"), raw(3, None), raw(1, token), b"{nope",
                    raw(2, token)):
        sender.publish(f"uwf/jobs/{entry}/events", payload, qos=1).wait_for_publish(5)
    sender.loop_stop()
    sender.disconnect()
    second = cli.run("queue", "subscribe", entry, "--wait", "1")
    assert second.code == 0, second.err
    assert [json.loads(line)["event"] for line in second.out.splitlines()] == [{"forged": 2}]
    refusals = second.err.splitlines()
    assert len(refusals) == 4
    assert sum("wrong or missing token" in line for line in refusals) == 2
    assert sum("seq 1 was already received" in line for line in refusals) == 1
    assert sum("not JSON" in line for line in refusals) == 1
    assert ok(cli, "queue", "show", entry)["receivedSeq"] == 2


def test_an_unreachable_broker_never_breaks_the_jobs_writes(cli: Cli, tmp_path: Path) -> None:
    down = Broker(tmp_path / "later", port=free_port())
    (tmp_path / "later").mkdir()
    entry = job(cli, down.url)
    failed = cli.run("queue", "publish", entry, "--event", '{"type": "progress"}',
                     "--timeout", "1")
    assert failed.code == 1
    assert failed.err.count("\n") == 1
    assert "Traceback" not in failed.err
    assert failed.err.startswith(f"uwf: error: event 1 of {entry} is recorded but not "
                                 f"delivered: the MQTT broker {down.url[7:]} is unavailable")
    worked = cli.run("worker", "--session", "w", "--once", "--allow-entry-commands", "--json")
    assert worked.code == 0, worked.err
    done = json.loads(worked.out)
    assert done["outcome"] == "completed"
    assert "unavailable" in done["publishError"]
    shown = ok(cli, "queue", "show", entry)
    assert shown["status"] == "drained"
    assert (shown["lastSeq"], shown["undelivered"]) == (3, [1, 2, 3])
    assert cli.run("log", "verify").code == 0

    down.start()
    try:
        assert cli.run("queue", "subscribe", entry, "--wait", "0.2").code == 0
        resent = ok(cli, "queue", "publish", entry, "--resend")
        assert resent["resent"] == [1, 2, 3]
        assert ok(cli, "queue", "show", entry)["undelivered"] == []
        got = cli.run("queue", "subscribe", entry, "--wait", "1")
        assert [json.loads(line)["seq"] for line in got.out.splitlines()] == [1, 2, 3]
    finally:
        down.stop()


def test_a_broker_restarted_mid_stream_loses_nothing(cli: Cli, broker: Broker) -> None:
    entry = job(cli, broker.url)
    watching = follower(cli, entry)
    ok(cli, "queue", "publish", entry, "--event", '{"n": 1}')
    broker.stop()
    down = cli.run("queue", "publish", entry, "--event", '{"n": 2}', "--timeout", "1")
    assert down.code == 1  # recorded, not delivered
    broker.start()
    deadline = time.monotonic() + 60
    while True:  # the next publish sends event 2 first, once the broker is back
        again = cli.run("queue", "publish", entry, "--event",
                        '{"type": "status", "status": "completed"}', "--timeout", "2")
        if again.code == 0:
            break
        assert time.monotonic() < deadline, again.err
        time.sleep(0.2)
    assert json.loads(again.out)["resent"] == [2]
    received = lines(watching)
    assert [line["seq"] for line in received] == [1, 2, 3]
    assert ok(cli, "queue", "show", entry)["receivedSeq"] == 3


def test_queue_add_refuses_what_it_cannot_use(cli: Cli) -> None:
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    base = ("queue", "add", "--workflow", "solve-issue", "-p", "x")
    for args, said in (
            (("--broker", "http://host:1883"), "is not an mqtt:// or mqtts:// URL"),
            (("--broker", "mqtt://me:secret@host:1883"), "holds a password"),
            (("--topic-prefix", "a/b"), "go with --broker"),
            (("--broker", "mqtt://host", "--topic-prefix", "a/#"), "is not a topic"),
            (("--broker", "mqtt://host", "--broker-password-env", "PW"), "needs a user")):
        refused = cli.run(*base, *args)
        assert refused.code == 2, args
        assert said in refused.err
        assert "secret" not in refused.err
    assert cli.run("queue", "list", "--json").out.count('"id"') == 0
    plain = ok(cli, *base)["entry"]
    assert "broker" not in plain
    assert "authToken" not in plain
    no_broker = cli.run("queue", "publish", plain["id"], "--event", "{}")
    assert no_broker.code == 1
    assert "has no MQTT broker" in no_broker.err
