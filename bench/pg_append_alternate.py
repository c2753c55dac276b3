"""Durable appends on PostgreSQL by two versions of uwf in turn, block by block (issue 31):
a same-run comparison where the disk's flush time moves from one second to the next.

    python bench/pg_append_alternate.py --a SNAPSHOT --b SNAPSHOT [--rounds N]
                                        [--block N] [--dir DIR]

Each side is one process with `SNAPSHOT` (an exported `uwf/`, bench/common.py's
`code_version`) first on its PYTHONPATH, its own store (a database) on one throw-away
cluster with the server's durable defaults (`tests.pgkit.Server(fsync=True)`), warmed
by 50 appends. Each round, each side makes `--block` `sched.set_policy` commands (one
event each), the two in turn (which goes first alternates); printed: each side's
median CPU (its own process) and wall time an append over the rounds, and a's wall
over b's round by round, with its median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

from common import EXAMPLE, REPO, add_common_args, fresh_dir, load

sys.path.append(str(REPO))  # after PYTHONPATH: a snapshot there is what runs
from tests.pgkit import Server, pg_bin

PORT = 55436
WARM = 50


def _worker(url: str) -> int:
    """One side: appends in blocks of the size read from stdin; each block's CPU and
    wall an append, in µs, on stdout."""
    import uwf
    from uwf.queue import sched
    from uwf.store import Store
    from uwf.workflows.service import put_workflow

    store = Store.open(url)
    try:
        put_workflow(store, EXAMPLE)
        for n in range(WARM):
            sched.set_policy(store.journal, {"maxConcurrent": 1 + n % 50})
        print(f"ready {uwf.__file__}", flush=True)
        for line in sys.stdin:
            count = int(line)
            cpu, wall = time.process_time(), time.perf_counter()
            for n in range(count):
                sched.set_policy(store.journal, {"maxConcurrent": 1 + n % 50})
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(f"{cpu / count * 1e6:.1f} {wall / count * 1e6:.1f}", flush=True)
    finally:
        store.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--a", required=True, help="a snapshot's folder (holding uwf/)")
    parser.add_argument("--b", required=True, help="the other's")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    work = fresh_dir(args.dir, "pgappendalternate")
    print(f"# durable appends, two versions in turn; start: {load()}")
    server = Server(work / "pg", pg_bin(), port=PORT, fsync=True)
    server.start()
    sides = {"a": args.a, "b": args.b}
    children: dict[str, subprocess.Popen[str]] = {}
    got: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    try:
        for side, snapshot in sides.items():
            env = dict(os.environ, PYTHONPATH=snapshot, UWF_DURABILITY="fsync")
            child = subprocess.Popen(
                [sys.executable, __file__, "--a", "-", "--b", "-", "--worker",
                 server.create_database()], env=env, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            children[side] = child
            assert child.stdout is not None
            print(f"{side}: {child.stdout.readline().split()[1]}")
        for round_ in range(args.rounds):
            for side in ("a", "b") if round_ % 2 == 0 else ("b", "a"):
                child = children[side]
                assert child.stdin is not None
                assert child.stdout is not None
                child.stdin.write(f"{args.block}\n")
                child.stdin.flush()
                cpu, wall = map(float, child.stdout.readline().split())
                got[side].append((cpu, wall))
    finally:
        for child in children.values():
            if child.stdin is not None:
                child.stdin.close()
            child.wait()
        server.stop()
    for side in sides:
        print(f"{side}: median CPU {statistics.median(c for c, _ in got[side]):.0f} µs, wall "
              f"{statistics.median(w for _, w in got[side]):.0f} µs an append")
    ratios = [a[1] / b[1] for a, b in zip(got["a"], got["b"], strict=True)]
    cpus = [a[0] / b[0] for a, b in zip(got["a"], got["b"], strict=True)]
    print("a's wall / b's, round by round: " + " ".join(f"{r:.2f}" for r in ratios))
    print(f"median a/b: wall {statistics.median(ratios):.2f}, CPU {statistics.median(cpus):.2f}")
    print(f"end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
