"""A full replay of all views, CPU per event: this checkout's code against a base commit's,
alternating on the same store.

    python bench/rebuild_cpu.py [--quick | --runs R] [--base REV] [--rounds N] [--floor]
                                [--over] [--dir DIR]

A store of the run mix `bench/runs.py` writes (170,000 runs, about 1,040,000 events;
`--quick`: 17,000 runs, about 104,000). Each code (this checkout's `uwf/`, and `--base`'s,
default `HEAD`, taken with `git archive`) runs in a child process of its own, with the
code on `PYTHONPATH`: `Store.open(root)`, then `Journal.rebuild_views(snapshot=False)`
(the whole log replayed into new views: every view and the stream index; no snapshot),
timed by the child's `time.process_time()` around the replay alone, with its peak RSS.
The two codes alternate, `--rounds` times, on the same store; the views file is
deleted before each (a replay into no views: a first read, a copy's new store), or,
with `--over`, kept (a replay over the views the round before left: `uwf registry
rebuild` over views, whose replay goes through the WAL). `--floor`: then, in one more
child of this checkout's code, each part of a replay measured alone on the same store
(`bench/rebuild_floor.py`: reading, decoding and the chain; the fold; the rows; their
inserts; the indexes; the stream index), beside the replay's median.

Target (issue 30): >= 100,000 events per CPU-second for all views at 1,000,000 events,
peak RSS <= 300 MiB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from common import (
    REPO,
    add_common_args,
    begin,
    code_of,
    data_dir,
    env_with,
    load,
    median,
    print_header,
    section,
    verdict,
)
from rebuild_snapshot import events_in
from runs import generate_runs

TARGET = 100_000
RSS_TARGET_MIB = 300

CHILD = """
import json, resource, sys, time
import uwf
assert uwf.__file__.startswith(sys.argv[2]), (uwf.__file__, sys.argv[2])
from pathlib import Path
from uwf.store import Store
root = Path(sys.argv[1])
for suffix in ("", "-wal", "-shm") if sys.argv[3] == "fresh" else ():
    Path(f"{root}/views/views.sqlite3{suffix}").unlink(missing_ok=True)
store = Store.open(root)
cpu, wall = time.process_time(), time.perf_counter()
head = store.journal.rebuild_views(snapshot=False).head
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
store.close()
print(json.dumps({"cpu": cpu, "wall": wall, "events": head.seq,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def replay(code: Path, root: Path, *, over: bool = False) -> dict[str, float]:
    # Run in the code's folder: `-c` puts the working folder first on sys.path.
    result = subprocess.run([sys.executable, "-c", CHILD, str(root.resolve()), str(code),
                             "over" if over else "fresh"], cwd=code,
                            capture_output=True, text=True,
                            env=env_with(UWF_DURABILITY="none", PYTHONPATH=str(code)),
                            check=False)
    if result.returncode != 0:
        sys.exit(f"bench: the replay failed ({code}): {result.stderr.strip()[-500:]}")
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="17,000 runs (~104,000 events)")
    parser.add_argument("--runs", type=int, default=170_000, help="runs (default 170,000)")
    parser.add_argument("--base", default="HEAD", help="the base commit (default HEAD)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--floor", action="store_true",
                        help="then each part of a replay alone (bench/rebuild_floor.py)")
    parser.add_argument("--over", action="store_true",
                        help="replay over the views the round before left (`registry "
                             "rebuild` over views: through the WAL), not into none")
    add_common_args(parser)
    args = parser.parse_args(argv)
    runs = 17_000 if args.quick else args.runs
    where = data_dir(args.dir) / "rebuild-snapshot"  # the store rebuild_snapshot.py uses
    where.mkdir(parents=True, exist_ok=True)
    print_header("a full replay of all views: CPU per event, this code vs a base"
                 + (" (over the views a replay left)" if args.over else ""), where)
    root = where / f"runs-{runs}"
    made = generate_runs(root, runs, "timeout")
    events = events_in(root)
    print(f"store: {runs:,} runs, {events:,} events{' (reused)' if made.reused else ''}")
    with tempfile.TemporaryDirectory(prefix="uwf-bench-code-") as scratch:
        codes = {"this checkout": REPO, f"base {args.base}": code_of(args.base,
                                                                   Path(scratch) / "base")}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in codes}
        begin(args.wait_quiet)
        for round_ in range(args.rounds):
            for name, code in codes.items():
                figures = replay(code, root, over=args.over)
                if figures["events"] != events:
                    sys.exit(f"bench: {name} replayed {figures['events']}, not {events}")
                results[name].append(figures)
                print(f"  round {round_ + 1}: {name}: {figures['cpu']:.2f} CPU-s, "
                      f"{figures['wall']:.2f} s wall, {figures['rss'] / 1024:.0f} MiB "
                      f"({load()})", flush=True)
    section(f"result: medians of {args.rounds} (end: {load()})")
    print(f"{'':24} {'CPU-s':>8} {'wall':>8} {'per CPU-s':>11} {'µs/event':>9} "
          f"{'peak RSS':>9}")
    for name, each in results.items():
        cpu = median([f["cpu"] for f in each])
        wall = median([f["wall"] for f in each])
        rss = max(f["rss"] for f in each) / 1024
        print(f"{name:24} {cpu:8.2f} {wall:7.2f}s {events / cpu:>11,.0f} "
              f"{cpu / events * 1e6:9.1f} {rss:>5.0f} MiB")
    mine = median([f["cpu"] for f in results["this checkout"]])
    base = median([f["cpu"] for f in results[f"base {args.base}"]])
    print(f"this checkout's CPU / the base's: {mine / base:.2f}")
    peak = max(f["rss"] for f in results["this checkout"]) / 1024
    print(f"target >= {TARGET:,} events per CPU-second: {verdict(events / mine >= TARGET)} "
          f"({events / mine:,.0f})")
    print(f"target peak RSS <= {RSS_TARGET_MIB} MiB: {verdict(peak <= RSS_TARGET_MIB)} "
          f"({peak:.0f} MiB)")
    if args.floor:
        show_floor(root, events, mine)
    return 0


def show_floor(root: Path, events: int, replay: float) -> None:
    """Each part of a replay alone (bench/rebuild_floor.py), this checkout's code, the
    views the last round rebuilt read for the rows."""
    result = subprocess.run([sys.executable, str(REPO / "bench" / "rebuild_floor.py"),
                             str(root.resolve())], cwd=REPO, capture_output=True, text=True,
                            env=env_with(UWF_DURABILITY="none", PYTHONPATH=str(REPO)),
                            check=False)
    if result.returncode != 0:
        sys.exit(f"bench: the floor failed: {result.stderr.strip()[-500:]}")
    part = json.loads(result.stdout.strip().splitlines()[-1])
    section(f"each part alone, this checkout ({part['rows']:,.0f} rows; end: {load()})")
    fold, rows = part["fold"] - part["read"], part["fold + rows"] - part["fold"]
    sql = part["inserts"] + part["indexes"] + part["streams"]
    shown = [("read + decode + chain (the floor of any replay)", part["read"]),
             ("the fold's own share (fold - read)", fold),
             ("the rows' share (fold + rows - fold)", rows),
             ("the rows' inserts alone (executemany)", part["inserts"]),
             ("the indexes after, alone", part["indexes"]),
             ("the stream index alone", part["streams"]),
             ("the parts above together", part["read"] + fold + rows + sql),
             ("the replay (median above)", replay)]
    for label, seconds in shown:
        print(f"  {label:50} {seconds:7.2f} CPU-s {seconds / events * 1e6:6.2f} µs/event")
    print(f"  floor without the fold (read + rows + SQL): "
          f"{events / (part['read'] + rows + sql):,.0f} events per CPU-second")


if __name__ == "__main__":
    sys.exit(main())
