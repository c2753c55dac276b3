"""Durable single-command appends per second, beside raw write+fsync of the same lines.

    python bench/append.py [--quick] [--n N] [--block B] [--budget S] [--dir DIR]
                           [--wait-quiet S] [--profile] [--writer]

uwf: `store.journal.write(decide)` in-process with UWF_DURABILITY=fsync, one
`workflow.registered` per command, `decide` reading the workflows view as
`uwf workflow put` does. Every step of the write protocol runs: lock, recover,
catch-up, decide, one write + fsync, view commit, unlock.
Baseline: `os.write` + `os.fsync` of lines of the same length on an O_APPEND
descriptor kept open, in a file in the same directory.
Short blocks (100 appends) alternate uwf, raw, uwf with UWF_DURABILITY=none
(uwf's own cost without the disk) and raw + one SQLite WAL upsert per append
(the floor for a log + SQLite-views design), rotating the order, so all see the same disk
and CPU weather on a shared machine; figures are medians of the per-block rates
and the ratio is the median of per-block uwf/raw ratios.
Target (issue 30): uwf >= 0.75 x raw.

With --writer, two more rows in the same blocks: `sched.renew` of a live lease (one
`queue.renewed` a command, decided on the entry) in-process, and the same call sent to a
resident writer (`uwf writer`, started before the blocks) that appends it and fsyncs
before it answers; that row's CPU is this process's plus the writer's (from /proc). One
client, each call waiting for its answer: the writer has one call a round to fsync.
Beside them, the floor of any such writer: a bare Unix-socket call to a process that
appends the line, fdatasyncs it and answers (both processes' CPU).

Every row prints its CPU per operation too (`time.process_time`, this process), and
the rows that find where a fsync'd command's time goes beyond its own cost plus raw's
(issue 30, "the fsync gap"): raw with `fdatasync`; raw with one SQLite WAL commit
(synchronous=OFF, as uwf's views) *before* the fsync, uwf's order, beside the floor's
commit after it; and uwf without fsync, each command just after a raw write+fsync of
another file (only the command's CPU counted): the same code, run by a process that
has just slept on the disk. And raw with its pages sent at once (`sync_file_range`), then
fsynced, as uwf's after 64 appends (uwf/engine/writeback.py).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import (
    EXAMPLE,
    REPO,
    add_common_args,
    begin,
    fmt_rate,
    fresh_dir,
    interleave,
    load,
    median,
    print_header,
    profile,
    ratios,
    section,
    spread,
    verdict,
)

from uwf.cas.builtins import builtin_hash
from uwf.config.yamlfile import load_yaml
from uwf.engine.events import NewEvent
from uwf.engine.filelog import OPENSSL_AFTER
from uwf.engine.journal import Outcome, Views
from uwf.language.compile import compile_workflow
from uwf.store import Store
from uwf.workflows.events import WorkflowRegistered

TARGET = 0.75
NAMES = 1000


def _store(root: Path, durability: str) -> Store:
    os.environ["UWF_DURABILITY"] = durability
    store = Store.open(root)
    if store.durability != durability:
        sys.exit(f"bench: store opened with durability {store.durability}, wanted {durability}")
    return store


def _workflow_hashes(store: Store) -> list[str]:
    """Two real Workflow nodes to point at, so the events are ones uwf would write."""
    store.cas.ensure_builtins()
    payload, schemas = compile_workflow(store.cas, load_yaml(EXAMPLE))
    for schema in schemas:
        store.cas.put_schema(schema)
    return [
        store.cas.put(builtin_hash("Workflow"), dict(payload, description=f"version {v}"))
        for v in range(2)
    ]


def make_writer(store: Store) -> Callable[[int], None]:
    """One call = one uwf command appending one event (as `workflow put` decides it)."""
    hashes = _workflow_hashes(store)
    journal = store.journal

    def write(counter: int) -> None:
        name = f"wf-{counter % NAMES:04d}"
        target = hashes[(counter // NAMES) % 2]

        def decide(views: Views) -> Outcome[bool]:
            current = views.get("workflows", name)
            if current is not None and current.hash == target:
                return Outcome((), False)
            previous = None if current is None else current.hash
            return Outcome([NewEvent(f"workflow/{name}",
                                     WorkflowRegistered(name, target, previous))], True)

        if not journal.write(decide):
            sys.exit("bench: a write appended nothing")

    return write


def last_line_length(root: Path) -> int:
    segments = sorted((root / "events").glob("*.jsonl"))
    data = segments[-1].read_bytes()
    return len(data.rstrip(b"\n").rsplit(b"\n", 1)[-1])


CPU: dict[str, list[float]] = {}  # each row's CPU µs per operation, one figure a block


def _cpu(name: str, since: float, n: int) -> None:
    CPU.setdefault(name, []).append((time.process_time() - since) / n * 1e6)


def uwf_round(write: Callable[[int], None], start: int, n: int, name: str = "") -> float:
    begin = time.perf_counter()
    cpu = time.process_time()
    for counter in range(start, start + n):
        write(counter)
    _cpu(name, cpu, n)
    return n / (time.perf_counter() - begin)


def raw_round(fd: int, line: bytes, n: int, sync: Callable[[int], None] = os.fsync,
              name: str = "") -> float:
    begin = time.perf_counter()
    cpu = time.process_time()
    for _ in range(n):
        os.write(fd, line)
        sync(fd)
    _cpu(name, cpu, n)
    return n / (time.perf_counter() - begin)


def woken_round(write: Callable[[int], None], fd: int, line: bytes, start: int, n: int
                ) -> float:
    """uwf without fsync, each command just after a raw write+fsync of another file: the
    rate of the pair, and (into CPU) the command's own CPU alone."""
    begin = time.perf_counter()
    spent = 0.0
    for counter in range(start, start + n):
        os.write(fd, line)
        os.fsync(fd)
        cpu = time.process_time()
        write(counter)
        spent += time.process_time() - cpu
    CPU.setdefault("woken", []).append(spent / n * 1e6)
    return n / (time.perf_counter() - begin)


def sqlite_floor(path: Path, *, before: bool = False, name: str = "floor"
                 ) -> Callable[[int, bytes, int], float]:
    """Raw append+fsync plus one SQLite WAL upsert per append: the design's floor.

    The views live in SQLite (WAL, synchronous=NORMAL), so a command cannot cost
    less than a log append, its fsync and one small transaction. `before`: the
    commit between the write and the fsync, with synchronous=OFF, as uwf's write
    protocol and views do.
    """
    import sqlite3

    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={'OFF' if before else 'NORMAL'}")
    db.execute("CREATE TABLE IF NOT EXISTS state (view TEXT NOT NULL, key TEXT NOT NULL, "
               "value BLOB NOT NULL, PRIMARY KEY (view, key)) WITHOUT ROWID")
    value = b"v" * 160

    def block(fd: int, line: bytes, n: int) -> float:
        begin = time.perf_counter()
        cpu = time.process_time()
        for counter in range(n):
            os.write(fd, line)
            if not before:
                os.fsync(fd)
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT OR REPLACE INTO state VALUES (?, ?, ?)",
                       ("workflows", f"wf-{counter % NAMES:04d}", value))
            db.execute("COMMIT")
            if before:
                os.fsync(fd)
        _cpu(name, cpu, n)
        return n / (time.perf_counter() - begin)

    return block


def _proc_cpu(pid: int) -> float:
    """A process's user + system CPU seconds so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The floor of any resident writer for one client waiting for each answer: a process
# that reads a line from a Unix socket, appends it to a file, fdatasyncs it and
# answers; the client sends the next line once answered (one wake-up each way a call).
ECHO = r"""
import os, socket, sys
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(1)
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
print("ready", flush=True)
conn, _ = listener.accept()
while True:
    data = conn.recv(65536)
    if not data:
        break
    os.write(fd, data)
    os.fdatasync(fd)
    conn.sendall(b"ok")
"""


class WriterRows:
    """`sched.renew` in-process and through a resident writer, on one store."""

    def __init__(self, root: Path) -> None:
        import json
        import subprocess

        from common import uwf_exe

        from uwf.queue import sched

        env = {**os.environ, "UWF_DURABILITY": "fsync"}

        def uwf(*args: str) -> Any:
            done = subprocess.run([uwf_exe(), "--store", str(root), *args, "--json"], env=env,
                                  capture_output=True, text=True, check=True)
            return json.loads(done.stdout)

        uwf("workflow", "put", str(EXAMPLE))
        uwf("sched", "policy", "set", "--max-concurrent", "4", "--lease-ttl-ms", "86400000")
        for n in range(2):
            uwf("queue", "add", "--workflow", "solve-issue", "-p", f"renewed {n}")
        held = [(lease["id"], lease["leaseId"])
                for lease in uwf("sched", "lease", "--limit", "2")["leases"]]
        self.sched = sched
        self.local = _store(root, "fsync")
        self.local.writer = None
        self.remote = _store(root, "fsync")
        self.held = held
        self.process = subprocess.Popen([uwf_exe(), "--store", str(root), "--json", "writer"],
                                        env=env, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.pid = json.loads(self.process.stdout.readline())["pid"]
        sock = root.parent / "echo.sock"
        self.echo = subprocess.Popen([sys.executable, "-c", ECHO, str(sock),
                                      str(root.parent / "echo.jsonl")],
                                     stdout=subprocess.PIPE, text=True)
        assert self.echo.stdout is not None
        assert self.echo.stdout.readline() == "ready\n"
        import socket

        self.echo_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.echo_sock.connect(str(sock))
        self.line = b"x" * 400 + b"\n"
        self.local_block(20)
        self.writer_block(20)
        self.echo_block(20)
        CPU.pop("renew", None)
        CPU.pop("writer", None)
        CPU.pop("echo", None)

    def local_block(self, n: int) -> float:
        entry, lease = self.held[0]
        begin = time.perf_counter()
        cpu = time.process_time()
        for _ in range(n):
            self.sched.renew(self.local, entry, lease)
        _cpu("renew", cpu, n)
        return n / (time.perf_counter() - begin)

    def writer_block(self, n: int) -> float:
        entry, lease = self.held[1]
        begin = time.perf_counter()
        cpu = time.process_time()
        theirs = _proc_cpu(self.pid)
        for _ in range(n):
            self.sched.renew(self.remote, entry, lease)
        spent = time.process_time() - cpu + _proc_cpu(self.pid) - theirs
        CPU.setdefault("writer", []).append(spent / n * 1e6)
        return n / (time.perf_counter() - begin)

    def echo_block(self, n: int) -> float:
        """The floor: a bare Unix-socket call to a process that appends the line and
        fdatasyncs it before it answers (both processes' CPU)."""
        begin = time.perf_counter()
        cpu = time.process_time()
        theirs = _proc_cpu(self.echo.pid)
        sock = self.echo_sock
        for _ in range(n):
            sock.sendall(self.line)
            sock.recv(16)
        spent = time.process_time() - cpu + _proc_cpu(self.echo.pid) - theirs
        CPU.setdefault("echo", []).append(spent / n * 1e6)
        return n / (time.perf_counter() - begin)

    def stop(self) -> dict[str, int]:
        import json
        import signal

        self.echo_sock.close()
        self.echo.wait()

        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate()
        self.local.close()
        self.remote.close()
        return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--n", type=int, default=10_000,
                        help="appends per side (default 10,000)")
    parser.add_argument("--block", type=int, default=100,
                        help="appends per alternating block (default 100)")
    parser.add_argument("--quick", action="store_true", help="2,000 appends per side")
    parser.add_argument("--budget", type=float, default=120.0, metavar="S",
                        help="stop adding blocks after S seconds (default 120; 0: no limit)")
    add_common_args(parser)
    parser.add_argument("--writer", action="store_true",
                        help="also sched.renew in-process and through a resident writer")
    parser.add_argument("--profile", action="store_true",
                        help="also profile 1,000 durable uwf appends with cProfile")
    args = parser.parse_args(argv)
    if args.quick:
        args.n = 2000
    blocks = max(1, args.n // args.block)

    work = fresh_dir(args.dir, "append")
    print_header("append: durable single-command appends", work)
    print(f"{blocks} blocks x {args.block} appends per side, rotating: uwf / raw / "
          "uwf without fsync / raw + SQLite upsert")

    durable = _store(work / "store", "fsync")
    write = make_writer(durable)
    loose = _store(work / "store-nofsync", "none")
    write_loose = make_writer(loose)
    warm = 200
    uwf_round(write, 0, warm)  # the first write also appends store.created
    uwf_round(write_loose, 0, warm)
    length = last_line_length(work / "store")
    line = b"x" * length + b"\n"
    print(f"uwf line: {length + 1} bytes with its newline; raw lines are the same size")

    fd = os.open(work / "raw.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    raw_round(fd, line, warm)
    floor_fd = os.open(work / "raw-sqlite.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    floor = sqlite_floor(work / "raw-sqlite.sqlite3")
    floor(floor_fd, line, warm)
    before_fd = os.open(work / "raw-before.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    before = sqlite_floor(work / "raw-before.sqlite3", before=True, name="before")
    before(before_fd, line, warm)
    data_fd = os.open(work / "raw-data.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    wake_fd = os.open(work / "raw-wake.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    sent_fd = os.open(work / "raw-sent.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    # Pages sent at once, then the fsync, as uwf's after 64 appends: this tree's, whichever
    # uwf is measured (an older one, --base or first on PYTHONPATH, may have none).
    early = runpy.run_path(str(REPO / "uwf/engine/writeback.py"))["Writeback"]()

    def sent(fd: int) -> None:
        early.start(fd)
        os.fsync(fd)
    writer = WriterRows(work / "store-renew") if args.writer else None
    woken = _store(work / "store-woken", "none")
    write_woken = make_writer(woken)
    uwf_round(write_woken, 0, warm)
    CPU.clear()
    counters = {"uwf": warm, "loose": warm, "woken": warm}
    os.sync()  # untimed: the set-up's dirty pages are written back before timing
    begin(args.wait_quiet)

    def uwf_block() -> float:
        counters["uwf"] += args.block
        return uwf_round(write, counters["uwf"] - args.block, args.block, "uwf")

    def loose_block() -> float:
        counters["loose"] += args.block
        return uwf_round(write_loose, counters["loose"] - args.block, args.block, "loose")

    def woken_block() -> float:
        counters["woken"] += args.block
        return woken_round(write_woken, wake_fd, line, counters["woken"] - args.block,
                           args.block)

    extra: dict[str, Callable[[], float]] = {} if writer is None else {
        "renew": lambda: writer.local_block(args.block),
        "writer": lambda: writer.writer_block(args.block),
        "echo": lambda: writer.echo_block(args.block)}
    rates = interleave({**extra, "uwf": uwf_block,
                        "raw": lambda: raw_round(fd, line, args.block, name="raw"),
                        "loose": loose_block,
                        "floor": lambda: floor(floor_fd, line, args.block),
                        "data": lambda: raw_round(data_fd, line, args.block, os.fdatasync,
                                                  "data"),
                        "before": lambda: before(before_fd, line, args.block),
                        "sent": lambda: raw_round(sent_fd, line, args.block, sent, "sent"),
                        "woken": woken_block},
                       blocks, args.budget)
    for each in (fd, floor_fd, data_fd, before_fd, wake_fd, sent_fd):
        os.close(each)

    uwf_rate = median(rates["uwf"])
    raw_rate = median(rates["raw"])
    loose_rate = median(rates["loose"])
    per_block = ratios(rates["uwf"], rates["raw"])
    ratio = median(per_block)
    done = len(per_block)
    section(f"result (medians over {done} blocks of {args.block}; end: {load()})")
    print(f"uwf journal.write, fsync      {fmt_rate(uwf_rate):>12}  "
          f"({1e6 / uwf_rate:.0f} us/command)")
    print(f"raw os.write+os.fsync         {fmt_rate(raw_rate):>12}  "
          f"({1e6 / raw_rate:.0f} us/append)")
    print(f"uwf journal.write, no fsync   {fmt_rate(loose_rate):>12}  "
          f"({1e6 / loose_rate:.0f} us/command: uwf's own cost, without the disk)")
    floor_rate = median(rates["floor"])
    print(f"raw + 1 SQLite WAL upsert     {fmt_rate(floor_rate):>12}  "
          f"({1e6 / floor_rate:.0f} us/append: the floor for log + SQLite views; "
          f"{spread(ratios(rates['floor'], rates['raw']))} x raw)")
    print(f"raw os.write+os.fdatasync     {fmt_rate(median(rates['data'])):>12}  "
          f"({1e6 / median(rates['data']):.0f} us/append; "
          f"{spread(ratios(rates['data'], rates['raw']))} x raw)")
    print(f"raw + 1 SQLite commit, fsync after it (uwf's order) {fmt_rate(median(rates['before']))}"
          f"  ({1e6 / median(rates['before']):.0f} us/append; "
          f"{spread(ratios(rates['before'], rates['raw']))} x raw)")
    print(f"uwf no fsync, each after a raw fsync (pair) {fmt_rate(median(rates['woken']))}")
    print(f"raw write, pages sent, fsync  {fmt_rate(median(rates['sent'])):>12}  "
          f"({1e6 / median(rates['sent']):.0f} us/append; "
          f"{spread(ratios(rates['sent'], rates['raw']))} x raw)")
    print(f"ratio uwf/raw, per block      {spread(per_block)}")
    print(f"ratio of the median rates     {uwf_rate / raw_rate:.2f}")
    print(f"target uwf >= {TARGET} x raw: {verdict(ratio >= TARGET)}")
    if writer is not None:
        served = writer.stop()
        for key, label in (("renew", "uwf sched.renew in-process, fsync"),
                           ("writer", "uwf sched.renew through the writer"),
                           ("echo", "floor: socket call + write + fdatasync")):
            rate = median(rates[key])
            against = ratios(rates[key], rates["raw"])
            print(f"{label:36s} {fmt_rate(rate):>12}  ({1e6 / rate:.0f} us/command; "
                  f"{spread(against)} x raw; target {TARGET}: "
                  f"{verdict(median(against) >= TARGET)})")
        print(f"  the writer served {served['calls']:,} calls in {served['rounds']:,} rounds, "
              f"{served['fsyncs']:,} fsyncs")
    section("CPU per operation, this process (medians of the blocks)")
    labels = {"uwf": "uwf journal.write, fsync", "loose": "uwf journal.write, no fsync",
              "woken": "uwf no fsync, just after a raw fsync (its own CPU)",
              "raw": "raw write+fsync", "data": "raw write+fdatasync",
              "sent": "raw write, pages sent (sync_file_range), fsync",
              "floor": "raw + SQLite commit after the fsync",
              "before": "raw + SQLite commit before the fsync"}
    if writer is not None:
        labels["renew"] = "uwf sched.renew in-process, fsync"
        labels["writer"] = "uwf sched.renew through the writer (+ the writer's)"
        labels["echo"] = "floor: socket call + write + fdatasync (both)"
    for key, label in labels.items():
        print(f"{label:52s} {median(CPU[key]):7.0f} us")
    gap = median(CPU["uwf"]) - median(CPU["loose"]) - median(CPU["sent"])
    cold = median(CPU["woken"]) - median(CPU["loose"])
    print(f"the fsync gap in CPU (uwf fsync - no fsync - raw with its pages sent, as uwf's "
          f"after {OPENSSL_AFTER} appends): {gap:.0f} us; the same code just after a sleep on "
          f"the disk costs {cold:.0f} us more")
    own = 1e6 / loose_rate
    disk = 1e6 / raw_rate
    print(f"  (the ratio is about disk / (disk + uwf's cost): with raw appends at {disk:.0f} us, "
          f"{TARGET} needs uwf's own cost <= {disk * (1 / TARGET - 1):.0f} us; it is {own:.0f} us)")

    if args.profile:
        section("profile: 1,000 durable uwf appends")
        profile(lambda: uwf_round(write, counters["uwf"], 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
