"""A store on PostgreSQL (issue 20): queue cycles beside procrastinate and pgqueuer, appends,
rebuild.

    python bench/pg_queue_bench.py [--quick] [--cycles N] [--rounds K] [--procs 1,4,8]
                                   [--appends N] [--rebuild-events N] [--dir DIR]
                                   [--wait-quiet S] [--skip-cycles] [--skip-rebuild]

One throw-away PostgreSQL cluster (`tests.pgkit.Server`, the Debian server binaries,
a Unix socket only) with its durable defaults (fsync on, full_page_writes on,
synchronous_commit on), its data under the bench data dir (a real disk). Every
PostgreSQL side below has a database of its own on that one server.

1. Cycles: P OS processes (P in 1, 4, 8) start together (a barrier) and share N cycles
   a round; the rate is N / (last end - first start); R rounds, rotating order;
   medians. What a cycle is, per side:
   - uwf-pg: `sched.lease(store, 1)` then `sched.complete(store, id, leaseId)` on
     `Store.open(url)` (UWF_DURABILITY=fsync: each command is one transaction whose
     commit waits for the WAL flush), a database pre-filled (untimed, `uwf queue add
     --batch`) with ready entries, policy maxConcurrent 64 (`queue_bench`'s worker);
   - uwf-folder: the same worker on the embedded store (a folder,
     UWF_DURABILITY=fsync);
   - procrastinate: `JobManager.fetch_job(None, worker_id)` (the worker's own fetch:
     one job set to `doing`) then `JobManager.finish_job_by_id_async(id, succeeded,
     delete_job=False)` (what its worker does after a task with the default
     delete_jobs=never); each process registers as a worker first (untimed); N jobs
     deferred before each run (untimed, `batch_defer_async`);
   - pgqueuer: `Queries.dequeue(batch_size=1, ...)` (one job set to `picked`, FOR
     UPDATE SKIP LOCKED) then `Queries.log_jobs([(job, "successful", None)])` (the
     job deleted from the queue table and logged), on a psycopg autocommit
     connection, tables at the default durability (`durable`: logged); N jobs
     enqueued before each run (untimed).
   - floor: the shape of a uwf command with nothing decided, folded or indexed (FLOOR_SQL
     below), two CALLs a cycle: what bounds uwf-pg here.
   Items handed out twice are counted and printed.
2. Appends: one process, `sched.set_policy(store.journal, {"maxConcurrent": 64 or 65})`
   alternately (one small `sched.policy-set` event a command, fsync), on PostgreSQL
   and on a folder store; and the primitive beside them, on the same server: the same
   process inserting one 300-byte line a statement (one round trip, one synchronous
   commit, autocommit), the fastest a durable append on PostgreSQL can be here.
3. Copy and rebuild: a store of --rebuild-events events (`common.generate_log`:
   workflow registrations) in a folder, copied to PostgreSQL with `uwf store copy`'s
   service (timed, with its phases: the log copied, the views rebuilt, the copy
   verified); then `store.journal.rebuild()` in this process, timed, on each.
Every figure is printed beside the CPU time it took: the workers' (from the barrier to
their end) and the server's processes' (the postmaster and its children, ended or not),
in µs a cycle or an append.
Targets (issue 31): lease+complete cycles >= 1.5 x pgqueuer at P = 4, 8 and 16, and
>= 1 x at P = 1; durable appends on PostgreSQL >= 0.8 x the folder's; (issue 20)
rebuild on PostgreSQL >= 100,000 events/s.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import (
    EXAMPLE,
    REPO,
    add_common_args,
    begin,
    env_with,
    fmt_rate,
    fresh_dir,
    generate_log,
    load,
    median,
    pressure,
    print_header,
    section,
    takes,
    verdict,
)
from queue_bench import (
    POLICY_MAX,
    _uwf,
    _uwf_worker,
    batch_lines,
    fill_store,
    new_store,
    run_procs,
)

sys.path.append(str(REPO))  # after PYTHONPATH: a snapshot there is what runs
from tests.pgkit import Server, pg_bin  # the tests' throw-away server, fsync on here

REBUILD_TARGET = 100_000
COPY_TARGET = 20_000  # issue 31: store copy folder -> PostgreSQL, verify included
SIDES = ["uwf-pg", "uwf-folder", "procrastinate", "pgqueuer", "floor"]
# The floor (issue 31): the shape of a uwf command on PostgreSQL with nothing decided,
# folded or indexed: a CALL that takes the log's advisory lock, inserts one line, commits
# with synchronous_commit off (the lock goes there), then commits a small synchronous
# transaction. Two a cycle (a lease and a complete). What no uwf cycle of this shape can
# beat on this machine: its rate over pgqueuer's bounds uwf-pg's.
FLOOR_SQL = """
CREATE TABLE IF NOT EXISTS floor_lines (seq bigserial PRIMARY KEY, line bytea NOT NULL);
CREATE OR REPLACE PROCEDURE floor_call(p_line bytea) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  PERFORM pg_advisory_xact_lock(4242);
  INSERT INTO floor_lines (line) VALUES (p_line);
  COMMIT;
  PERFORM pg_logical_emit_message(true, 'uwf', '');
  COMMIT;
END $$"""
FLOOR_LINE = b'{"seq":1,"type":"queue.leased","data":{}}'.ljust(300, b" ")
# The primitive under a durable append (issue 31): one line inserted by one statement in
# one round trip, its commit synchronous: what no durable append on this server beats.
PRIMITIVE_SQL = """
CREATE TABLE IF NOT EXISTS primitive_lines (seq bigserial PRIMARY KEY, line bytea NOT NULL)"""
PRIMITIVE_LINE = b'{"seq":1,"type":"sched.policy-set","data":{}}'.ljust(300, b" ")


# -- CPU time: the workers' (from the barrier to their end) and the server's ------------

def _timed(target: Any, cpu: Any) -> Any:
    """`target` (a run_procs worker) that also puts its CPU seconds from the barrier to its
    end on `cpu` (forked: a closure is fine)."""
    def worker(*args: Any) -> None:
        barrier, out = args[-2], args[-1]

        class Barrier:
            def wait(self) -> None:
                barrier.wait()
                self.cpu = time.process_time()

        class Out:
            def put(self, result: Any) -> None:
                cpu.put(time.process_time() - started.cpu)
                out.put(result)

        started = Barrier()
        target(*args[:-2], started, Out())

    worker.__name__ = getattr(target, "__name__", "worker")
    return worker


def server_cpu(server: Server) -> float:
    """CPU seconds the server's processes have used: the postmaster, its children that
    ended (cutime, cstime) and those still running."""
    tick = os.sysconf("SC_CLK_TCK")
    pid = int((server.folder / "data" / "postmaster.pid").read_text().split()[0])

    def fields(of: int) -> list[int]:
        text = Path(f"/proc/{of}/stat").read_text()
        return [int(x) for x in text.rsplit(")", 1)[1].split()[11:15]]

    utime, stime, cutime, cstime = fields(pid)
    total = utime + stime + cutime + cstime
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                child_u, child_s, _, _ = fields(int(child))
            except (FileNotFoundError, ProcessLookupError):
                continue  # ended between the two reads: in cutime next time
            total += child_u + child_s
    return total / tick


def run_timed(server: Server, target: Any, procs: int, total: int, *args: Any
              ) -> dict[str, Any]:
    """run_procs, with the workers' CPU and the server's for the run (µs a cycle)."""
    from queue_bench import CTX

    cpu = CTX.Queue()
    before = server_cpu(server)
    got = run_procs(_timed(target, cpu), procs, total, *args)
    time.sleep(0.2)  # the backends of the workers' connections end and are reaped
    got["server_us"] = (server_cpu(server) - before) / got["done"] * 1e6
    got["client_us"] = sum(cpu.get() for _ in range(procs)) / got["done"] * 1e6
    return got


# -- workers (forked; each opens its own connections) -----------------------------------

def _procrastinate_app(url: str) -> Any:
    import procrastinate

    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))


async def _procrastinate_run(url: str, count: int, barrier: Any) -> tuple[float, float, list[Any]]:
    from procrastinate.jobs import Status

    app = _procrastinate_app(url)
    async with app.open_async():
        manager = app.job_manager
        worker_id = await manager.register_worker()
        barrier.wait()
        start = time.perf_counter()
        ids: list[Any] = []
        while len(ids) < count:
            job = await manager.fetch_job(None, worker_id)
            if job is None or job.id is None:
                break
            await manager.finish_job_by_id_async(job.id, Status.SUCCEEDED, delete_job=False)
            ids.append(job.id)
        end = time.perf_counter()
        await manager.unregister_worker(worker_id)
    return start, end, ids


def _procrastinate_worker(url: str, count: int, barrier: Any, out: Any) -> None:
    start, end, ids = asyncio.run(_procrastinate_run(url, count, barrier))
    out.put((start, end, ids, 0.0, 0.0, 0))


async def _pgqueuer_queries(url: str) -> tuple[Any, Any]:
    import psycopg
    from pgqueuer.queries import Queries

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    return conn, Queries.from_psycopg_connection(conn)


async def _pgqueuer_run(url: str, count: int, barrier: Any) -> tuple[float, float, list[Any]]:
    import uuid
    from datetime import timedelta

    from pgqueuer.ports.repository import EntrypointExecutionParameter

    conn, queries = await _pgqueuer_queries(url)
    entrypoints = {"bench": EntrypointExecutionParameter(concurrency_limit=0)}
    manager_id = uuid.uuid4()
    barrier.wait()
    start = time.perf_counter()
    ids: list[Any] = []
    while len(ids) < count:
        jobs = await queries.dequeue(batch_size=1, entrypoints=entrypoints,
                                     queue_manager_id=manager_id,
                                     global_concurrency_limit=None,
                                     heartbeat_timeout=timedelta(seconds=30))
        if not jobs:
            break
        await queries.log_jobs([(jobs[0], "successful", None)])
        ids.append(jobs[0].id)
    end = time.perf_counter()
    await conn.close()
    return start, end, ids


def _pgqueuer_worker(url: str, count: int, barrier: Any, out: Any) -> None:
    start, end, ids = asyncio.run(_pgqueuer_run(url, count, barrier))
    out.put((start, end, ids, 0.0, 0.0, 0))


def _floor_worker(url: str, count: int, barrier: Any, out: Any) -> None:
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    barrier.wait()
    start = time.perf_counter()
    for _ in range(count):
        conn.execute("CALL floor_call(%b)", (FLOOR_LINE,))  # the lease's
        conn.execute("CALL floor_call(%b)", (FLOOR_LINE,))  # the complete's
    end = time.perf_counter()
    conn.close()
    out.put((start, end, [(os.getpid(), n) for n in range(count)], 0.0, 0.0, 0))


# -- set-up (untimed) -------------------------------------------------------------------

async def _procrastinate_fill(url: str, count: int, install: bool) -> None:
    app = _procrastinate_app(url)
    async with app.open_async():
        if install:
            await app.schema_manager.apply_schema_async()
        deferrer = app.configure_task("bench", queue="default")
        for start in range(0, count, 10_000):
            await deferrer.batch_defer_async(*[{"n": n} for n in
                                               range(start, min(count, start + 10_000))])


async def _pgqueuer_fill(url: str, count: int, install: bool) -> None:
    conn, queries = await _pgqueuer_queries(url)
    if install:
        await queries.install()
    for start in range(0, count, 10_000):
        size = min(count, start + 10_000) - start
        await queries.enqueue(["bench"] * size, [None] * size, [0] * size)
    await conn.close()


def fill_pg_store(url: str, work: Path, count: int, env: dict[str, str]) -> None:
    """A uwf store in the database `url`: the example workflow, maxConcurrent 64, `count`
    ready entries added with `uwf queue add --batch` (durability none: a bulk load)."""
    _uwf(["--store", url, "workflow", "put", str(EXAMPLE)], env)
    _uwf(["--store", url, "sched", "policy", "set", "--max-concurrent", str(POLICY_MAX)], env)
    for start in range(0, count, 50_000):
        path = work / f"pg-batch-{start}.jsonl"
        path.write_bytes(batch_lines(start, min(50_000, count - start)))
        _uwf(["--store", url, "queue", "add", "--batch", str(path)],
             {**env, "UWF_DURABILITY": "none"})
        path.unlink()


# -- 1. cycles --------------------------------------------------------------------------

def cycles(server: Server, work: Path, procs_list: list[int], total: int, *, rounds: int,
           env: dict[str, str]) -> None:
    section(f"1. durable cycles: {total:,} per round, {rounds} rounds, rotating "
            + " / ".join(SIDES))
    entries = total * rounds + 100
    pg_stores: dict[int, str] = {}
    folders: dict[int, Path] = {}
    for procs in procs_list:
        pg_stores[procs] = server.create_database()
        fill_pg_store(pg_stores[procs], work, entries, env)
        folders[procs] = work / f"folder-{procs}"
        new_store(folders[procs], env, POLICY_MAX)
        fill_store(folders[procs], work, entries, {**env, "UWF_DURABILITY": "none"})
    peers = {"procrastinate": server.create_database(), "pgqueuer": server.create_database(),
             "floor": server.create_database()}
    import psycopg

    with psycopg.connect(peers["floor"], autocommit=True) as conn:
        conn.execute(FLOOR_SQL)
    asyncio.run(_procrastinate_fill(peers["procrastinate"], 0, True))
    asyncio.run(_pgqueuer_fill(peers["pgqueuer"], 0, True))
    print(f"uwf stores: maxConcurrent {POLICY_MAX}, {entries:,} ready entries per process "
          "count; peers: N jobs added before each run")
    os.sync()
    begin(0)
    figures: dict[tuple[int, str], list[float]] = {}
    cpus: dict[tuple[int, str], list[tuple[float, float]]] = {}
    dupes: dict[tuple[int, str], list[int]] = {}
    for index in range(rounds):
        for procs in procs_list:
            shift = (index + procs) % len(SIDES)
            for side in SIDES[shift:] + SIDES[:shift]:
                if side == "uwf-pg":
                    got = run_timed(server, _uwf_worker, procs, total, pg_stores[procs])
                elif side == "uwf-folder":
                    got = run_timed(server, _uwf_worker, procs, total, str(folders[procs]))
                elif side == "procrastinate":
                    asyncio.run(_procrastinate_fill(peers[side], total, False))
                    got = run_timed(server, _procrastinate_worker, procs, total, peers[side])
                elif side == "floor":
                    got = run_timed(server, _floor_worker, procs, total, peers[side])
                else:
                    asyncio.run(_pgqueuer_fill(peers[side], total, False))
                    got = run_timed(server, _pgqueuer_worker, procs, total, peers[side])
                figures.setdefault((procs, side), []).append(got["done"] / got["wall"])
                cpus.setdefault((procs, side), []).append((got["client_us"], got["server_us"]))
                dupes.setdefault((procs, side), []).append(got["dupes"])
        print(f"  round {index + 1}/{rounds} done ({load()})")

    section(f"result: cycles/s, medians over {rounds} rounds (end: {load()}; {pressure()})")
    print(f"{'P':>2}  {'uwf-pg':>8} {'uwf-folder':>10} {'procrast.':>9} {'pgqueuer':>9} "
          f"{'floor':>7}  {'pg/folder':>9} {'pg/procr.':>9} {'pg/pgq':>7} {'floor/pgq':>9} "
          f"{'pg/floor':>8}")
    for procs in procs_list:
        pg, folder, procr, pgq, floor = (median(figures[(procs, side)]) for side in SIDES)
        print(f"{procs:>2}  {pg:>8,.0f} {folder:>10,.0f} {procr:>9,.0f} {pgq:>9,.0f} "
              f"{floor:>7,.0f}  {pg / folder:>9.2f} {pg / procr:>9.2f} {pg / pgq:>7.2f} "
              f"{floor / pgq:>9.2f} {pg / floor:>8.2f}")
        twice = {side: dupes[(procs, side)] for side in SIDES if any(dupes[(procs, side)])}
        if twice:
            print(f"    items handed out twice: {twice}")
        ratio = pg / pgq
        if procs == 1:
            print(f"    P=1: >= 1 x pgqueuer: {verdict(ratio >= 1)}")
        else:
            print(f"    P={procs}: >= 1.5 x pgqueuer: {verdict(ratio >= 1.5)}")
    print("\nCPU a cycle, µs (medians): the workers' (from the barrier) + the server's "
          "processes' (the folder store: its workers only, the server idle)")
    print(f"{'P':>2}  " + " ".join(f"{side:>22}" for side in SIDES))
    for procs in procs_list:
        cells = []
        for side in SIDES:
            client = median([c for c, _ in cpus[(procs, side)]])
            served = median([s for _, s in cpus[(procs, side)]])
            cells.append(f"{client:>7,.0f} + {served:>6,.0f} = {client + served:>5,.0f}")
        print(f"{procs:>2}  " + " ".join(f"{cell:>22}" for cell in cells))


# -- 2. appends -------------------------------------------------------------------------

def _appends(server: Server, at: str, count: int) -> tuple[float, float, float]:
    """Appends a second; this process's and the server's CPU µs an append."""
    from uwf.queue import sched
    from uwf.store import Store

    store = Store.open(at)
    try:
        store.read()
        served = server_cpu(server)
        cpu = time.process_time()
        start = time.perf_counter()
        # The journal, or the store for an older commit's `set_policy` (an A/B's base).
        target: Any = store.journal if takes(sched.set_policy, "journal") else store
        for n in range(count):
            sched.set_policy(target, {"maxConcurrent": 64 + n % 2})
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        served = server_cpu(server) - served
        return count / wall, cpu / count * 1e6, served / count * 1e6
    finally:
        store.close()


def _primitive(server: Server, url: str, count: int) -> tuple[float, float, float]:
    """The primitive under a durable append on PostgreSQL (issue 31): this process
    inserting one line (PRIMITIVE_LINE) in one statement, one round trip, its commit
    synchronous (autocommit); appends a second, CPU µs an append here and on the server."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(PRIMITIVE_SQL)
        served = server_cpu(server)
        cpu = time.process_time()
        start = time.perf_counter()
        for _ in range(count):
            conn.execute("INSERT INTO primitive_lines (line) VALUES (%b)", (PRIMITIVE_LINE,))
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        served = server_cpu(server) - served
    return count / wall, cpu / count * 1e6, served / count * 1e6


def appends(server: Server, work: Path, count: int, rounds: int, env: dict[str, str]) -> None:
    section(f"2. durable appends, one process: {count:,} `sched.set_policy` commands "
            f"(one sched.policy-set event each), {rounds} rounds; the primitive: one line "
            "inserted, one synchronous commit, one round trip")
    url = server.create_database()
    folder = work / "appends"
    for at in (url, str(folder)):
        _uwf(["--store", at, "workflow", "put", str(EXAMPLE)],
             env)
    os.environ["UWF_DURABILITY"] = "fsync"
    rates: dict[str, list[tuple[float, float, float]]] = {
        "pg": [], "folder": [], "primitive": []}
    for index in range(rounds):
        order = [("pg", url), ("folder", str(folder)), ("primitive", url)]
        for name, at in order[index % 3:] + order[:index % 3]:
            rates[name].append(_primitive(server, at, count) if name == "primitive"
                               else _appends(server, at, count))
    (pg, pg_cpu, pg_served), (fo, fo_cpu, _), (pr, pr_cpu, pr_served) = (
        tuple(median([got[k] for got in rates[name]]) for k in range(3))
        for name in ("pg", "folder", "primitive"))
    print(f"uwf-pg {fmt_rate(pg)} (CPU µs an append: {pg_cpu:,.0f} here + {pg_served:,.0f} "
          f"server)  uwf-folder {fmt_rate(fo)} (CPU {fo_cpu:,.0f} µs)  pg/folder "
          f"{pg / fo:.2f}")
    print(f"primitive {fmt_rate(pr)} (CPU µs an insert: {pr_cpu:,.0f} here + "
          f"{pr_served:,.0f} server)  primitive/folder {pr / fo:.2f}  uwf-pg/primitive "
          f"{pg / pr:.2f}")
    print(f"durable appends on PostgreSQL >= 0.8 x the folder's: {verdict(pg >= 0.8 * fo)}"
          + ("" if pr >= 0.8 * fo else " (the primitive itself is under 0.8 x: the limit)"))


# -- 3. rebuild -------------------------------------------------------------------------

def _rebuild(at: str) -> float:
    from uwf.store import Store

    store = Store.open(at)
    try:
        events = store.log.head().seq
        start = time.perf_counter()
        store.journal.rebuild()
        return events / (time.perf_counter() - start)
    finally:
        store.close()


def rebuild(server: Server, work: Path, events: int, rounds: int) -> None:
    from uwf.config.settings import process_settings
    from uwf.storecopy.service import copy_between

    section(f"3. rebuild of the views: {events:,} events, {rounds} rounds")
    folder = work / "rebuild"
    made = generate_log(folder, events, fresh=True)
    url = server.create_database()
    phases: list[float] = []
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done >= total:
            phases.append(time.perf_counter() - started)

    served, cpu = server_cpu(server), time.process_time()
    copy_between(str(folder), url, process_settings(), progress)
    wall = time.perf_counter() - started
    cpu, served = time.process_time() - cpu, server_cpu(server) - served
    print(f"generated in {made.seconds:.1f} s")
    print(f"store copy folder -> PostgreSQL: {events / wall:,.0f} events/s ({wall:.1f} s; "
          f"CPU {cpu / events * 1e6:,.1f} µs an event here + {served / events * 1e6:,.1f} "
          f"server); phases ended at {', '.join(f'{at:.1f}' for at in phases)} s "
          "(log copied, views rebuilt, log verified; then registry verify)")
    print(f"store copy into PostgreSQL >= {COPY_TARGET:,} events/s: "
          f"{verdict(events / wall >= COPY_TARGET)}")
    rates: dict[str, list[float]] = {"pg": [], "folder": []}
    for index in range(rounds):
        order = [("pg", url), ("folder", str(folder))]
        for name, at in order[index % 2:] + order[:index % 2]:
            rates[name].append(_rebuild(at))
    pg, fo = median(rates["pg"]), median(rates["folder"])
    print(f"uwf-pg {fmt_rate(pg)} events  uwf-folder {fmt_rate(fo)} events  "
          f"pg/folder {pg / fo:.2f}")
    print(f"rebuild on PostgreSQL >= {REBUILD_TARGET:,} events/s: "
          f"{verdict(pg >= REBUILD_TARGET)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true",
                        help="400 cycles x 3 rounds; 500 appends; 100,000-event rebuild")
    parser.add_argument("--cycles", type=int, default=2000, help="cycles per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--procs", default="1,4,8")
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--rebuild-events", type=int, default=1_000_000)
    parser.add_argument("--skip-cycles", action="store_true")
    parser.add_argument("--skip-rebuild", action="store_true")
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.cycles, args.rounds, args.appends = 400, 3, 500
        args.rebuild_events = 100_000
    procs = [int(p) for p in args.procs.split(",")]
    # Not its warning that the app is made in a main module: it is, on purpose.
    logging.getLogger("procrastinate").setLevel(logging.ERROR)

    work = fresh_dir(args.dir, "pgqueue")
    print_header("a store on PostgreSQL: cycles beside procrastinate and pgqueuer, appends, "
                 "rebuild", work)
    server = Server(work / "pg", pg_bin(), fsync=True)
    server.start()
    version = server._run(str(server.bin / "postgres"), "--version").stdout.strip()
    print(f"server: {version}, fsync on, full_page_writes on, synchronous_commit on; "
          f"Unix socket; data in {work / 'pg'}")
    env = env_with(UWF_DURABILITY="fsync")
    begin(args.wait_quiet)
    started = time.monotonic()
    try:
        if not args.skip_cycles:
            cycles(server, work, procs, args.cycles, rounds=args.rounds, env=env)
        appends(server, work, args.appends, args.rounds, env)
        if not args.skip_rebuild:
            rebuild(server, work, args.rebuild_events, args.rounds)
    finally:
        server.stop()
    print(f"\ndone in {time.monotonic() - started:.0f} s")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
