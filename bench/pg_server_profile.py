"""Where the server's CPU goes in a lease and a complete on PostgreSQL (issue 31).

    python bench/pg_server_profile.py [--cycles N] [--entries N] [--fsync] [--plans]
                                      [--perf FILE] [--dir DIR]

One throw-away PostgreSQL cluster (`tests.pgkit.Server`) started with
`pg_stat_statements` (`track = all`: the statements inside the procedures too) and
`track_functions = pl`; a uwf store in one database, filled (untimed, `uwf queue add
--batch`) with ready entries. One process runs N lease+complete cycles (`sched.lease`,
`sched.complete`, as bench/pg_queue_bench.py's uwf-pg worker), after a warm-up of 50;
printed:

- this process's CPU and the server's processes' CPU a cycle, and its backend's alone;
- the procedures' own time (`pg_stat_user_functions`: total and self, µs a call);
- every statement the server ran in the timed cycles, by total time: calls a cycle, mean
  µs, µs a cycle, shared buffers hit a call, WAL records and bytes a call
  (`pg_stat_statements`); the plpgsql expressions evaluated without the executor
  (assignments, IFs) are not statements there: they are in the procedures' self time;
- with `--plans`, EXPLAIN (ANALYZE, BUFFERS) of the selection statements on the store.

By default fsync is off (`tests.pgkit.Server`'s test settings): the CPU shows without
the flush's wait; `--fsync` keeps the server's durable defaults.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from common import REPO, add_common_args, env_with, fresh_dir, load, print_header, section
from pg_queue_bench import fill_pg_store, server_cpu

sys.path.insert(0, str(REPO))
from tests.pgkit import Server, pg_bin  # the tests' throw-away server

WARM = 50


def _backend_cpu(pid: int) -> float:
    """CPU seconds the backend `pid` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cycles(url: str, count: int, perf: str | None = None) -> tuple[float, float, int]:
    """`count` lease+complete cycles in this process; its CPU seconds, its backend's, and
    cycles done. With `perf`, the backend is sampled by `perf record` to that file."""
    import subprocess

    from uwf.queue import sched
    from uwf.store import Store

    store = Store.open(url)
    recorder = None
    try:
        store.read()
        backend = store.journal.log.db.reader.info.backend_pid  # type: ignore[attr-defined]
        if perf is not None:
            recorder = subprocess.Popen(["perf", "record", "-F", "1999", "--call-graph",
                                         "dwarf,32768", "-o", perf, "-p", str(backend)],
                                        stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        cpu, served = time.process_time(), _backend_cpu(backend)
        done = 0
        for _ in range(count):
            got = sched.lease(store, 1)
            if not got.leases:
                break
            sched.complete(store, got.leases[0].id, got.leases[0].lease_id)
            done += 1
        return time.process_time() - cpu, _backend_cpu(backend) - served, done
    finally:
        if recorder is not None:
            recorder.send_signal(2)
            recorder.wait()
        store.close()


def _reset(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
        conn.execute("SELECT pg_stat_reset()")


def _report(url: str, cycles: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        time.sleep(0.6)  # the backends' function counts reach the stats (PGSTAT_MIN_INTERVAL)
        funcs = conn.execute(
            "SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions "
            "WHERE calls > 0 ORDER BY total_time DESC").fetchall()
        print(f"\n{'procedure':<32} {'calls':>6} {'total µs/call':>14} {'self µs/call':>13}")
        for name, calls, total, own in funcs:
            print(f"{name:<32} {calls:>6} {total / calls * 1e3:>14,.0f} "
                  f"{own / calls * 1e3:>13,.0f}")
        rows = conn.execute(
            "SELECT calls, total_exec_time, total_plan_time, shared_blks_hit, "
            "shared_blks_read, wal_records, wal_bytes, toplevel, "
            "regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "ORDER BY total_exec_time DESC").fetchall()
    nested = sum(row[1] for row in rows if not row[7])
    print(f"\nstatements ({cycles} cycles; inside the procedures: {nested * 1e3 / cycles:,.0f} "
          "µs a cycle in all)")
    print(f"{'calls/cyc':>9} {'mean µs':>8} {'µs/cyc':>7} {'hit/call':>8} {'wal rec':>7} "
          f"{'wal B':>6}  statement")
    for calls, total, _plan, hit, _read, wal_records, wal_bytes, top, query in rows:
        if calls < cycles // 2:
            continue
        text = query if len(query) <= 150 else query[:147] + "..."
        print(f"{calls / cycles:>9.2f} {total / calls * 1e3:>8.1f} {total / cycles * 1e3:>7.1f} "
              f"{hit / calls:>8.1f} {wal_records / calls:>7.1f} {int(wal_bytes) / calls:>6.0f}  "
              f"{'' if top else '  '}{text}")


PLANS = (
    "SELECT count(*) FROM uwf_v_queue q WHERE q.c_status = 'leased' AND q.c_session IS NULL "
    "AND q.c_lease_expires > 0",
    "SELECT q.key, q.c_priority, q.c_enqueued_at FROM uwf_v_queue q WHERE q.c_ready_pool = '' "
    "AND (q.c_eligible_at IS NULL OR q.c_eligible_at <= 0) ORDER BY q.c_priority NULLS FIRST, "
    "q.c_enqueued_at NULLS FIRST, q.key NULLS FIRST LIMIT 1",
    "SELECT e.seq, e.line, e.ends FROM uwf_events e ORDER BY e.seq DESC LIMIT 1",
)


def _plans(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in PLANS:
            print(f"\n{statement}")
            for (line,) in conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {statement}"):
                print(f"  {line}")
        print("\nindexes of uwf_v_queue:")
        for name, definition in conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'uwf_v_queue'"):
            print(f"  {name}: {definition}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=5000, help="ready entries at start")
    parser.add_argument("--fsync", action="store_true", help="the server's durable defaults")
    parser.add_argument("--plans", action="store_true", help="EXPLAIN the selections too")
    parser.add_argument("--perf", metavar="FILE",
                        help="sample the backend with `perf record -g` into FILE")
    add_common_args(parser)
    args = parser.parse_args(argv)
    work = fresh_dir(args.dir, "pgprofile")
    print_header("the server's CPU in a lease and a complete on PostgreSQL", work)
    server = Server(work / "pg", pg_bin(), fsync=args.fsync)
    server.start()
    try:
        import psycopg

        # The module's own settings are known once it is loaded: two restarts.
        for settings in ((("shared_preload_libraries", "pg_stat_statements"),),
                         (("pg_stat_statements.track", "all"), ("track_functions", "pl"))):
            with psycopg.connect(server.url(), autocommit=True) as conn:
                for setting, value in settings:
                    conn.execute(f"ALTER SYSTEM SET {setting} = '{value}'")
            server.restart()
        url = server.create_database()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        env = env_with(UWF_DURABILITY="fsync")
        fill_pg_store(url, work, args.entries + args.cycles + WARM, env)
        os.environ["UWF_DURABILITY"] = "fsync"
        section(f"{args.cycles:,} cycles, one process, {args.entries:,} ready entries "
                f"(fsync {'on' if args.fsync else 'off'}; {load()})")
        _cycles(url, WARM)
        _reset(url)
        served = server_cpu(server)
        start = time.perf_counter()
        cpu, backend, done = _cycles(url, args.cycles, args.perf)
        wall = time.perf_counter() - start
        time.sleep(0.2)
        served = server_cpu(server) - served
        print(f"{done / wall:,.0f} cycles/s; CPU a cycle: {cpu / done * 1e6:,.0f} µs here + "
              f"{served / done * 1e6:,.0f} µs server, of which its backend "
              f"{backend / done * 1e6:,.0f} µs")
        _report(url, done)
        if args.plans:
            _plans(url)
    finally:
        server.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
