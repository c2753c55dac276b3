"""The durable queue (issue 10): lease+complete cycles, `queue add --batch`, reads at scale.

    python bench/queue_bench.py [--quick] [--cycles N] [--rounds K] [--procs 1,4,8]
                          [--entries N] [--file-size F] [--repeat R] [--dir DIR]
                          [--wait-quiet S] [--skip-cycles] [--skip-cli] [--writer]

1. Cycles: P OS processes (P in 1, 4, 8) each loop `sched.lease(store, 1)` then
   `sched.complete(store, id, leaseId)` in-process through the library with
   UWF_DURABILITY=fsync, on a store pre-filled (untimed) with ready entries and a
   policy with maxConcurrent 64. N cycles in all per round, split over the P
   processes, which start together (a barrier); the rate is N / (last end -
   first start). In the same rounds, in rotating order, with the same P and N:
   - raw: P processes each `os.write` + `os.fsync` a line of uwf's size to one
     O_APPEND file in the same directory, 2 N appends (a cycle is two commands);
   - huey: SqliteHuey storage (fsync=True: synchronous=FULL, WAL), pre-filled
     with N items; each cycle `storage.dequeue()` (one exclusive transaction that
     deletes the task) then `storage.put_data(key, result)` (the ack: what a huey
     consumer writes for a task's result);
   - persist-queue: SQLiteAckQueue (WAL, synchronous=FULL set on its
     connections), pre-filled with N items; each cycle `get()` then `ack(item)`.
     Its get is a SELECT then an UPDATE under a threading lock only, so items
     handed to two processes are counted and printed.
   - writer (with --writer): the same P uwf processes, the same library calls, each
     sent to a resident writer (`uwf writer`, started before the round and stopped
     after it, untimed) that decides them and fsyncs once a round of calls; its CPU
     in the timed loop (from /proc, between the barrier and the last client's end)
     counts in the cycle's, with every client's;
   - floor (with --writer): the same P processes and calls against a server that
     decides nothing, one write + fdatasync a round (bench/writer_floor.py): what
     a writer of this shape pays before its own work, the limit its figures meet;
   Figures are medians over the rounds; uwf/peer ratios are in cycles/s, uwf/raw
   in commands/s (2 per cycle). uwf's writers' lock is instrumented (a wrapper
   around `FileSegments.lock` and the module's `time.sleep`): the share of wall
   time the lock was held, and the time processes waited to take it.
2. `uwf --store S queue add --batch FILE` (fsync) of --entries entries in files of
   --file-size, one CLI process per file, into a fresh store with the example
   workflow registered; entries/s = entries / the sum of the processes' walls.
3. On that store (--entries ready entries) and on one with 100: `uwf sched plan`,
   `uwf sched lease --limit 1` and `uwf queue list --limit 20`, with
   `python -c pass`, R runs each interleaved in rotating order; medians. Both
   stores have maxConcurrent 100, so `plan` shows at most 100 grants on each.
Targets (issue 10): uwf not slower than either peer at every P; uwf >= 0.5 x raw
(commands/s); batch add >= 100,000 entries/s; the read ratios <= 2.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from queue import Empty as NothingYet
from typing import Any

from common import (
    BIN,
    EXAMPLE,
    REPO,
    add_common_args,
    begin,
    bytecode_env,
    check,
    env_with,
    fmt_ms,
    fmt_rate,
    fresh_dir,
    load,
    median,
    pressure,
    print_header,
    run_measured,
    section,
    uwf_exe,
    verdict,
)
from writer_floor import run_floor

RAW_TARGET = 0.5
# Issue 30's: cycles/s >= 0.85 x huey at P = 1 and >= 2 x at P = 2, 4, 8; CPU per cycle of
# every process, in the timed loop, <= 200 us.
HUEY_TARGET = (0.85, 2.0)
CPU_TARGET_US = 200
ADD_TARGET = 100_000
READ_TARGET = 2.0
POLICY_MAX = 64
SMALL = 100
CTX: Any = multiprocessing.get_context("fork")


# -- part 1: cycles ------------------------------------------------------------------

def _uwf(args: list[str], env: dict[str, str]) -> Any:
    result = run_measured([uwf_exe(), *args, "--json"], env=env)
    check(result, " ".join(args[:4]))
    return json.loads(result.out)


def batch_lines(start: int, count: int) -> bytes:
    return b"".join(
        json.dumps({"workflow": "solve-issue", "prompt": f"Fix issue #{n}: the login bug",
                    "repo": str(REPO), "priority": 100 + n % 7}).encode() + b"\n"
        for n in range(start, start + count))


def new_store(root: Path, env: dict[str, str], max_concurrent: int) -> None:
    shutil.rmtree(root, ignore_errors=True)
    _uwf(["--store", str(root), "workflow", "put", str(EXAMPLE)], env)
    _uwf(["--store", str(root), "sched", "policy", "set", "--max-concurrent",
          str(max_concurrent)], env)


def fill_store(root: Path, work: Path, count: int, env: dict[str, str], chunk: int = 50_000
               ) -> list[float]:
    """Add `count` ready entries through `uwf queue add --batch`; each file's wall."""
    walls = []
    for start in range(0, count, chunk):
        path = work / f"batch-{start}.jsonl"
        path.write_bytes(batch_lines(start, min(chunk, count - start)))
        result = run_measured([uwf_exe(), "--store", str(root), "queue", "add", "--batch",
                               str(path)], env=env)
        check(result, "queue add --batch")
        walls.append(result.wall)
        path.unlink()
    return walls


class LockProbe:
    """Time the writers' lock is held, and time spent waiting to take it."""

    def __init__(self) -> None:
        self.held = 0.0
        self.waited = 0.0
        self.waits = 0

    def install(self) -> None:
        from uwf.engine import segments

        probe = self
        real_take = segments.FileSegments.take
        real_let_go = segments.FileSegments.let_go
        taken: list[float] = []

        def take(self: Any, timeout: float) -> Any:
            asked = time.perf_counter()
            waited = real_take(self, timeout)
            start = time.perf_counter()
            if start - asked > 0.0005:  # more than an uncontended flock costs
                probe.waits += 1
            probe.waited += start - asked
            taken.append(start)
            return waited

        def let_go(self: Any, waited: Any) -> None:
            try:
                real_let_go(self, waited)
            finally:
                probe.held += time.perf_counter() - taken.pop()

        segments.FileSegments.take = take  # type: ignore[method-assign]
        segments.FileSegments.let_go = let_go  # type: ignore[method-assign]


def _uwf_worker(root: str, count: int, barrier: Any, out: Any) -> None:
    os.environ["UWF_DURABILITY"] = "fsync"
    from uwf.queue import sched
    from uwf.store import Store

    probe = LockProbe()
    probe.install()
    store = Store.open(root)  # a folder, or a postgresql:// URL (bench/pg_queue_bench.py)
    store.read()
    barrier.wait()
    cpu0 = time.process_time()
    start = time.perf_counter()
    ids = []
    for _ in range(count):
        lease = sched.lease(store, 1).leases[0]
        sched.complete(store, lease.id, lease.lease_id)
        ids.append(lease.id)
    end = time.perf_counter()
    store.close()
    out.put((start, end, ids, probe.held, probe.waited, probe.waits,
             time.process_time() - cpu0))


def _raw_worker(path: str, count: int, line: bytes, barrier: Any, out: Any) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    barrier.wait()
    cpu0 = time.process_time()
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, line)
        os.fsync(fd)
    end = time.perf_counter()
    os.close(fd)
    out.put((start, end, [], 0.0, 0.0, 0, time.process_time() - cpu0))


def _huey_storage(path: str, fsync: bool) -> Any:
    from huey import SqliteHuey

    # A busy timeout of 60 s, not huey's 5: on a loaded machine its processes wait for
    # one another's transactions longer than 5 s, and huey then fails "database is locked"
    # (uwf's writers wait up to UWF_LOCK_TIMEOUT, 10 s, the same way).
    return SqliteHuey("bench", filename=path, fsync=fsync, timeout=60).storage


def _huey_worker(path: str, count: int, barrier: Any, out: Any) -> None:
    storage = _huey_storage(path, True)
    storage.queue_size()  # connect before timing
    barrier.wait()
    cpu0 = time.process_time()
    start = time.perf_counter()
    ids: list[Any] = []
    while len(ids) < count:
        data = storage.dequeue()
        if data is None:
            break
        storage.put_data(data, b"done")
        ids.append(data)
    end = time.perf_counter()
    out.put((start, end, ids, 0.0, 0.0, 0, time.process_time() - cpu0))


def _pq_open(path: str, synchronous: str) -> Any:
    from persistqueue import SQLiteAckQueue

    # A busy timeout past its default 10 s: on a loaded machine a getter waited longer
    # for another process's write and failed the run with `database is locked`.
    queue: Any = SQLiteAckQueue(path, multithreading=True, auto_resume=False, timeout=120)
    for conn in (queue._getter, queue._putter):
        conn.execute(f"PRAGMA synchronous={synchronous}")
    return queue


def _pq_worker(path: str, count: int, barrier: Any, out: Any) -> None:
    from persistqueue.exceptions import Empty

    queue = _pq_open(path, "FULL")
    barrier.wait()
    cpu0 = time.process_time()
    start = time.perf_counter()
    ids = []
    for _ in range(count):
        try:
            item = queue.get(block=False)
        except Empty:
            break
        queue.ack(item)
        ids.append(item)
    end = time.perf_counter()
    out.put((start, end, ids, 0.0, 0.0, 0, time.process_time() - cpu0))


def _proc_cpu(pid: int) -> float:
    """A process's user + system CPU seconds so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_writer_procs(root: Path, procs: int, total: int, env: dict[str, str]
                     ) -> dict[str, Any]:
    """The uwf clients of one round through a resident writer started for it; its CPU
    over the round added to the loops' (the writer serves nothing outside the loop)."""
    import signal
    import subprocess

    writer = subprocess.Popen([uwf_exe(), "--store", str(root), "--json", "writer"],
                              env={**env, "UWF_DURABILITY": "fsync"},
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    if "listening" not in writer.stdout.readline():
        writer.kill()
        sys.exit("bench: the writer did not start")
    cpu = _proc_cpu(writer.pid)
    got = run_procs(_uwf_worker, procs, total, str(root))
    writer_cpu = _proc_cpu(writer.pid) - cpu
    writer.send_signal(signal.SIGTERM)
    served = json.loads(writer.stdout.read().strip().splitlines()[-1])
    writer.wait()
    if served["calls"] != 2 * got["done"]:
        sys.exit(f"bench: the writer served {served['calls']} calls, not the "
                 f"{2 * got['done']} of the round")
    got["loop_cpu"] += writer_cpu
    got["cpu"] += writer_cpu
    got["writer_cpu"] = writer_cpu
    got["calls_per_round"] = served["calls"] / max(served["rounds"], 1)
    got["calls_per_fsync"] = served["calls"] / max(served["fsyncs"], 1)
    return got


def run_procs(target: Callable[..., None], procs: int, total: int, *args: Any
              ) -> dict[str, Any]:
    import resource

    def children_cpu() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    cpu = children_cpu()
    barrier = CTX.Barrier(procs)
    out = CTX.Queue()
    share = [total // procs + (1 if i < total % procs else 0) for i in range(procs)]
    children = [CTX.Process(target=target, args=(*args[:1], share[i], *args[1:], barrier, out))
                for i in range(procs)]
    for child in children:
        child.start()
    results: list[Any] = []
    while len(results) < len(children):  # a process that died puts nothing: not waited for
        try:
            results.append(out.get(timeout=1.0))
        except NothingYet:
            failed = [child for child in children if child.exitcode not in (None, 0)]
            if failed:
                for child in children:
                    child.terminate()
                sys.exit(f"bench: a {target.__name__} process failed (exit "
                         f"{failed[0].exitcode}): see its traceback above")
    for child in children:
        child.join()
        if child.exitcode != 0:
            sys.exit(f"bench: a {target.__name__} process failed (exit {child.exitcode})")
    cpu = children_cpu() - cpu  # every process's, its set-up (opening the store) included
    wall = max(r[1] for r in results) - min(r[0] for r in results)
    ids = [i for r in results for i in r[2]]
    return {"wall": wall, "done": sum(len(r[2]) for r in results) or total,
            "dupes": len(ids) - len(set(ids)), "held": sum(r[3] for r in results),
            "waited": sum(r[4] for r in results), "waits": sum(r[5] for r in results),
            "cpu": cpu, "loop_cpu": sum(r[6] for r in results if len(r) > 6)}


def cycles(work: Path, procs_list: list[int], total: int, rounds: int,
           env: dict[str, str], *, with_writer: bool = False) -> bool:
    section(f"1. durable lease+complete cycles: {total:,} per round, {rounds} rounds, "
            f"rotating uwf{' / writer' if with_writer else ''} / raw / huey / persist-queue")
    stores = {}
    filled = total * rounds * (2 if with_writer else 1) + 100
    for procs in procs_list:
        root = work / f"cycles-{procs}"
        new_store(root, env, POLICY_MAX)
        fill_store(root, work, filled, {**env, "UWF_DURABILITY": "none"})
        stores[procs] = root
    last = sorted((stores[procs_list[0]] / "events").glob("*.jsonl"))[-1]
    line_len = len(last.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1])  # a queue.added
    line = b"x" * line_len + b"\n"
    print(f"uwf store: maxConcurrent {POLICY_MAX}, {filled:,} ready entries "
          f"per process count; raw lines {line_len + 1} bytes")
    os.sync()
    begin(0)

    def peer_files(kind: str, procs: int, index: int) -> str:
        path = work / f"{kind}-{procs}-{index}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        if kind == "huey":
            storage = _huey_storage(str(path), False)
            for n in range(total):
                storage.enqueue(f"item-{n}".encode())
            storage.close()
        else:
            shutil.rmtree(path, ignore_errors=True)
            queue = _pq_open(str(path), "OFF")
            for n in range(total):
                queue.put(f"item-{n}")
            del queue
        return str(path)

    figures: dict[tuple[int, str], list[float]] = {}
    extra: dict[tuple[int, str], list[dict[str, Any]]] = {}
    sides = ["uwf", *(["writer", "floor"] if with_writer else []), "raw", "huey",
             "persist-queue"]
    for index in range(rounds):
        for procs in procs_list:
            shift = (index + procs) % len(sides)
            for side in sides[shift:] + sides[:shift]:
                if side == "uwf":
                    got = run_procs(_uwf_worker, procs, total, str(stores[procs]))
                    rate = got["done"] / got["wall"]
                elif side == "writer":
                    got = run_writer_procs(stores[procs], procs, total, env)
                    rate = got["done"] / got["wall"]
                elif side == "floor":
                    got = run_floor(work, procs, total, line_len, run_procs)
                    rate = got["done"] / got["wall"]
                elif side == "raw":
                    raw_path = work / f"raw-{procs}.jsonl"
                    raw_path.unlink(missing_ok=True)
                    got = run_procs(_raw_worker, procs, 2 * total, str(raw_path), line)
                    rate = 2 * total / got["wall"]  # commands/s
                else:
                    path = peer_files("huey" if side == "huey" else "pq", procs, index)
                    worker = _huey_worker if side == "huey" else _pq_worker
                    got = run_procs(worker, procs, total, path)
                    rate = got["done"] / got["wall"]
                figures.setdefault((procs, side), []).append(rate)
                extra.setdefault((procs, side), []).append(got)
        print(f"  round {index + 1}/{rounds} done ({load()})")

    section(f"result: medians over {rounds} rounds (end: {load()}; {pressure()})")
    print(f"{'P':>2}  {'uwf cycles/s':>13} {'huey':>9} {'p-queue':>9} {'raw cmd/s':>10}  "
          f"{'uwf/huey':>8} {'uwf/pq':>7} {'uwf/raw':>8}  lock held  waited for the lock")
    met = True
    for procs in procs_list:
        uwf = median(figures[(procs, "uwf")])
        huey = median(figures[(procs, "huey")])
        pq = median(figures[(procs, "persist-queue")])
        raw = median(figures[(procs, "raw")])
        runs = extra[(procs, "uwf")]
        held = median([r["held"] / r["wall"] for r in runs])
        waited = median([r["waited"] / (r["wall"] * procs) for r in runs])
        waits = median([r["waits"] / r["done"] for r in runs])
        print(f"{procs:>2}  {uwf:>13,.0f} {huey:>9,.0f} {pq:>9,.0f} {raw:>10,.0f}  "
              f"{uwf / huey:>8.2f} {uwf / pq:>7.2f} {2 * uwf / raw:>8.2f}  "
              f"{held:>8.0%}  {waited:.0%} of process time, {waits:.1f} waits/cycle")
        cpu = {side: median([r["cpu"] / r["done"] for r in extra[(procs, side)]]) * 1e6
               for side in ("uwf", "huey", "persist-queue")}
        # In the timed loops (set-up aside): raw's two write+fsyncs are a cycle's floor
        # for any design that makes each command durable on its own.
        loop = {side: median([r["loop_cpu"] / r["done"] for r in extra[(procs, side)]]) * 1e6
                for side in ("uwf", "huey", "persist-queue")}
        loop["raw"] = 2e6 * median([r["loop_cpu"] / r["done"] for r in extra[(procs, "raw")]])
        print(f"    CPU per cycle, all processes, timed loop: uwf {loop['uwf']:,.0f} us "
              f"(target <= {CPU_TARGET_US}: {verdict(loop['uwf'] <= CPU_TARGET_US)}), huey "
              f"{loop['huey']:,.0f} us, persist-queue {loop['persist-queue']:,.0f} us, raw "
              f"2 x (write+fsync) {loop['raw']:,.0f} us")
        print(f"    CPU per cycle with set-up (store open, imports): uwf {cpu['uwf']:,.0f} us, "
              f"huey {cpu['huey']:,.0f} us, persist-queue {cpu['persist-queue']:,.0f} us")
        want = HUEY_TARGET[0] if procs == 1 else HUEY_TARGET[1]
        print(f"    issue 30: uwf >= {want} x huey at P={procs}: {verdict(uwf >= want * huey)}")
        if with_writer:
            wruns = extra[(procs, "writer")]
            writer = median(figures[(procs, "writer")])
            wloop = median([r["loop_cpu"] / r["done"] for r in wruns]) * 1e6
            wown = median([r["writer_cpu"] / r["done"] for r in wruns]) * 1e6
            per_round = median([r["calls_per_round"] for r in wruns])
            per_fsync = median([r["calls_per_fsync"] for r in wruns])
            print(f"    writer: {writer:,.0f} cycles/s, {writer / huey:.2f} x huey "
                  f"({writer / uwf:.2f} x uwf in-process); CPU per cycle, every process, "
                  f"the writer's included: {wloop:,.0f} us (the writer's own {wown:,.0f}; "
                  f"target <= {CPU_TARGET_US}: {verdict(wloop <= CPU_TARGET_US)}); "
                  f"{per_round:.2f} calls a round, {per_fsync:.2f} an fsync")
            fruns = extra[(procs, "floor")]
            floor = median(figures[(procs, "floor")])
            print(f"    the floor (bench/writer_floor.py: the same calls, nothing decided, "
                  f"one write + fdatasync a round): {floor:,.0f} cycles/s, "
                  f"{floor / huey:.2f} x huey; CPU per cycle, every process, "
                  f"{median([r['loop_cpu'] / r['done'] for r in fruns]) * 1e6:,.0f} us "
                  f"(the server's {median([r['writer_cpu'] / r['done'] for r in fruns]) * 1e6:,.0f}"
                  f"); {median([r['calls_per_round'] for r in fruns]):.2f} calls a round; "
                  f"the writer {writer / floor:.2f} x the floor's rate")
            print(f"    issue 30 through the writer: >= {want} x huey at P={procs}: "
                  f"{verdict(writer >= want * huey)}")
        dupes = [r["dupes"] for r in extra[(procs, "persist-queue")]]
        udupes = [r["dupes"] for r in runs]
        if any(dupes) or any(udupes):
            print(f"    items handed out twice: persist-queue {dupes}, uwf {udupes}")
        ok = uwf >= huey and uwf >= pq and 2 * uwf / raw >= RAW_TARGET
        met = met and ok
        print(f"    P={procs}: not slower than huey: {verdict(uwf >= huey)}; than "
              f"persist-queue: {verdict(uwf >= pq)}; >= {RAW_TARGET} x raw: "
              f"{verdict(2 * uwf / raw >= RAW_TARGET)}")
    print("(lock held: share of wall time some uwf process held the writers' lock; "
          "waited: share of the processes' time spent taking it; waits: takes that "
          "found it held)")
    return met


# -- parts 2 and 3: the CLI ------------------------------------------------------------

def batch_add(work: Path, entries: int, file_size: int, repeat: int,
              env: dict[str, str]) -> Path:
    section(f"2. uwf queue add --batch: {entries:,} entries in files of {file_size:,} "
            f"(fsync), {repeat} fresh store(s)")
    rates = []
    root = work / "big"
    for index in range(repeat):
        root = work / f"big-{index}"
        new_store(root, env, SMALL)
        walls = fill_store(root, work, entries, env, file_size)
        rate = entries / sum(walls)
        rates.append(rate)
        print(f"  store {index + 1}: {fmt_rate(rate)} entries; per file "
              + ", ".join(fmt_ms(w) for w in walls))
        if index < repeat - 1:
            shutil.rmtree(root)
    rate = median(rates)
    print(f"median: {fmt_rate(rate)} entries end to end; target >= {ADD_TARGET:,}/s: "
          f"{verdict(rate >= ADD_TARGET)}")
    return root


def reads(work: Path, big: Path, entries: int, repeat: int, env: dict[str, str]) -> bool:
    small = work / "small"
    new_store(small, env, SMALL)
    fill_store(small, work, SMALL, env)
    section(f"3. reads with {entries:,} ready entries vs {SMALL} (median of {repeat} runs, "
            "rotating)")
    commands = {
        "sched plan": ["sched", "plan"],
        "sched lease --limit 1": ["sched", "lease", "--limit", "1"],
        "queue list --limit 20": ["queue", "list", "--limit", "20"],
    }
    cases: dict[str, list[str]] = {"python -c pass": [sys.executable, "-c", "pass"]}
    for name, args in commands.items():
        for label, root in (("small", small), ("big", big)):
            cases[f"{name} [{label}]"] = [uwf_exe(), "--store", str(root), *args]
    for argv in cases.values():  # warm: bytecode cache, page cache
        check(run_measured(argv, env=env), argv[-1])
    begin(0)
    walls: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases)
    for index in range(repeat):
        shift = index % len(order)
        for name in order[shift:] + order[:shift]:
            result = run_measured(cases[name], env=env)
            check(result, name)
            walls[name].append(result.wall)
    print(f"{'':28} {'100':>9} {f'{entries:,}':>9}  ratio  target <= {READ_TARGET}")
    met = True
    for name in commands:
        low = median(walls[f"{name} [small]"])
        high = median(walls[f"{name} [big]"])
        ok = high / low <= READ_TARGET
        met = met and ok
        print(f"{name:28} {fmt_ms(low):>9} {fmt_ms(high):>9}  {high / low:5.2f}  {verdict(ok)}")
    print(f"{'python -c pass':28} {fmt_ms(median(walls['python -c pass'])):>9}")
    return met


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true",
                        help="400 cycles x 3 rounds; 20,000 entries in files of 5,000")
    parser.add_argument("--cycles", type=int, default=2000, help="cycles per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--procs", default="1,4,8")
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--file-size", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=21, help="runs of each read")
    parser.add_argument("--add-repeat", type=int, default=2, help="fresh stores for part 2")
    parser.add_argument("--skip-cycles", action="store_true")
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--writer", action="store_true",
                        help="also the same clients through a resident writer (`uwf writer`)")
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.cycles, args.rounds = 400, 3
        args.entries, args.file_size, args.repeat = 20_000, 5_000, 11
    procs = [int(p) for p in args.procs.split(",")]

    work = fresh_dir(args.dir, "queue")
    print_header("queue: durable cycles, batch add, reads at scale", work)
    env = bytecode_env(env_with(UWF_DURABILITY="fsync"), work / "pycache")
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    begin(args.wait_quiet)
    started = time.monotonic()
    verdicts = {}
    if not args.skip_cycles:
        verdicts["cycles"] = cycles(work, procs, args.cycles, args.rounds, env,
                                    with_writer=args.writer)
    if not args.skip_cli:
        big = batch_add(work, args.entries, args.file_size, args.add_repeat, env)
        verdicts["reads"] = reads(work, big, args.entries, args.repeat, env)
    print(f"\ndone in {time.monotonic() - started:.0f} s")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
