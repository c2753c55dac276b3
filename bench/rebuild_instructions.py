"""A full replay's instructions per event, counted exactly by callgrind: this checkout's
code against a base commit's, a figure the machine's load does not move.

    python bench/rebuild_instructions.py [--runs R] [--base REV] [--dir DIR] [--keep]

A store of the run mix `bench/runs.py` writes (default 2,000 runs, about 12,000
events: callgrind runs code some 50 times slower). Each code (this checkout's `uwf/`,
and `--base`'s, taken with `git archive` as bench/rebuild_cpu.py does) runs twice under
`valgrind --tool=callgrind` in a child of its own: once opening the store alone, once
opening it and replaying the whole log into new views (`Journal.rebuild_views(
snapshot=False)`); the difference over the log's events is a replayed event's
instructions, the interpreter's start-up and imports left out. `--keep`: keep
callgrind's files (to read with callgrind_annotate) in the data dir.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from common import REPO, add_common_args, code_of, data_dir, env_with, print_header, section
from rebuild_snapshot import events_in
from runs import generate_runs

CHILD = """
import sys
from pathlib import Path
import uwf
assert uwf.__file__.startswith(sys.argv[2]), (uwf.__file__, sys.argv[2])
from uwf.store import Store
root = Path(sys.argv[1])
for suffix in ("", "-wal", "-shm"):
    Path(f"{root}/views/views.sqlite3{suffix}").unlink(missing_ok=True)
store = Store.open(root)
store.log.head()
if sys.argv[3] == "replay":
    store.journal.rebuild_views(snapshot=False)
store.close()
"""


def instructions(code: Path, root: Path, what: str, out: Path) -> int:
    """The child's instructions, all of them, under callgrind."""
    result = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
         "-c", CHILD, str(root.resolve()), str(code), what],
        cwd=code, capture_output=True, text=True, check=False,
        env=env_with(UWF_DURABILITY="none", PYTHONPATH=str(code)))
    if result.returncode != 0:
        sys.exit(f"bench: the child failed ({code}, {what}): {result.stderr.strip()[-500:]}")
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    sys.exit(f"bench: no summary in {out}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=2_000, help="runs (default 2,000)")
    parser.add_argument("--base", default="HEAD", help="the base commit (default HEAD)")
    parser.add_argument("--keep", action="store_true", help="keep callgrind's files")
    add_common_args(parser)
    args = parser.parse_args(argv)
    where = data_dir(args.dir) / "rebuild-snapshot"
    where.mkdir(parents=True, exist_ok=True)
    print_header("a full replay's instructions per event, this code vs a base", where)
    root = where / f"runs-{args.runs}"
    made = generate_runs(root, args.runs, "timeout")
    events = events_in(root)
    print(f"store: {args.runs:,} runs, {events:,} events{' (reused)' if made.reused else ''}")
    found: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="uwf-bench-code-") as scratch:
        codes = {"this checkout": REPO, f"base {args.base}": code_of(args.base,
                                                                   Path(scratch) / "base")}
        outs = where if args.keep else Path(scratch)
        for name, code in codes.items():
            tag = "this" if code == REPO else "base"
            opened = instructions(code, root, "open", outs / f"callgrind-{tag}-open.out")
            replayed = instructions(code, root, "replay", outs / f"callgrind-{tag}-replay.out")
            found[name] = replayed - opened
            print(f"  {name}: open {opened:,}, open + replay {replayed:,} instructions",
                  flush=True)
    section("result")
    for name, count in found.items():
        print(f"{name:24} {count / events:>10,.0f} instructions a replayed event")
    mine, base = found["this checkout"], found[f"base {args.base}"]
    print(f"this checkout's instructions / the base's: {mine / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
