"""Instructions the resident writer executes a lease+complete cycle (callgrind), one code
against another.

    python bench/writer_instructions.py [--base COMMIT] [--cycles N] [--dir DIR]

The load-proof figure beside `bench/queue_bench.py --writer`'s rates (issue 30, item 7):
`uwf writer` run under `valgrind --tool=callgrind` (UWF_DURABILITY=fsync, as the bench
runs it) on a store of 4N + 100 ready entries, one client process (not under valgrind)
making N, then 4N lease+complete cycles through it; the difference over 3N is one
cycle's instructions in the writer (start-up, the queue's load and the stop cancel
out). PYTHONHASHSEED=0. Side B is the work tree; with --base, side A is that commit's
`uwf/` (`git archive`) put first on PYTHONPATH. Needs valgrind.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from common import callgrind_sides, callgrind_total, side_env, uwf_exe
from queue_bench import POLICY_MAX, fill_store, new_store

CLIENT = """
import sys
from uwf.queue import sched
from uwf.store import Store
store = Store.open(sys.argv[2])
for _ in range(int(sys.argv[1])):
    lease = sched.lease(store, 1).leases[0]
    sched.complete(store, lease.id, lease.lease_id)
assert store.writer is not None and store.writer._local.sock is not None, "no writer"
store.close()
"""


def instructions(cycles: int, filled: int, uwf_path: Path | None, work: Path) -> int:
    """The writer's total instructions over `cycles` lease+complete cycles of a client."""
    env = side_env(uwf_path, "fsync")
    root = work / "store"
    new_store(root, env, POLICY_MAX)
    fill_store(root, work, filled, {**env, "UWF_DURABILITY": "none"})
    out = work / f"callgrind-{cycles}.out"
    writer = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
         uwf_exe(), "--store", str(root), "--json", "writer"],
        env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert writer.stdout is not None
    if "listening" not in writer.stdout.readline():
        writer.kill()
        sys.exit("bench: the writer did not start")
    subprocess.run([sys.executable, "-c", CLIENT, str(cycles), str(root)], env=env,
                   cwd="/", check=True)
    writer.send_signal(signal.SIGTERM)
    writer.communicate()
    total = callgrind_total(out)
    out.rename(work / f"kept-{cycles}.out")  # for callgrind_annotate
    return total


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a commit to measure beside the work tree")
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/uwf-writer-instructions"))
    args = parser.parse_args(argv)
    work = args.dir
    sides = callgrind_sides(args.base, work)
    filled = 4 * args.cycles + 100
    print(f"the writer's instructions a lease+complete cycle (callgrind, {args.cycles} and "
          f"{4 * args.cycles} cycles of one client, {filled:,} ready entries, fsync)")
    for name, path in sides.items():
        side = work / name.replace(" ", "-")
        side.mkdir(exist_ok=True)
        low = instructions(args.cycles, filled, path, side)
        high = instructions(4 * args.cycles, filled, path, side)
        print(f"  {name:>12}: {(high - low) / (3 * args.cycles):,.0f} a cycle "
              f"({low:,} and {high:,} in all)")


if __name__ == "__main__":
    main()
