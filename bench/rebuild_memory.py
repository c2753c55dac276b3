"""`uwf registry rebuild` of run-registry stores: events/s and peak RSS, small beside big.

    python bench/rebuild_memory.py [--quick | --runs SMALL,BIG] [--repeat R] [--dir DIR]
                                   [--fresh] [--wait-quiet S]

Two stores of the run mix `bench/runs.py` writes (`runs.generate_runs`: started,
stepped, failed, blocked, killed, rerun and archived runs over 25 repos; every view
has rows), of about 100,000 and 1,000,000 events (17,000 and 170,000 runs; `--quick`:
10,000 and 40,000 runs). Each is rebuilt by the real CLI, `uwf --store S registry
rebuild` (all five views and the stream index), R times (default 3, in rotating
order), timed end to end, with the child's own CPU time and peak RSS (GNU time's
`%M`). Baseline in the same run: `uwf workflow list` on the big store (the
interpreter, the imports and a store opened: the floor of any command's RSS).

Targets (issue 21): >= 300,000 events/s at the big store; peak RSS <= 300 MiB, and
flat from the small store to the big one (big / small <= 1.15).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from common import (
    add_common_args,
    begin,
    check,
    data_dir,
    env_with,
    fmt_mib,
    fmt_rate,
    load,
    median,
    print_header,
    run_measured,
    section,
    uwf_exe,
    verdict,
)
from runs import generate_runs

RATE_TARGET = 300_000
RSS_TARGET_MIB = 300
FLAT_TARGET = 1.15


def events_in(root: Path) -> int:
    count = 0
    for segment in sorted((root / "events").glob("*.jsonl")):
        with segment.open("rb") as handle:
            count += sum(1 for _ in handle)
    return count


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="10,000 and 40,000 runs")
    parser.add_argument("--runs", default="17000,170000", help="SMALL,BIG runs")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fresh", action="store_true", help="write the stores anew")
    add_common_args(parser)
    args = parser.parse_args(argv)
    sizes = (10_000, 40_000) if args.quick else tuple(int(n) for n in args.runs.split(","))
    where = data_dir(args.dir) / "rebuild-memory"
    where.mkdir(parents=True, exist_ok=True)
    print_header("registry rebuild of run-registry stores: rate and peak RSS", where)
    env = env_with(UWF_DURABILITY="none")
    stores: dict[int, Path] = {}
    events: dict[int, int] = {}
    for runs in sizes:
        root = where / f"runs-{runs}"
        made = generate_runs(root, runs, "timeout", fresh=args.fresh)
        stores[runs] = root
        events[runs] = events_in(root)
        print(f"store of {runs:,} runs: {events[runs]:,} events"
              f"{' (reused)' if made.reused else ''}")
    begin(args.wait_quiet)
    walls: dict[int, list[float]] = {runs: [] for runs in sizes}
    cpus: dict[int, list[float]] = {runs: [] for runs in sizes}
    rss: dict[int, list[int]] = {runs: [] for runs in sizes}
    floor: list[int] = []
    for round_ in range(args.repeat):
        order = list(sizes) if round_ % 2 == 0 else list(reversed(sizes))
        for runs in order:
            result = run_measured([uwf_exe(), "--store", str(stores[runs]), "registry",
                                   "rebuild"], env=env, own_rss=True)
            check(result, "registry rebuild")
            walls[runs].append(result.wall)
            cpus[runs].append(result.cpu)
            rss[runs].append(result.maxrss_kib)
        base = run_measured([uwf_exe(), "--store", str(stores[sizes[-1]]), "workflow", "list"],
                            env=env, own_rss=True)
        check(base, "workflow list")
        floor.append(base.maxrss_kib)
        print(f"  round {round_ + 1}/{args.repeat} done ({load()})")
    section(f"result: medians of {args.repeat} (end: {load()})")
    print(f"{'runs':>8} {'events':>10} {'wall':>8} {'CPU-s':>7} {'events/s':>10} "
          f"{'per CPU-s':>10} {'peak RSS':>10}")
    for runs in sizes:
        wall, cpu = median(walls[runs]), median(cpus[runs])
        print(f"{runs:>8,} {events[runs]:>10,} {wall:>7.2f}s {cpu:>7.2f} "
              f"{fmt_rate(events[runs] / wall):>10} {fmt_rate(events[runs] / cpu):>10} "
              f"{fmt_mib(int(median(rss[runs]))):>10}")
    print(f"baseline `uwf workflow list` on the big store: peak RSS "
          f"{fmt_mib(int(median(floor)))}")
    small, big = sizes
    rate = events[big] / median(walls[big])
    peak = median(rss[big]) / 1024
    flat = median(rss[big]) / median(rss[small])
    print(f"target >= {RATE_TARGET:,} events/s (big store): {verdict(rate >= RATE_TARGET)} "
          f"({rate:,.0f}/s)")
    print(f"target peak RSS <= {RSS_TARGET_MIB} MiB (big store): "
          f"{verdict(peak <= RSS_TARGET_MIB)} ({peak:.0f} MiB)")
    print(f"target flat RSS, big / small <= {FLAT_TARGET}: {verdict(flat <= FLAT_TARGET)} "
          f"({flat:.2f}, {events[big] / events[small]:.1f} x the events)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
