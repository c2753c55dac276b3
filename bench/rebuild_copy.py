"""The floor of a snapshot restore: copying the snapshot file's bytes, by each way there is.

    python bench/rebuild_copy.py [--quick | --runs R] [--rounds N] [--dir DIR]

The snapshot `bench/rebuild_snapshot.py` keeps for the run mix (run that first: it
writes the store and the snapshot), copied to a file beside it, in rotating order,
`--rounds` times, each timed (wall, and CPU of this process and its children):
- `cp` (coreutils);
- `sendfile`: `shutil.copyfile` (the kernel's copy: what uwf's restores use);
- `copy_file_range`: `os.copy_file_range` in a loop;
- `backup, journal off`: SQLite's backup API into an existing views file whose journal
  is off (what an in-place restore did before it copied with sendfile);
- `backup, new file`: SQLite's backup API into a new file.

Together with `bench/rebuild_snapshot.py` (a rebuild from the snapshot and its `cp`
baseline, same hour) this shows where a restore's time goes beyond the copy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from common import add_common_args, begin, data_dir, load, median, print_header, section


def copy_file_range(source: Path, target: Path) -> None:
    with source.open("rb") as reading, target.open("wb") as writing:
        left = os.fstat(reading.fileno()).st_size
        while left > 0:
            left -= os.copy_file_range(reading.fileno(), writing.fileno(), left)


def backup(source: Path, target: Path, *, existing: bool) -> None:
    if existing:  # a views file in WAL mode, turned to no journal as a restore does
        made = sqlite3.connect(target, isolation_level=None)
        made.execute("PRAGMA journal_mode=WAL")
        made.execute("CREATE TABLE x (a)")
        made.close()
    reading = sqlite3.connect(f"file:{source}?mode=ro", uri=True, isolation_level=None)
    writing = sqlite3.connect(target, isolation_level=None)
    try:
        if existing:
            writing.execute("PRAGMA journal_mode=OFF")
        reading.backup(writing)
    finally:
        writing.close()
        reading.close()


def timed(call: Callable[[], object]) -> tuple[float, float]:
    before = os.times()
    start = time.perf_counter()
    call()
    wall = time.perf_counter() - start
    after = os.times()
    cpu = sum(getattr(after, name) - getattr(before, name) for name in
              ("user", "system", "children_user", "children_system"))
    return wall, cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="the 17,000-run store's snapshot")
    parser.add_argument("--runs", type=int, default=170_000, help="runs (default 170,000)")
    parser.add_argument("--rounds", type=int, default=3)
    add_common_args(parser)
    args = parser.parse_args(argv)
    runs = 17_000 if args.quick else args.runs
    where = data_dir(args.dir) / "rebuild-snapshot"
    print_header("copying a views snapshot: the floor of a restore", where)
    kept = sorted((where / f"runs-{runs}" / "views").glob("snapshot-*.sqlite3"))
    if not kept:
        sys.exit(f"bench: no snapshot in {where / f'runs-{runs}'}: run "
                 "bench/rebuild_snapshot.py first (same --runs and --dir)")
    source = kept[-1]
    target = where / "copy-bench.sqlite3"
    print(f"snapshot: {source} ({source.stat().st_size / 2**20:.0f} MiB)")
    ways: dict[str, Callable[[], object]] = {
        "cp": lambda: subprocess.run(["cp", str(source), str(target)], check=True),
        "sendfile": lambda: shutil.copyfile(source, target),
        "copy_file_range": lambda: copy_file_range(source, target),
        "backup, journal off": lambda: backup(source, target, existing=True),
        "backup, new file": lambda: backup(source, target, existing=False),
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}

    def clear() -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)

    begin(args.wait_quiet)
    for round_ in range(args.rounds):
        names = list(ways)
        names = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in names:
            clear()
            results[name].append(timed(ways[name]))
        print(f"  round {round_ + 1}/{args.rounds}: "
              + ", ".join(f"{name} {results[name][-1][0]:.2f} s" for name in ways)
              + f" ({load()})", flush=True)
    clear()
    section(f"result: medians of {args.rounds} (end: {load()})")
    print(f"{'':22} {'wall':>8} {'CPU-s':>7} {'MiB/s':>8}")
    size = source.stat().st_size / 2**20
    for name, figures in results.items():
        wall = median([wall for wall, _ in figures])
        cpu = median([cpu for _, cpu in figures])
        print(f"{name:22} {wall:7.2f}s {cpu:7.2f} {size / wall:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
