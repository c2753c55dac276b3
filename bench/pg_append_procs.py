"""Durable appends on PostgreSQL from several processes at once (issue 31): what the write
function's synchronous commit (its lock held through its WAL flush) does to writers
that share the log, beside the folder store's and the same processes' primitive.

    python bench/pg_append_procs.py [--procs 1,4] [--appends N] [--dir DIR]

Each of P processes makes `--appends` `sched.set_policy` commands (one event each) on
one store, after a barrier; the rate is all processes' appends over the wall time from
the barrier to the last one's end. The primitive: P processes each inserting one line
by one statement in autocommit (bench/pg_queue_bench.py's). One throw-away cluster
with the server's durable defaults (`tests.pgkit.Server(fsync=True)`). To measure
another commit, put its snapshot first on PYTHONPATH (bench/common.py's
`code_version`): run the two alternately, as the rates move with the disk's flushes.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from common import EXAMPLE, REPO, add_common_args, code_version, env_with, fresh_dir, load
from pg_queue_bench import PRIMITIVE_LINE, PRIMITIVE_SQL
from queue_bench import _uwf

sys.path.append(str(REPO))  # after PYTHONPATH: a snapshot there is what runs
from tests.pgkit import Server, pg_bin  # the tests' throw-away server

PORT = int(os.environ.get("UWF_BENCH_PG_PORT", "5496"))


def _appender(at: str, count: int, barrier: Any, out: Any) -> None:
    from uwf.queue import sched
    from uwf.store import Store

    store = Store.open(at)
    try:
        store.read()
        sched.set_policy(store.journal, {"maxConcurrent": 64})
        barrier.wait()
        for n in range(count):
            sched.set_policy(store.journal, {"maxConcurrent": 64 + n % 2})
        out.put(time.perf_counter())
    finally:
        store.close()


def _inserter(url: str, count: int, barrier: Any, out: Any) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        barrier.wait()
        for _ in range(count):
            conn.execute("INSERT INTO primitive_lines (line) VALUES (%b)", (PRIMITIVE_LINE,))
        out.put(time.perf_counter())


def _rate(target: Any, at: str, procs: int, count: int) -> float:
    barrier = multiprocessing.Barrier(procs + 1)
    out: Any = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=target, args=(at, count, barrier, out))
               for _ in range(procs)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    ends: list[float] = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    return procs * count / (max(ends) - start)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--procs", default="1,4")
    parser.add_argument("--appends", type=int, default=300)
    add_common_args(parser)
    args = parser.parse_args(argv)
    work = fresh_dir(args.dir, "pgappendprocs")
    print(f"# durable appends from several processes; {code_version()}; start: {load()}")
    server = Server(work / "pg", pg_bin(), port=PORT, fsync=True)
    server.start()
    try:
        url = server.create_database()
        folder = work / "folder"
        env = env_with(UWF_DURABILITY="fsync")
        for at in (url, str(folder)):
            _uwf(["--store", at, "workflow", "put", str(EXAMPLE)], env)
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(PRIMITIVE_SQL)
        os.environ.update(UWF_DURABILITY="fsync", UWF_LOCK_TIMEOUT="60")
        for procs in (int(p) for p in args.procs.split(",")):
            pg = _rate(_appender, url, procs, args.appends)
            fo = _rate(_appender, str(folder), procs, args.appends)
            pr = _rate(_inserter, url, procs, args.appends)
            print(f"P={procs}: uwf-pg {pg:,.0f}/s  uwf-folder {fo:,.0f}/s  primitive "
                  f"{pr:,.0f}/s  pg/folder {pg / fo:.2f}  pg/primitive {pg / pr:.2f}")
    finally:
        server.stop()
    print(f"end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
