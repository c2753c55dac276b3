"""The server's instructions in a durable append on PostgreSQL, counted exactly, beside its
primitive (issue 31): figures the machine's load does not move.

    python bench/pg_append_instructions.py [--short N] [--long N] [--top N] [--keep]
                                           [--dir DIR]

One throw-away cluster (`tests.pgkit.Server`) with a uwf store (the example workflow),
then run under `valgrind --tool=callgrind` (every backend counted on its own; fsync off,
autovacuum off: bench/pg_server_instructions.py's `under_callgrind`). Each side runs 20
warm-up appends and then `--short` and `--long` appends on a connection of its own; the
difference of the two backends' instructions over the difference of appends is an
append's, the connection's set-up left out. The sides: `append`, uwf's durable append
(`sched.set_policy`, one `sched.policy-set` event, as bench/pg_queue_bench.py's appends),
and `insert`, its primitive (one line inserted by one statement, autocommit). And the
client's CPU an append, the same appends run outside valgrind afterwards on the same
server (`process_time`; the client's is not callgrind's). `--top N`: the N functions of
the append's backend with the most instructions, inclusive (callgrind_annotate), per
append (the long run's less the short run's). To measure another commit, put its
snapshot first on PYTHONPATH (bench/common.py's `code_version`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from common import EXAMPLE, REPO, add_common_args, code_version, env_with, fresh_dir
from pg_queue_bench import PRIMITIVE_LINE, PRIMITIVE_SQL
from pg_server_instructions import (
    PORT as PG_PORT,
)
from pg_server_instructions import (
    WARM,
    _append_cycles,
    _instructions,
    _primitive_cycles,
    under_callgrind,
)
from queue_bench import _uwf

sys.path.append(str(REPO))  # after PYTHONPATH: a snapshot there is what runs
from tests.pgkit import Server, pg_bin  # the tests' throw-away server

PORT = PG_PORT  # under_callgrind starts the server on its bench's port
CPU_APPENDS = 500  # appends timed for the client's CPU


def _inclusive(file: Path) -> dict[str, int]:
    """callgrind_annotate's inclusive instructions by function of one backend's file."""
    shown = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                            str(file)], capture_output=True, text=True, check=True).stdout
    found: dict[str, int] = {}
    for line in shown.splitlines():
        match = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S*:(\S+)", line)
        if match:
            name = match.group(2)
            found[name] = found.get(name, 0) + int(match.group(1).replace(",", ""))
    return found


def _client_cpu(url: str, primitive: bool) -> float:
    """The client's CPU µs an append (or insert), outside valgrind."""
    import psycopg

    from uwf.queue import sched
    from uwf.store import Store

    if primitive:
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(WARM):
                conn.execute("INSERT INTO primitive_lines (line) VALUES (%b)",
                             (PRIMITIVE_LINE,))
            cpu = time.process_time()
            for _ in range(CPU_APPENDS):
                conn.execute("INSERT INTO primitive_lines (line) VALUES (%b)",
                             (PRIMITIVE_LINE,))
            return (time.process_time() - cpu) / CPU_APPENDS * 1e6
    store = Store.open(url)
    try:
        store.read()
        for n in range(WARM):
            sched.set_policy(store.journal, {"maxConcurrent": 64 + n % 2})
        cpu = time.process_time()
        for n in range(CPU_APPENDS):
            sched.set_policy(store.journal, {"maxConcurrent": 64 + n % 2})
        return (time.process_time() - cpu) / CPU_APPENDS * 1e6
    finally:
        store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--short", type=int, default=50)
    parser.add_argument("--long", type=int, default=150)
    parser.add_argument("--top", type=int, default=0,
                        help="show the append's N costliest functions (inclusive)")
    parser.add_argument("--keep", action="store_true", help="keep callgrind's files")
    add_common_args(parser)
    args = parser.parse_args(argv)
    work = fresh_dir(args.dir, "pgappend")
    print(f"# the server's instructions a durable append; {code_version()}")
    server = Server(work / "pg", pg_bin(), port=PORT)
    server.start()
    uwf_url = server.create_database()
    plain_url = server.create_database()
    _uwf(["--store", uwf_url, "workflow", "put", str(EXAMPLE)], env_with(UWF_DURABILITY="fsync"))
    import psycopg

    with psycopg.connect(plain_url, autocommit=True) as conn:
        conn.execute(PRIMITIVE_SQL)
    server.stop()
    os.environ.update(UWF_DURABILITY="fsync", UWF_LOCK_TIMEOUT="60")
    sides: dict[str, tuple[Callable[[str, int], int], str]] = {
        "append": (_append_cycles, uwf_url), "insert": (_primitive_cycles, plain_url)}
    with under_callgrind(server, work, uwf_url, plain_url) as out:
        pids = {(side, count): run(url, count) for side, (run, url) in sides.items()
                for count in (args.short, args.long)}
    server.start()
    try:
        cpu = {side: _client_cpu(url, side == "insert") for side, (_, url) in sides.items()}
    finally:
        server.stop()
    span = args.long - args.short
    for side in sides:
        spent = (_instructions(out, pids[(side, args.long)])
                 - _instructions(out, pids[(side, args.short)]))
        print(f"{side:>7}: {spent / span:>10,.0f} instructions an append in its backend; "
              f"the client's CPU {cpu[side]:,.0f} µs an append")
    if args.top:
        long = _inclusive(out / f"{pids[('append', args.long)]}.out")
        short = _inclusive(out / f"{pids[('append', args.short)]}.out")
        rows = sorted(((long[name] - short.get(name, 0)) / span, name) for name in long)
        print(f"\nthe append's backend, inclusive instructions an append (top {args.top}):")
        for spent_one, name in rows[::-1][:args.top]:
            print(f"{spent_one:>10,.0f}  {name}")
    if args.keep:
        print("callgrind's files kept:", ", ".join(
            f"{side} {count} {out / f'{pid}.out'}" for (side, count), pid in pids.items()))
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
