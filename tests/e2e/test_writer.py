"""The resident writer (`uwf writer`, uwf/writer/): real processes on a folder store.

Clients (the library's `sched.lease/complete`, the CLI) send their calls to the writer
when one answers on the store's socket, and decide them in-process when none does; the
writers' lock stays the protocol, so both kinds of client stay correct side by side.
A writer killed with SIGKILL at any point loses nothing it acknowledged: it answers
only after the fsync that covers a round's lines.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BIN, EXAMPLE, Cli
from tests.e2e.test_fsyncs import SYNC, strace_binary
from uwf.engine.writerlink import HEADER, SOCKET_NAME, Call, Done, decode_call, frame
from uwf.queue.results import EntryRecord, Leased

pytestmark = pytest.mark.cli_processes

# A client process: `count` tries of lease + complete through the library, each outcome
# a line in `out` (flushed): L/C acknowledged lease/complete, U the writer stopped before
# it answered (StoreUnavailable), N nothing to lease, R refused. `local`: this client
# never uses a writer (as an older uwf, or one that found none).
CLIENT = r"""
import sys
from uwf.errors import NothingToDo, StoreUnavailable, UwfError
from uwf.queue import sched
from uwf.store import Store

root, count, out, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
store = Store.open(root)
if mode == "local":
    store.writer = None
with open(out, "a", buffering=1) as said:
    for _ in range(count):
        try:
            lease = sched.lease(store, 1).leases[0]
        except NothingToDo:
            said.write("N\n")
            continue
        except StoreUnavailable:
            said.write("U lease\n")
            continue
        said.write(f"L {lease.id} {lease.lease_id}\n")
        try:
            sched.complete(store, lease.id, lease.lease_id)
        except StoreUnavailable:
            said.write("U complete\n")
            continue
        except UwfError as exc:
            said.write(f"R {exc.line()}\n")
            continue
        said.write(f"C {lease.id} {lease.lease_id}\n")
store.close()
"""


def ok(cli: Cli, *args: str) -> Any:
    result = cli.run(*args, "--json")
    assert result.code == 0, result
    return json.loads(result.out) if result.out.strip() else None


def prepared(cli: Cli, entries: int, ceiling: int, ttl_ms: int = 300_000) -> None:
    ok(cli, "workflow", "put", str(EXAMPLE))
    ok(cli, "sched", "policy", "set", "--max-concurrent", str(ceiling),
       "--lease-ttl-ms", str(ttl_ms))
    batch = cli.home.parent / "entries.jsonl"
    batch.write_text("".join(json.dumps({"workflow": "solve-issue", "prompt": f"task {n}"})
                             + "\n" for n in range(entries)), "utf-8")
    ok(cli, "queue", "add", "--batch", str(batch))


class Writer(subprocess.Popen[str]):
    """A `uwf writer` process (under `prefix`: strace), and the writer's own pid."""

    pid_of_writer = 0


def start_writer(cli: Cli, *prefix: str) -> Writer:
    """A writer on the store, returned once it listens (its first line says so)."""
    proc = Writer([*prefix, str(BIN / "uwf"), "--json", "writer"], env=cli.env,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert "listening" in first, (first, proc.stderr.read() if proc.stderr else "")
    proc.pid_of_writer = json.loads(first)["pid"]
    return proc


def stop_writer(proc: Writer) -> dict[str, Any]:
    """SIGTERM to the writer, and what it said it served."""
    os.kill(proc.pid_of_writer, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def clients(cli: Cli, tmp_path: Path, modes: list[str], count: int
            ) -> tuple[list[subprocess.Popen[bytes]], list[Path]]:
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "client.py"
    script.write_text(CLIENT, "utf-8")
    outs = [tmp_path / f"client{n}.out" for n in range(len(modes))]
    procs = [subprocess.Popen([sys.executable, str(script), str(cli.home), str(count),
                               str(out), mode], env=cli.env, stderr=subprocess.PIPE)
             for out, mode in zip(outs, modes, strict=True)]
    return procs, outs


def finished(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err, err.decode()


def said(outs: list[Path]) -> list[list[str]]:
    return [line.split() for out in outs if out.exists()
            for line in out.read_text("utf-8").splitlines()]


def events(cli: Cli, kind: str) -> list[dict[str, Any]]:
    tail = cli.run("log", "tail", "-n", "1000000", "--type", kind, "--json")
    assert tail.code == 0, tail
    return [json.loads(line) for line in tail.out.splitlines()]


def whole_and_replayable(cli: Cli) -> None:
    """The chain, every rule (the lease ceiling at the log's clock among them), and views
    that a replay of the log gives row for row."""
    verified = ok(cli, "log", "verify")
    assert verified["ok"] is True, verified["problems"][:5]
    assert ok(cli, "registry", "verify")["ok"] is True


def test_clients_lease_and_complete_through_the_writer(cli: Cli, tmp_path: Path) -> None:
    """Three client processes, 8 cycles each, all through one writer: every call is the
    writer's (it counts them), every entry leased is completed once, the log is whole."""
    prepared(cli, entries=30, ceiling=8)
    writer = start_writer(cli)
    procs, outs = clients(cli, tmp_path, ["writer"] * 3, 8)
    finished(procs)
    served = stop_writer(writer)
    lines = said(outs)
    assert [line[0] for line in lines].count("C") == 24, lines
    assert served["calls"] == 48  # each lease and complete went through the writer
    assert served["fsyncs"] <= served["rounds"] <= served["calls"]
    completed = [event["subject"] for event in events(cli, "queue.completed")]
    assert len(completed) == len(set(completed)) == 24
    whole_and_replayable(cli)
    assert not (cli.home / SOCKET_NAME).exists()  # a writer that stops removes its socket


def test_a_refusal_reads_the_same_through_the_writer(cli: Cli) -> None:
    """`sched complete` with a wrong lease, `sched lease` over the ceiling: the same line
    and exit code from the writer as in-process, and nothing written."""
    prepared(cli, entries=2, ceiling=1)
    leased = ok(cli, "sched", "lease")["leases"][0]
    cases = [("sched", "complete", leased["id"], "--lease", "01M8FBAJ1ECC8SRFS9HHSGB2PM"),
             ("sched", "lease"), ("sched", "renew", leased["id"], "--lease", "0" * 26)]
    alone = [cli.run(*case) for case in cases]
    writer = start_writer(cli)
    try:
        served = [cli.refuses(result.code, *case) for case, result in zip(cases, alone,
                                                                          strict=True)]
    finally:
        counted = stop_writer(writer)
    assert served == [result.err.strip() for result in alone]
    assert [result.code for result in alone] == [1, 3, 1]
    assert counted["calls"] == 3  # the refusals were the writer's
    assert counted["fsyncs"] == 0  # nothing written, nothing to make durable


def test_a_client_falls_back_when_the_writer_is_gone(cli: Cli, tmp_path: Path) -> None:
    """No socket, then a stale socket (a writer killed: nothing listens on it), then a
    connection kept from a writer that has since stopped: the client decides in-process,
    silently, every time."""
    prepared(cli, entries=6, ceiling=6)
    from uwf.queue import sched
    from uwf.store import Store

    os.environ["UWF_DURABILITY"] = "fsync"
    store = Store.open(cli.home)
    try:
        assert sched.lease(store, 1).granted == 1  # no socket
        writer = start_writer(cli)
        assert sched.lease(store, 1).granted == 1  # through the writer (kept connection)
        writer.kill()
        writer.wait()
        assert (cli.home / SOCKET_NAME).exists()  # stale: left by SIGKILL
        assert sched.lease(store, 1).granted == 1  # the kept connection is dead: in-process
        assert sched.lease(store, 1).granted == 1  # the stale socket refuses: in-process
        writer = start_writer(cli)  # removes the stale socket, listens again
        assert sched.lease(store, 1).granted == 1
        assert stop_writer(writer)["calls"] == 1
    finally:
        store.close()
        del os.environ["UWF_DURABILITY"]
    assert len(events(cli, "queue.leased")) == 5
    whole_and_replayable(cli)


def test_threads_sharing_a_store_each_have_their_call(cli: Cli) -> None:
    """Threads of one process share a store (as `uwf worker --concurrency N` does): each
    has its own connection, so their calls in flight at once never mix their frames."""
    import threading

    prepared(cli, entries=40, ceiling=40)
    from uwf.queue import sched
    from uwf.store import Store

    os.environ["UWF_DURABILITY"] = "fsync"
    store = Store.open(cli.home)
    writer = start_writer(cli)
    done: list[str] = []
    go = threading.Barrier(4)

    def cycles() -> None:
        go.wait()
        for _ in range(10):
            lease = sched.lease(store, 1).leases[0]
            done.append(sched.complete(store, lease.id, lease.lease_id).status)

    try:
        threads = [threading.Thread(target=cycles) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        store.close()
        del os.environ["UWF_DURABILITY"]
        served = stop_writer(writer)
    assert done == ["drained"] * 40
    assert served["calls"] == 80
    whole_and_replayable(cli)


def test_a_second_writer_is_refused(cli: Cli) -> None:
    prepared(cli, entries=1, ceiling=1)
    writer = start_writer(cli)
    try:
        second = cli.run("writer")
        assert second.code == 2, second
        assert second.err.startswith("uwf: error: a writer already serves"), second.err
        assert len(second.err.splitlines()) == 1
    finally:
        stop_writer(writer)


def test_a_writer_killed_mid_call_is_one_line_and_the_unavailable_code(cli: Cli) -> None:
    """The writer dies after reading a call and before answering it: the CLI says so in
    one line (the command may or may not have been applied), exit 1, no traceback, and
    does not send the call again."""
    prepared(cli, entries=1, ceiling=1)
    path = cli.home / SOCKET_NAME
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))  # a writer that reads one call, then dies
    listener.listen(1)
    calls: list[Call] = []
    try:
        client = subprocess.Popen([str(BIN / "uwf"), "sched", "lease"], env=cli.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        conn, _ = listener.accept()
        header = conn.recv(HEADER.size, socket.MSG_WAITALL)
        calls.append(decode_call(conn.recv(HEADER.unpack(header)[0], socket.MSG_WAITALL)))
        conn.close()
        out, err = client.communicate(timeout=60)
    finally:
        listener.close()
        path.unlink()
    assert calls == [Call("queue.lease", {"limit": None, "session": None})]
    assert client.returncode == 1, err
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("uwf: error: the writer of "), err
    assert "may or may not have been applied" in err, err
    assert events(cli, "queue.leased") == []  # not retried in-process


STORM_CLIENTS = ["writer", "writer", "writer", "local"]
STORM_KILLS = 3


def test_sigkill_of_the_writer_in_a_storm_loses_nothing_acknowledged(
        cli: Cli, tmp_path: Path) -> None:
    """Four clients (three through the writer, one never) lease and complete against a
    ceiling of 2 while the writer is killed with SIGKILL three times, each after a
    random number of acknowledged calls, and started again. Every lease and complete a
    client was told of is in the log; the log verifies (the chain; no lease over the
    ceiling at the log's clock); the views equal a replay of the log."""
    rng = random.Random(30)
    prepared(cli, entries=200, ceiling=2, ttl_ms=1_500)
    procs, outs = clients(cli, tmp_path, STORM_CLIENTS, 30)
    writer = start_writer(cli)
    served: dict[str, Any] = {"calls": 0}
    try:
        for _ in range(STORM_KILLS):
            wanted = len(said(outs)) + rng.randint(3, 20)
            until(lambda wanted=wanted: len(said(outs)) >= wanted  # type: ignore[misc]
                  or all(p.poll() is not None for p in procs))
            writer.kill()
            writer.wait()
            writer = start_writer(cli)
        finished(procs)
        after, _ = clients(cli, tmp_path / "after", ["writer"], 3)
        finished(after)  # the writer started after the kills serves the next calls
    finally:
        if writer.poll() is None:
            served = stop_writer(writer)
    assert served["calls"] >= 3  # a lease each (or a lease and a complete) went to it
    lines = said(outs)
    leased = {(event["subject"].removeprefix("queue/"), event["data"]["leaseId"])
              for event in events(cli, "queue.leased")}
    completed = {(event["subject"].removeprefix("queue/"), event["data"]["leaseId"])
                 for event in events(cli, "queue.completed")}
    assert {(line[1], line[2]) for line in lines if line[0] == "L"} <= leased
    assert {(line[1], line[2]) for line in lines if line[0] == "C"} <= completed
    assert sum(line[0] == "C" for line in lines) > 0
    whole_and_replayable(cli)
    ok(cli, "sched", "reclaim")  # the next command succeeds


def until(condition: Callable[[], bool], seconds: float = 120) -> None:
    """Wait for `condition` (a look every 10 ms), failing after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true"
        time.sleep(0.01)


def test_one_fsync_covers_a_round_of_calls(cli: Cli) -> None:
    """Two calls sent in one write arrive together: the writer runs both, then fsyncs the
    log once (strace counts every fsync and fdatasync of its process), then answers each."""
    prepared(cli, entries=4, ceiling=4)
    strace = strace_binary()
    trace = cli.home.parent / "writer.strace"
    writer = start_writer(cli, strace, "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync",
                          "-o", str(trace))
    try:
        with connected(cli.home) as conn:
            conn.sendall(frame(Call("queue.lease", {"limit": 1, "session": None}))
                         + frame(Call("queue.lease", {"limit": 1, "session": None})))
            replies = [reply(conn, Leased), reply(conn, Leased)]
    finally:
        served = stop_writer(writer)
    assert [leased.granted for leased in replies] == [1, 1]
    assert replies[0].leases[0].id != replies[1].leases[0].id
    assert served == {**served, "calls": 2, "rounds": 1, "fsyncs": 1}
    segment = next((cli.home / "events").iterdir())
    synced = [match.group(3) for match in SYNC.finditer(trace.read_text("utf-8"))]
    assert synced == [str(segment)]


class connected:
    def __init__(self, root: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(root / SOCKET_NAME))

    def __enter__(self) -> socket.socket:
        return self.sock

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def reply(conn: socket.socket, kind: type[Leased] | type[EntryRecord]) -> Any:
    import msgspec

    from uwf.engine.writerlink import Reply

    header = conn.recv(HEADER.size, socket.MSG_WAITALL)
    body = conn.recv(HEADER.unpack(header)[0], socket.MSG_WAITALL)
    done = msgspec.msgpack.decode(body, type=Reply)
    assert isinstance(done, Done), done
    return msgspec.msgpack.decode(done.result, type=kind)
