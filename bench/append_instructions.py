"""Instructions a single-command append executes (callgrind), one code against another.

    python bench/append_instructions.py [--base COMMIT] [--writes N] [--dir DIR]

The load-proof figure beside `bench/append.py`'s rates (issue 30): `bench/append.py`'s
in-process command (`make_writer`: one event a `journal.write`, as `workflow put`
decides it), UWF_DURABILITY=none (the disk's wait is no instruction of uwf's), under
`valgrind --tool=callgrind` in a fresh process that first writes 50 (imports, caches);
run for 50 and for 50 + N writes, the difference over N is one write's instructions.
PYTHONHASHSEED=0. Side B is the work tree; with --base, side A is that commit's `uwf/`
(`git archive`) put first on PYTHONPATH. Needs valgrind.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from common import REPO, callgrind_sides, callgrind_total, side_env

CHILD = """
import shutil, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from append import make_writer
from uwf.store import Store
writes, root = int(sys.argv[1]), Path(sys.argv[2])
shutil.rmtree(root, ignore_errors=True)
store = Store.open(root)
write = make_writer(store)
for counter in range(50 + writes):
    write(counter)
store.close()
"""


def instructions(writes: int, uwf_path: Path | None, work: Path) -> int:
    """The total instructions of a child that makes 50 + `writes` writes."""
    out = work / f"callgrind-{writes}.out"
    env = side_env(uwf_path, "none")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    sys.executable, "-c", CHILD, str(writes), str(work / "store"),
                    str(REPO / "bench")], env=env, cwd="/", check=True, capture_output=True)
    total = callgrind_total(out)
    out.unlink()
    return total


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--base", default=None, metavar="COMMIT",
                        help="side A: this commit's uwf/ (default: the work tree alone)")
    parser.add_argument("--writes", type=int, default=500, help="writes measured (default 500)")
    parser.add_argument("--dir", type=Path, default=REPO / "bench" / "out" / "append-instr")
    args = parser.parse_args(argv)
    work = args.dir
    sides = callgrind_sides(args.base, work)
    figures = {name: (instructions(args.writes, path, work) - instructions(0, path, work))
               / args.writes for name, path in sides.items()}
    print(f"instructions a write (callgrind, {args.writes} writes after 50, durability none)")
    for name, value in figures.items():
        print(f"  {name:12} {value:12,.0f}")
    if len(figures) == 2:
        a, b = figures.values()
        print(f"  B / A        {b / a:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
