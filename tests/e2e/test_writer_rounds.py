"""The resident writer's batch mode (uwf/engine/rounds.py, uwf/writer/memqueue.py): a
round of calls from several processes decided in memory as one unit, one write of its
lines and one fdatasync; the views' commit deferred across rounds, and what a reader in
another process sees meanwhile; the memory kept in step with a process that writes
without the writer."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

from tests.conftest import EXAMPLE, Cli
from tests.e2e.test_fsyncs import SYNC, strace_binary
from tests.e2e.test_writer import (
    events,
    ok,
    prepared,
    start_writer,
    stop_writer,
    whole_and_replayable,
)

if TYPE_CHECKING:
    from uwf.writer.server import Writer

pytestmark = pytest.mark.cli_processes

# A client process: connect to the writer, send one call (op, JSON args), say "sent",
# then print its reply as one JSON line (done: the result; refused: the refusal).
SENDER = r"""
import json, socket, sys
import msgspec
from uwf.engine.writerlink import Call, Done, Reply, frame, read_exact, HEADER
root, op, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(root + "/writer.sock")
sock.sendall(frame(Call(op, args)))
print("sent", flush=True)
header = read_exact(sock, HEADER.size)
reply = msgspec.msgpack.decode(read_exact(sock, HEADER.unpack(header)[0]), type=Reply)
if isinstance(reply, Done):
    print(json.dumps({"done": msgspec.msgpack.decode(reply.result)}))
else:
    print(json.dumps({"refused": msgspec.to_builtins(reply)}))
"""

WRITE = re.compile(r"\b(write|pwrite64|writev)\((\d+)<([^>]*)>")
# SYNC, also when strace cuts the call short (`<unfinished ...>`: another thread's call
# came in between; the syncer's fdatasync runs beside the loop).
SYNCED = re.compile(SYNC.pattern.removesuffix(r"\)"))


def test_a_round_from_several_processes_is_one_write_and_one_fdatasync(
        cli: Cli, tmp_path: Path) -> None:
    """Four processes' calls wait on the socket while the writer is stopped (SIGSTOP),
    so it takes them as one round when it goes on: two leases, a completion and a
    renewal with a wrong lease. Every call gets its own right result, the refusal is
    the in-process one word for word and spoils none of the others; the log's segment
    is written once and fdatasynced once for the four (strace)."""
    prepared(cli, entries=6, ceiling=6)
    held = ok(cli, "sched", "lease", "--limit", "1")["leases"][0]  # completed in the round
    other = ok(cli, "sched", "lease", "--limit", "1")["leases"][0]  # renewed with a wrong lease
    wrong = "0" * 26
    alone = cli.run("sched", "renew", other["id"], "--lease", wrong)
    assert alone.code == 1, alone
    strace = strace_binary()
    trace = tmp_path / "writer.strace"
    writer = start_writer(cli, strace, "-f", "-y", "-qq", "-e",
                          "trace=write,pwrite64,writev,fsync,fdatasync", "-o", str(trace))
    script = tmp_path / "sender.py"
    script.write_text(SENDER, "utf-8")
    calls = [("queue.lease", {"limit": 1, "session": None}),
             ("queue.lease", {"limit": 1, "session": None}),
             ("queue.complete", {"id": held["id"], "lease": held["leaseId"]}),
             ("queue.renew", {"id": other["id"], "lease": wrong})]
    os.kill(writer.pid_of_writer, signal.SIGSTOP)
    try:
        senders = [subprocess.Popen([sys.executable, str(script), str(cli.home), op,
                                     json.dumps(args)], env=cli.env,
                                    stdout=subprocess.PIPE, text=True)
                   for op, args in calls]
        for sender in senders:  # each call is in the socket before the writer goes on
            assert sender.stdout is not None
            assert sender.stdout.readline() == "sent\n"
    finally:
        os.kill(writer.pid_of_writer, signal.SIGCONT)
    replies = []
    for sender in senders:
        out, _ = sender.communicate(timeout=120)
        assert sender.returncode == 0
        replies.append(json.loads(out))
    served = stop_writer(writer)
    assert served == {**served, "calls": 4, "rounds": 1, "fsyncs": 1}
    first, second = (reply["done"]["leases"][0] for reply in replies[:2])
    assert len({first["id"], second["id"], held["id"], other["id"]}) == 4
    assert replies[2]["done"]["status"] == "drained"
    refused = replies[3]["refused"]
    assert f"uwf: error: {refused['what']}; {refused['next_action']}" == alone.err.strip()
    segment = next((cli.home / "events").iterdir())
    text = trace.read_text("utf-8")
    writes = [m.group(3) for m in WRITE.finditer(text) if m.group(3) == str(segment)]
    synced = [m.group(3) for m in SYNCED.finditer(text)]
    assert writes == [str(segment)]
    assert synced == [str(segment)]
    # By the descriptor the round wrote with: an fdatasync, no folder listed, no open.
    assert [m.group(1) for m in SYNCED.finditer(text)] == ["fdatasync"]
    leased = {event["subject"].removeprefix("queue/") for event in events(cli, "queue.leased")}
    assert {first["id"], second["id"]} <= leased
    whole_and_replayable(cli)


def lease_served(writer: Writer, cli: Cli, tmp_path: Path) -> tuple[subprocess.Popen[str],
                                                                    IO[str]]:
    """A process that has sent `writer` one lease (SENDER), the writer's loop turned
    until it served it; the process and its output, where the reply comes."""
    script = tmp_path / "sender.py"
    script.write_text(SENDER, "utf-8")
    sender = subprocess.Popen([sys.executable, str(script), str(cli.home), "queue.lease",
                               json.dumps({"limit": 1, "session": None})],
                              env=cli.env, stdout=subprocess.PIPE, text=True)
    assert sender.stdout is not None
    assert sender.stdout.readline() == "sent\n"
    while writer.served.calls == 0:
        writer._once(1.0)
    return sender, sender.stdout


def test_a_lone_round_made_durable_in_the_loops_thread(cli: Cli, tmp_path: Path) -> None:
    """A writer with `inline`: a round of one call while nothing else is on its way to
    the disk is fdatasynced and answered by the loop itself, not handed to the syncer's
    thread; the reply comes only after it, and the lease is in the log."""
    from uwf.store import Store
    from uwf.writer.server import Writer

    prepared(cli, entries=2, ceiling=2)
    writer = Writer(Store.open(cli.home), inline=True)
    writer.start()
    try:
        sender, output = lease_served(writer, cli, tmp_path)
        reply = json.loads(output.readline())
        assert sender.wait(timeout=60) == 0
        syncer = writer._syncer
        assert (syncer.inline, syncer.fsyncs) == (1, 1)
    finally:
        writer.close()
    leased = reply["done"]["leases"][0]["id"]
    assert leased in {event["subject"].removeprefix("queue/")
                      for event in events(cli, "queue.leased")}
    whole_and_replayable(cli)


@pytest.mark.parametrize(("together", "clients"), [(True, 2), (False, 2), (True, 1)])
def test_rounds_of_several_clients_are_made_durable_in_the_loops_thread(
        cli: Cli, tmp_path: Path, together: bool, clients: int) -> None:
    """While two clients or more are connected (`together`, an option), a round is
    fdatasynced and answered by the loop itself, as the floor of bench/writer_floor.py
    is (the calls that come meanwhile make the next round), never handed to the
    syncer's thread; without `together`, or with one client, it is handed over."""
    import socket

    from uwf.engine.writerlink import address
    from uwf.store import Store
    from uwf.writer.server import Writer

    prepared(cli, entries=2, ceiling=2)
    writer = Writer(Store.open(cli.home), together=together)
    writer.start()
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a second client, silent
    try:
        if clients == 2:
            path, dir_fd = address(cli.home)
            idle.connect(path)
            if dir_fd is not None:
                os.close(dir_fd)
            while len(writer._peers) < 2:  # the listener's, then the idle client's
                writer._once(1.0)
        sender, output = lease_served(writer, cli, tmp_path)
        reply = json.loads(output.readline())
        assert sender.wait(timeout=60) == 0
        syncer = writer._syncer
        syncer.stop()  # a round handed over is answered and counted by now
        here = together and clients == 2
        assert (syncer.inline, syncer.fsyncs) == ((1, 1) if here else (0, 1))
    finally:
        idle.close()
        writer.close()
    assert reply["done"]["leases"][0]["id"] in {
        event["subject"].removeprefix("queue/") for event in events(cli, "queue.leased")}
    whole_and_replayable(cli)


@pytest.mark.parametrize("calls", [2, 3])
def test_a_round_of_more_than_two_calls_is_handed_to_the_syncer(cli: Cli, calls: int
                                                               ) -> None:
    """With several clients connected, a round of two calls is made durable in the
    loop; one of three (`server.TOGETHER_CALLS`) goes to the syncer, so that the loop
    decides the next calls while the disk works (`together`). Each call gets its lease
    either way."""
    import socket

    import msgspec

    from uwf.engine.writerlink import HEADER, Call, Done, Reply, address, frame, read_exact
    from uwf.store import Store
    from uwf.writer.server import Writer

    prepared(cli, entries=4, ceiling=4)
    writer = Writer(Store.open(cli.home), together=True)
    writer.start()
    socks = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(calls)]
    try:
        path, dir_fd = address(cli.home)
        for sock in socks:
            sock.connect(path)
        if dir_fd is not None:
            os.close(dir_fd)
        while len(writer._peers) < calls + 1:  # every client accepted (and the listener)
            writer._once(1.0)
        for sock in socks:  # all sent before the loop looks: one round
            sock.sendall(frame(Call("queue.lease", {"limit": 1, "session": None})))
        while writer.served.calls < calls:
            writer._once(1.0)
        leased = set()
        for sock in socks:
            header = read_exact(sock, HEADER.size)
            assert header is not None
            body = read_exact(sock, HEADER.unpack(header)[0])
            assert body is not None
            reply = msgspec.msgpack.decode(body, type=Reply)
            assert isinstance(reply, Done)
            leased.add(msgspec.msgpack.decode(reply.result)["leases"][0]["id"])
        syncer = writer._syncer
        syncer.stop()
        assert writer.served.rounds == 1
        assert (syncer.inline, syncer.fsyncs) == ((1, 1) if calls == 2 else (0, 1))
    finally:
        for sock in socks:
            sock.close()
        writer.close()
    assert len(leased) == calls
    whole_and_replayable(cli)


def test_no_views_commit_while_a_round_waits_for_its_fsync(cli: Cli, tmp_path: Path
                                                          ) -> None:
    """The deferred rows are committed when the loop is idle: no call has come and no
    round is on its way to the disk. While one is (the syncer's thread has a round it
    has not answered), the loop waiting for no call is waiting for its own disk, and
    commits nothing; once the round is answered, the next idle turn commits."""
    from uwf.store import Store
    from uwf.writer.server import Writer

    prepared(cli, entries=2, ceiling=2)
    writer = Writer(Store.open(cli.home))
    writer.start()
    try:
        sender, output = lease_served(writer, cli, tmp_path)
        assert "done" in json.loads(output.readline())  # the syncer answered
        assert sender.wait(timeout=60) == 0
        assert writer.memory.unsaved is not None  # deferred
        syncer = writer._syncer
        syncer._handed += 1  # as if a round were on its way to the disk
        writer._once(0)
        assert writer.memory.unsaved is not None  # not idle: nothing committed
        syncer._answered += 1  # that round answered
        writer._once(0)
        assert writer.memory.unsaved is None  # idle: committed
    finally:
        writer.close()
    whole_and_replayable(cli)


def _writer_parts(cli: Cli) -> tuple[Any, Any, Any]:
    from uwf.store import Store
    from uwf.writer.deferred import DeferredLog
    from uwf.writer.memqueue import QueueMemory

    store = Store.open(cli.home)
    store.writer = None
    store.journal.log = DeferredLog(store.journal.log)
    return store, store.journal, QueueMemory(store.journal)


def test_deferred_views_and_a_reader_in_another_process(cli: Cli) -> None:
    """A round whose views' commit is deferred: the log has its lines, the views'
    checkpoint is still before them. A reader in another process (`uwf queue show`)
    sees the lease all the same (a read catches the views up from the log); the
    writer's later commit of those rows then finds the views moved and lets its rows
    go, and the next round decides on the views as the reader left them."""
    from uwf.engine.rounds import flush
    from uwf.queue import sched

    prepared(cli, entries=3, ceiling=3)
    os.environ["UWF_DURABILITY"] = "fsync"
    store, journal, memory = _writer_parts(cli)
    try:
        (leased,) = journal.write_round([sched.lease_decision(1, None)], memory, defer=True)
        lease = leased.leases[0]
        head = store.log.head()
        assert set(journal.views.checkpoints().values()) != {head}  # deferred
        assert memory.unsaved is not None
        assert memory.unsaved.rounds == 1
        shown = ok(cli, "queue", "show", lease.id)  # another process
        assert shown["status"] == "leased"
        assert shown["lease"]["id"] == lease.lease_id
        assert set(journal.views.checkpoints().values()) == {head}  # the reader folded
        assert flush(journal, memory) is False  # the views had moved: rows let go
        (done,) = journal.write_round([sched.complete_decision(
            lease.id, lease.lease_id, None)], memory, defer=True)
        assert done.status == "drained"
        assert flush(journal, memory) is True
        assert set(journal.views.checkpoints().values()) == {store.log.head()}
    finally:
        store.close()
        del os.environ["UWF_DURABILITY"]
    assert ok(cli, "queue", "show", lease.id)["status"] == "drained"
    whole_and_replayable(cli)


def test_the_memory_follows_a_process_that_writes_without_the_writer(cli: Cli) -> None:
    """Between two rounds another process completes a lease and leases an entry under
    the writers' lock, never asking the writer: the next round's tail check sees the
    log moved, reads again only the entries those lines changed (no whole reload), and
    decides on them: the ceiling counts the other process's lease, not the completed
    one."""
    from uwf.queue import sched

    prepared(cli, entries=4, ceiling=2)
    os.environ["UWF_DURABILITY"] = "fsync"
    store, journal, memory = _writer_parts(cli)
    try:
        (mine,) = journal.write_round([sched.lease_decision(1, None)], memory)
        assert memory.reloads == 1
        theirs = ok(cli, "sched", "lease", "--limit", "1")["leases"][0]  # 2 of 2 now
        ok(cli, "sched", "complete", mine.leases[0].id, "--lease", mine.leases[0].lease_id)
        (again,) = journal.write_round([sched.lease_decision(2, None)], memory)
        assert again.granted == 1  # one place free: theirs still counts
        assert memory.reloads == 1  # the moved entries read again, not the whole queue
        assert memory.entries[mine.leases[0].id].status == "drained"
        assert memory.entries[theirs["id"]].status == "leased"
        (full,) = journal.write_round([sched.lease_decision(1, None)], memory)
        assert type(full).__name__ == "NothingToDo"  # the ceiling, decided in memory
    finally:
        store.close()
        del os.environ["UWF_DURABILITY"]
    whole_and_replayable(cli)


def test_the_memory_answers_as_the_views_do(cli: Cli) -> None:
    """Random rounds of leases (per session and of every pool), completions, releases
    (some failed, into backoff) and renewals, some with wrong leases: after each, every
    read a lease makes answers the same from the writer's memory as from the views in
    SQLite (the active leases, per pool and overall; the ready counts; each pool's ready
    entries in queue order), and every entry is the same value."""
    import random

    from uwf.engine.rounds import flush
    from uwf.engine.viewspec import Query
    from uwf.queue import sched
    from uwf.queue.projection import QUEUE_ORDER

    ok(cli, "workflow", "put", str(EXAMPLE))
    ok(cli, "sched", "policy", "set", "--max-concurrent", "5", "--backoff-base-ms", "1",
       "--lease-ttl-ms", "3")  # some leases expire between rounds, some do not
    batch = cli.home.parent / "mixed.jsonl"
    batch.write_text("".join(json.dumps({
        "workflow": "solve-issue", "prompt": f"task {n}", "priority": n % 3,
        **({"session": ["a", "b"][n % 2]} if n % 5 else {})}) + "\n"
        for n in range(40)), "utf-8")
    ok(cli, "queue", "add", "--batch", str(batch))
    rng = random.Random(30)
    os.environ["UWF_DURABILITY"] = "none"
    store, journal, memory = _writer_parts(cli)
    held: list[tuple[str, str]] = []
    try:
        for _ in range(40):
            decides: list[Any] = []
            for _ in range(rng.randint(1, 4)):
                pick = rng.random()
                if pick < 0.4 or not held:
                    decides.append(sched.lease_decision(rng.choice([1, 2, None]),
                                                        rng.choice([None, "a", "b"])))
                    continue
                entry, lease = rng.choice(held)
                lease = lease if rng.random() < 0.8 else "0" * 26
                decides.append(
                    sched.complete_decision(entry, lease, None) if pick < 0.6 else
                    sched.release_decision(entry, lease, rng.random() < 0.5, "x", None)
                    if pick < 0.8 else sched.renew_decision(entry, lease))
            for result in journal.write_round(decides, memory, defer=True):
                for granted in getattr(result, "leases", ()):
                    held.append((granted.id, granted.lease_id))
            flush(journal, memory)
            now = journal.clock()
            mine, theirs = memory.views(memory.head), store.read()
            for pool in (None, "a", "b"):
                where = (("status", "=", "leased"), ("session", "=", pool),
                         ("lease_expires", ">", now))
                assert mine.count(Query("queue", where)) == theirs.count(Query("queue", where))
                ready = Query("queue", (("ready_pool", "=", pool or ""),), None, QUEUE_ORDER,
                              rng.randint(1, 50), rng.randint(0, 3))
                assert mine.query(ready) == theirs.query(ready)
            overall = Query("queue", (("status", "=", "leased"), ("lease_expires", ">", now)))
            assert mine.count(overall) == theirs.count(overall)
            assert mine.counts("queue", "ready_pool") == {
                pool: count for pool, count in theirs.counts("queue", "ready_pool").items()
                if pool is not None and count}  # the pools, as `sched.ready_pools` reads
            assert memory.entries == dict(theirs.scan("queue"))
    finally:
        store.close()
        del os.environ["UWF_DURABILITY"]
    whole_and_replayable(cli)
