"""The server's instructions in a lease+complete cycle on PostgreSQL, counted exactly
(issue 31): a figure the machine's load does not move.

    python bench/pg_server_instructions.py [--short N] [--long N] [--entries N] [--dir DIR]
                                           [--keep]

One throw-away PostgreSQL cluster (`tests.pgkit.Server`) with a uwf store filled (untimed,
`uwf queue add --batch`), then run under `valgrind --tool=callgrind` (every backend
counted on its own, fsync off, autovacuum off). Two connections each run 20 warm-up
cycles and then `--short` and `--long` lease+complete cycles (`sched.lease`,
`sched.complete`, as bench/pg_queue_bench.py's uwf-pg worker); the difference of their
backends' instruction counts over the difference of cycles is a cycle's, its connection's
set-up and warm-up left out. The same for the floor (bench/pg_queue_bench.py's
FLOOR_SQL: two calls a cycle that lock, insert one line and commit twice) in the same
cluster. To measure another commit, put its snapshot first on PYTHONPATH (see
bench/common.py's `code_version`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from common import REPO, add_common_args, code_version, env_with, fresh_dir
from pg_queue_bench import FLOOR_LINE, FLOOR_SQL, fill_pg_store

sys.path.append(str(REPO))  # after PYTHONPATH: a snapshot there is what runs
from tests.pgkit import Server, pg_bin  # the tests' throw-away server

WARM = 20
PORT = 5498


def _uwf_cycles(url: str, count: int) -> int:
    """`count` cycles on a connection of its own; its backend's pid."""
    from uwf.queue import sched
    from uwf.store import Store

    store = Store.open(url)
    try:
        store.read()
        pid = store.journal.log.db.reader.info.backend_pid  # type: ignore[attr-defined]
        for _ in range(WARM + count):
            granted = sched.lease(store, 1).leases[0]
            sched.complete(store, granted.id, granted.lease_id)
        return int(pid)
    finally:
        store.close()


def _floor_cycles(url: str, count: int) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(2 * (WARM + count)):
            conn.execute("CALL floor_call(%b)", (FLOOR_LINE,))
        return int(conn.info.backend_pid)


def _instructions(out: Path, pid: int) -> int:
    for line in (out / f"{pid}.out").read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise SystemExit(f"no summary in callgrind's output of backend {pid}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--short", type=int, default=50)
    parser.add_argument("--long", type=int, default=150)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--keep", action="store_true",
                        help="keep callgrind's files (to read with callgrind_annotate)")
    add_common_args(parser)
    args = parser.parse_args(argv)
    work = fresh_dir(args.dir, "pginstr")
    print(f"# the server's instructions a lease+complete cycle; {code_version()}")
    server = Server(work / "pg", pg_bin(), port=PORT)
    server.start()
    uwf_url = server.create_database()
    floor_url = server.create_database()
    fill_pg_store(uwf_url, work, args.entries + 2 * (WARM + args.long),
                  env_with(UWF_DURABILITY="fsync"))
    import psycopg

    with psycopg.connect(floor_url, autocommit=True) as conn:
        conn.execute(FLOOR_SQL)
    server.stop()
    out = work / "callgrind"
    out.mkdir()
    data = server.folder / "data"
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if prefix:
        shutil.chown(out, "postgres")
    with (work / "valgrind.log").open("w") as log:
        postmaster = subprocess.Popen(
            [*prefix, "valgrind", "--tool=callgrind", "--trace-children=yes",
             f"--callgrind-out-file={out}/%p.out", str(server.bin / "postgres"), "-D",
             str(data), "-k", str(server.socket_dir), "-c", "listen_addresses=", "-p",
             str(PORT), "-c", "fsync=off", "-c", "full_page_writes=off", "-c",
             "autovacuum=off"], stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(600):
            try:
                psycopg.connect(uwf_url, connect_timeout=5).close()
                break
            except psycopg.OperationalError:
                time.sleep(1)
        os.environ.update(UWF_DURABILITY="fsync", UWF_LOCK_TIMEOUT="60")
        sides: dict[str, tuple[Callable[[str, int], int], str]] = {
            "uwf-pg": (_uwf_cycles, uwf_url), "floor": (_floor_cycles, floor_url)}
        pids = {(side, count): run(url, count) for side, (run, url) in sides.items()
                for count in (args.short, args.long)}
    finally:
        subprocess.run([*prefix, str(server.bin / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "-w", "stop"], capture_output=True, check=False)
        postmaster.wait(timeout=600)
    for side in sides:
        spent = (_instructions(out, pids[(side, args.long)])
                 - _instructions(out, pids[(side, args.short)]))
        print(f"{side:>7}: {spent / (args.long - args.short):>12,.0f} instructions a cycle "
              "in its backend")
    if args.keep:
        print("callgrind's files kept:", ", ".join(
            f"{side} {count} cycles {out / f'{pid}.out'}" for (side, count), pid in pids.items()))
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
