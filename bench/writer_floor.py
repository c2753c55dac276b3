"""The floor of a resident writer at P clients (bench/queue_bench.py --writer): the same
traffic with nothing decided.

A process serves P client processes over a Unix socket as `uwf writer` does (epoll, each
call a 4-byte length and a body; every call that has arrived is one round): it appends
one line of uwf's size a call to a file with one write(2) a round, fdatasyncs it in its
loop (no thread: the least CPU a round can take), then answers each call with a small
frame. Each client makes its share of N cycles, a cycle two calls, each waiting for its
answer, as a uwf client's lease then complete. What it costs (CPU a cycle, every process)
and how fast it goes is what any writer of this shape pays before it decides, folds or
frames anything: the limit the writer's own figures are read against, in the same run.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HEADER = struct.Struct(">I")
CALL = b"x" * 60  # about a lease's call: its op's name and arguments in msgpack
REPLY = HEADER.pack(200) + b"r" * 200  # about a lease's result

SERVER = r"""
import os, select, socket, struct, sys
HEADER = struct.Struct(">I")
line = b"x" * (int(sys.argv[3]) - 1) + b"\n"
reply = HEADER.pack(200) + b"r" * 200
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(256)
listener.setblocking(False)
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
poll = select.epoll()
poll.register(listener.fileno(), select.EPOLLIN)
peers = {}
calls = rounds = 0
print("ready", flush=True)
while True:
    ready = poll.poll()
    answer = []
    for no, _ in ready:
        if no == listener.fileno():
            conn, _ = listener.accept()
            conn.setblocking(True)
            peers[conn.fileno()] = [conn, b""]
            poll.register(conn.fileno(), select.EPOLLIN)
            continue
        peer = peers[no]
        data = peer[0].recv(1 << 16)
        if not data:
            poll.unregister(no)
            peer[0].close()
            del peers[no]
            if not peers:
                print(calls, rounds, sum(os.times()[:2]), flush=True)
                sys.exit(0)
            continue
        pending = peer[1] + data
        while len(pending) >= 4 and len(pending) >= 4 + HEADER.unpack_from(pending)[0]:
            size = HEADER.unpack_from(pending)[0]
            pending = pending[4 + size:]
            answer.append(peer[0])
        peer[1] = pending
    if answer:
        os.write(fd, line * len(answer))
        os.fdatasync(fd)
        for conn in answer:
            conn.sendall(reply)
        calls += len(answer)
        rounds += 1
"""


def _client(path: str, count: int, barrier: Any, out: Any) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    call = HEADER.pack(len(CALL)) + CALL
    barrier.wait()
    cpu0 = time.process_time()
    start = time.perf_counter()
    for _ in range(2 * count):  # a cycle: two calls, each waiting for its answer
        sock.sendall(call)
        got = sock.recv(1 << 16)
        while len(got) < len(REPLY):
            got += sock.recv(1 << 16)
    end = time.perf_counter()
    sock.close()
    out.put((start, end, [None] * count, 0.0, 0.0, 0, time.process_time() - cpu0))


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_floor(work: Path, procs: int, total: int, line_len: int,
              run_procs: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The floor's round at `procs` clients (`run_procs` of queue_bench.py): its figures
    as `run_writer_procs` gives a writer's."""
    path = work / f"floor-{procs}.sock"
    log = work / f"floor-{procs}.jsonl"
    path.unlink(missing_ok=True)
    log.unlink(missing_ok=True)
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(path), str(log),
                               str(line_len + 1)], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    if server.stdout.readline().strip() != "ready":
        server.kill()
        sys.exit("bench: the floor's server did not start")
    cpu = _proc_cpu(server.pid)
    got = run_procs(_client, procs, total, str(path))
    calls, rounds, used = server.stdout.readline().split()
    server.wait()
    server_cpu = float(used) - cpu  # its CPU from the clients' start to its exit
    got["loop_cpu"] += server_cpu
    got["cpu"] += server_cpu
    got["writer_cpu"] = server_cpu
    got["calls_per_round"] = int(calls) / max(int(rounds), 1)
    got["calls_per_fsync"] = got["calls_per_round"]
    return got
