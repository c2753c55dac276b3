"""`uwf bridge mqtt` against a real mosquitto (tests/brokerkit.py): every event of the log
reaches a subscriber as its log line, in seq order; a bridge killed with SIGKILL or a
broker restarted mid-stream loses nothing (at least once: duplicates allowed, no gap);
`--once` resumes from the acknowledged seq it keeps; a broker that is not there is
one line and exit 1."""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.brokerkit import Broker, broker, free_port
from tests.conftest import BIN, EXAMPLE, Cli
from uwf.queue.broker import Connection, Message, parse_broker

__all__ = ["broker"]  # the fixture, used by name

pytest.importorskip("paho.mqtt")


@dataclass
class Subscriber:
    """A persistent session subscribed to `uwf/#` (QoS 1): what it got so far, and the
    seq of each message."""

    connection: Connection
    got: list[Message] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)

    def until(self, done: Callable[[Subscriber], bool], timeout: float = 20) -> list[Message]:
        deadline = time.monotonic() + timeout
        while not done(self):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the subscriber has {len(self.got)} messages after "
                                     f"{timeout:g} s")
            with contextlib.suppress(queue.Empty):
                message = self.connection.messages.get(timeout=min(left, 0.2))
                self.got.append(message)
                self.seqs.append(json.loads(message.payload)["seq"])
                self.seen.add(self.seqs[-1])
        return self.got


def has(count: int) -> Callable[[Subscriber], bool]:
    return lambda subscriber: len(subscriber.got) >= count


def covers(head: int) -> Callable[[Subscriber], bool]:
    """Every seq from 1 to `head` came (some perhaps twice)."""
    return lambda subscriber: len(subscriber.seen) == head and max(subscriber.seen) == head


@contextlib.contextmanager
def subscribed(running: Broker, name: str) -> Iterator[Subscriber]:
    """Subscribed once a probe it published has come back, so the bridge started after
    it misses nothing."""
    connection = Connection(parse_broker(running.url), {}, client_id=f"uwf-test-{name}",
                            clean=False)
    try:
        connection.subscribe("uwf/#", qos=1)
        connection.publish("uwf/probe", b"probe")
        assert connection.messages.get(timeout=60).topic == "uwf/probe"
        yield Subscriber(connection)
    finally:
        connection.close()


def quiet(cli: Cli) -> Cli:
    cli.env["UWF_DURABILITY"] = "none"  # what is tested here is not the log's fsync
    return cli


def queued(cli: Cli, tmp_path: Path, count: int, name: str = "batch") -> None:
    """`count` entries added in one `queue add --batch` (the workflow registered first)."""
    if not (cli.home / "events").exists():
        assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"workflow": "solve-issue", "prompt": f"task {n}"})
                            + "\n" for n in range(count)), "utf-8")
    added = cli.run("queue", "add", "--batch", str(path), "--quiet")
    assert added.code == 0, added.err


def log_lines(cli: Cli) -> list[bytes]:
    return cli.log_bytes().split(b"\n")[:-1]


def state_file(cli: Cli) -> Path | None:
    return next((cli.home / "bridge").glob("mqtt-*.json"), None)


def state_seq(cli: Cli, wanted: Callable[[int], bool], timeout: float = 20) -> int:
    """The seq in the bridge's state file, once `wanted(seq)` holds."""
    deadline = time.monotonic() + timeout
    while True:
        state = state_file(cli)
        seq = json.loads(state.read_bytes())["seq"] if state is not None else 0
        if wanted(seq):
            return int(seq)
        assert time.monotonic() < deadline, f"the bridge's state is at seq {seq}"
        time.sleep(0.002)


@contextlib.contextmanager
def bridge(cli: Cli, running: Broker, *more: str) -> Iterator[subprocess.Popen[str]]:
    """`uwf bridge mqtt` as a process, killed if the test leaves it running."""
    process = subprocess.Popen([str(BIN / "uwf"), "bridge", "mqtt", "--broker", running.url,
                                *more], env=cli.env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_a_subscriber_gets_every_event_as_its_log_line_in_seq_order(cli: Cli,
                                                                    broker: Broker) -> None:
    quiet(cli)
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    assert cli.run("thread", "start", "solve-issue", "-p", "Fix the login bug").code == 0
    for n in range(3):
        assert cli.run("queue", "add", "--workflow", "solve-issue", "-p", f"task {n}").code == 0
    lines = cli.run("log", "tail", "-n", "1000", "--json").out.splitlines()
    with subscribed(broker, "order") as subscriber:
        done = cli.run("bridge", "mqtt", "--broker", broker.url, "--once", "--json")
        assert done.code == 0, done.err
        got = subscriber.until(has(len(lines)))
    assert [message.payload for message in got] == [line.encode() for line in lines]
    assert [message.topic for message in got] == [
        f"uwf/{json.loads(line)['subject']}/events" for line in lines]
    assert {message.topic.split("/")[1] for message in got} == {
        "store", "workflow", "thread", "queue"}
    state = state_file(cli)
    assert state is not None
    assert json.loads(done.out) == {"broker": f"127.0.0.1:{broker.port}", "prefix": "uwf",
                                    "from": 1, "to": len(lines), "published": len(lines),
                                    "state": str(state)}


def test_once_again_publishes_nothing_and_the_state_holds_the_last_seq(
        cli: Cli, broker: Broker, tmp_path: Path) -> None:
    queued(quiet(cli), tmp_path, 5)
    head = len(log_lines(cli))
    first = cli.run("bridge", "mqtt", "--broker", broker.url, "--once", "--prefix", "team/a",
                    "--json")
    assert first.code == 0, first.err
    assert json.loads(first.out)["published"] == head
    again = cli.run("bridge", "mqtt", "--broker", broker.url, "--once", "--prefix", "team/a",
                    "--json")
    assert again.code == 0, again.err
    result = json.loads(again.out)
    assert (result["from"], result["to"], result["published"]) == (None, head, 0)
    state = state_file(cli)
    assert state is not None
    assert result["state"] == str(state)
    assert json.loads(state.read_bytes()) == {"broker": f"127.0.0.1:{broker.port}",
                                              "prefix": "team/a", "seq": head}
    # What is appended since goes next; another prefix is another place with its own seq.
    queued(cli, tmp_path, 2, "more")
    more = json.loads(cli.run("bridge", "mqtt", "--broker", broker.url, "--once",
                              "--prefix", "team/a", "--json").out)
    assert (more["from"], more["to"], more["published"]) == (head + 1, head + 2, 2)
    other = json.loads(cli.run("bridge", "mqtt", "--broker", broker.url, "--once",
                               "--json").out)
    assert (other["from"], other["published"]) == (1, head + 2)


def test_a_bridge_killed_mid_stream_resumes_after_the_acknowledged_seq(
        cli: Cli, broker: Broker, tmp_path: Path) -> None:
    cli = quiet(cli)
    queued(cli, tmp_path, 10_000)
    lines = log_lines(cli)
    head = len(lines)
    with subscribed(broker, "killed") as subscriber, bridge(cli, broker, "--once") as running:
        state_seq(cli, lambda seq: seq > 0)  # the first chunk is acknowledged
        running.kill()
        running.communicate()
        killed_at = state_seq(cli, lambda seq: True)
        assert 0 < killed_at < head  # mid-stream
        again = cli.processes().run("bridge", "mqtt", "--broker", broker.url, "--once",
                                    "--json")
        assert again.code == 0, again.err
        result = json.loads(again.out)
        assert (result["from"], result["to"]) == (killed_at + 1, head)
        got = subscriber.until(covers(head))
    assert subscriber.seen == set(range(1, head + 1))
    assert all(message.payload == lines[seq - 1]
               for message, seq in zip(got, subscriber.seqs, strict=True))


def test_a_broker_restarted_mid_stream_loses_nothing_while_the_bridge_follows(
        cli: Cli, tmp_path: Path) -> None:
    cli = quiet(cli)
    folder = tmp_path / "broker"
    folder.mkdir()
    running = Broker(folder, persistent=True)  # the subscriber's session outlives a restart
    running.start()
    try:
        queued(cli, tmp_path, 20_000, "before")
        before = len(log_lines(cli))
        with subscribed(running, "restarted") as subscriber, bridge(cli, running) as follower:
            assert state_seq(cli, lambda seq: seq > 0) < before  # mid-stream
            running.restart()
            queued(cli, tmp_path, 1000, "after")
            head = len(log_lines(cli))
            subscriber.until(covers(head), timeout=25)
            state_seq(cli, lambda seq: seq == head)
            follower.send_signal(signal.SIGTERM)
            out, err = follower.communicate(timeout=10)
        assert follower.returncode == 0, err
    finally:
        running.stop()
    assert subscriber.seen == set(range(1, head + 1))
    assert "Traceback" not in err
    assert len(err.splitlines()) <= 2
    results = [json.loads(line) for line in out.splitlines()]
    assert results[-1]["to"] == head
    state = state_file(cli)
    assert state is not None
    assert json.loads(state.read_bytes())["seq"] == head


def test_a_following_bridge_waits_for_a_broker_that_is_down_and_says_so_once(
        cli: Cli, tmp_path: Path) -> None:
    cli = quiet(cli)
    folder = tmp_path / "broker"
    folder.mkdir()
    running = Broker(folder, persistent=True)
    running.start()
    try:
        queued(cli, tmp_path, 50)
        head = len(log_lines(cli))
        with subscribed(running, "waiting") as subscriber:
            running.stop()  # the subscriber's session is kept for when it is back
            with bridge(cli, running) as follower:
                time.sleep(1.5)
                assert state_file(cli) is None
                running.start()
                subscriber.until(covers(head))
                state_seq(cli, lambda seq: seq == head)
                follower.send_signal(signal.SIGTERM)
                _, err = follower.communicate(timeout=10)
        assert follower.returncode == 0, err
    finally:
        running.stop()
    said = err.splitlines()
    assert len(said) == 2, err
    assert f"127.0.0.1:{running.port} is unavailable" in said[0]
    assert "trying again" in said[0]
    assert "answers again; publishing from seq 1" in said[1]


def test_an_unreachable_broker_is_one_line_and_exit_1(cli: Cli, tmp_path: Path) -> None:
    cli = quiet(cli)
    queued(cli, tmp_path, 2)
    port = free_port()  # nothing listens there
    done = cli.processes().run("bridge", "mqtt", "--broker", f"mqtt://127.0.0.1:{port}",
                               "--once")
    assert done.code == 1
    assert done.out == ""
    assert len(done.err.splitlines()) == 1
    assert f"127.0.0.1:{port}" in done.err
    assert "Traceback" not in done.err
    assert state_file(cli) is None


def test_a_second_bridge_to_the_same_place_is_refused(cli: Cli, broker: Broker,
                                                      tmp_path: Path) -> None:
    from uwf.bridge import service

    queued(quiet(cli), tmp_path, 1)
    to = service.target(broker.url, "uwf", 1, None)
    with service._held(service.state_path(cli.home, to), to):
        done = cli.run("bridge", "mqtt", "--broker", broker.url, "--once")
    assert done.code == 1
    assert "another `uwf bridge mqtt`" in done.err


def test_topics_replace_wildcards_and_nul_of_a_subject() -> None:
    from uwf.bridge.service import topic

    assert topic("uwf", "queue/01J0") == "uwf/queue/01J0/events"
    assert topic("a/b", "x+y#z\x00") == "a/b/x_y_z_/events"


def test_only_whole_batches_are_published(cli: Cli, tmp_path: Path) -> None:
    """A batch whose last line is not written yet waits (its writer may yet cut it)."""
    from uwf.bridge.service import acknowledged, ready
    from uwf.store import Store

    queued(quiet(cli), tmp_path, 2)
    segment = max((cli.home / "events").glob("*.jsonl"))
    store = Store.open(cli.home)
    try:
        head = store.log.head().seq
        assert [seq for seq, _, _ in ready(store.log, 0)] == list(range(1, head + 1))
        assert [seq for seq, _, _ in ready(store.log, 0, limit=3)] == [1, 2, 3, 4]  # whole
        line = {"seq": head + 1, "subject": "x", "batch": [1, 2]}
        with segment.open("ab") as handle:
            handle.write(json.dumps(line).encode() + b"\n")
        assert ready(store.log, head) == []
        with segment.open("ab") as handle:
            handle.write(json.dumps({**line, "seq": head + 2, "batch": [2, 2]}).encode()
                         + b"\n")
        assert [seq for seq, _, _ in ready(store.log, head)] == [head + 1, head + 2]
        # Whole, but written by no writer's section: never acknowledged, so not published.
        assert acknowledged(store) == head
        assert ready(store.log, head, upto=acknowledged(store)) == []
    finally:
        store.close()


def test_bad_arguments_are_usage_errors(cli: Cli) -> None:
    for args, said in ((["--broker", "http://x"], "not an mqtt://"),
                       (["--broker", "mqtt://h:1", "--prefix", "a/#"], "topic prefix"),
                       (["--broker", "mqtt://h:1", "--prefix", "$SYS"], "starts with $"),
                       (["--broker", "mqtt://h:1", "--broker-password-env", "P"],
                        "needs a user"),
                       (["--broker", "mqtt://h:1", "--qos", "0"], "invalid choice")):
        done = cli.run("bridge", "mqtt", *args, "--once")
        assert (done.code, said in done.err) == (2, True), (args, done.err)
