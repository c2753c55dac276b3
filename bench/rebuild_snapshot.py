"""`uwf registry rebuild` from a snapshot and a 1 % tail: events/s equivalent, peak RSS.

    python bench/rebuild_snapshot.py [--quick | --runs R] [--tail PCT] [--repeat N]
                                     [--dir DIR] [--fresh] [--wait-quiet S] [--no-full]

A store of the run mix `bench/runs.py` writes (`runs.generate_runs`; 170,000 runs,
about 1,040,000 events; `--quick`: 17,000 runs, about 104,000), and a snapshot of its
views at 99 % of its log (`--tail 1`): a copy of the store cut at the last whole
batch before that line, its views rebuilt (untimed), `uwf registry snapshot` taken
there and moved into the big store's `views/`. The log's prefix is the same bytes, so
the big log holds the snapshot's checkpoint.

Timed, each a real CLI process (end to end: interpreter, imports, restore, fold, the
views' commit), with the child's own CPU time and peak RSS (GNU time's `%M`), in
rotating order, `--repeat` times:
- `snapshot`: `uwf registry rebuild` with the snapshot kept: it is restored over the
  views file (SQLite's backup API) and the 1 % tail folded;
- `reader`: the views file deleted, `uwf run list --limit 1`: a fresh reader copies the
  snapshot in and folds the tail (and makes the runs' indexes: a snapshot holds the
  runs' and the threads' rows without them, uwf/engine/readindex.py);
- after each `snapshot`, `first`: the first `uwf run list --limit 1` on the views it
  left, which makes the runs' indexes (the cost a rebuild leaves to its first listing);
Baselines in the same run: `full`, `uwf registry rebuild` with the snapshot moved aside
(the whole log replayed: once, unless `--no-full`); `cp`, copying the snapshot file
(`cp`, the floor of any restore); `start`, `uwf workflow list` (interpreter, imports,
a store opened: the floor of any command).

Targets (issue 30): rebuild from a snapshot + a 1 % tail >= 1,000,000 events/s
equivalent (all events of the log / wall time), peak RSS <= 300 MiB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec
from common import (
    RunResult,
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

RATE_TARGET = 1_000_000
RSS_TARGET_MIB = 300


class _Batch(msgspec.Struct):
    batch: tuple[int, int]


def cut_at(source: Path, copy: Path, keep: int) -> int:
    """`copy`: the store `source` (log and CAS) with its log cut after the last whole
    batch at or before line `keep`; the seq it ends at."""
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("views"))
    decode = msgspec.json.Decoder(_Batch).decode
    seq = 0
    end = 0  # the last seq that ends a batch
    segments = sorted((copy / "events").glob("*.jsonl"))
    for number, segment in enumerate(segments):
        kept: list[bytes] = []
        with segment.open("rb") as handle:
            for line in handle:
                if seq >= keep:
                    break
                seq += 1
                kept.append(line)
                k, n = decode(line).batch
                if k == n:
                    end = seq
        if seq >= keep:
            over = seq - end  # lines of a batch cut in two: dropped
            segment.write_bytes(b"".join(kept[:len(kept) - over]))
            for later in segments[number + 1:]:
                later.unlink()
            return end
    return end


def events_in(root: Path) -> int:
    count = 0
    for segment in sorted((root / "events").glob("*.jsonl")):
        with segment.open("rb") as handle:
            count += sum(1 for _ in handle)
    return count


def prepare(root: Path, events: int, tail: float, env: dict[str, str]) -> Path:
    """A snapshot of `root`'s views at (1 - tail) of its log, in `root`/views; its path."""
    marker = root / "snapshot-bench.json"
    wanted = {"events": events, "tail": tail}
    kept = sorted((root / "views").glob("snapshot-*.sqlite3"))
    if kept and marker.exists() and json.loads(marker.read_text("utf-8")) == wanted:
        return kept[-1]
    prefix = root.parent / f"{root.name}-prefix"
    seq = cut_at(root, prefix, int(events * (1 - tail / 100)))
    print(f"snapshot: views of the first {seq:,} events rebuilt (untimed) ...", flush=True)
    check(run_measured([uwf_exe(), "--store", str(prefix), "registry", "rebuild"], env=env),
          "prefix rebuild")
    taken = run_measured([uwf_exe(), "--store", str(prefix), "--json", "registry",
                          "snapshot"], env=env)
    check(taken, "registry snapshot")
    made = Path(json.loads(taken.out)["snapshot"])
    (root / "views").mkdir(exist_ok=True)
    for old in (root / "views").glob("snapshot-*.sqlite3"):
        old.unlink()
    target = root / "views" / made.name
    shutil.move(made, target)
    shutil.rmtree(prefix)
    marker.write_text(json.dumps(wanted), "utf-8")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="17,000 runs (~104,000 events)")
    parser.add_argument("--runs", type=int, default=170_000, help="runs (default 170,000)")
    parser.add_argument("--tail", type=float, default=1.0, help="the tail, %% of the log")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fresh", action="store_true", help="write the store anew")
    parser.add_argument("--no-full", action="store_true", help="skip the full replay")
    add_common_args(parser)
    args = parser.parse_args(argv)
    runs = 17_000 if args.quick else args.runs
    where = data_dir(args.dir) / "rebuild-snapshot"
    where.mkdir(parents=True, exist_ok=True)
    print_header("registry rebuild from a snapshot and a tail: rate and peak RSS", where)
    env = env_with(UWF_DURABILITY="none")
    root = where / f"runs-{runs}"
    made = generate_runs(root, runs, "timeout", fresh=args.fresh)
    events = events_in(root)
    snapshot = prepare(root, events, args.tail, env)
    seq = int(snapshot.stem.split("-")[1])
    print(f"store: {runs:,} runs, {events:,} events{' (reused)' if made.reused else ''}; "
          f"snapshot at seq {seq:,} ({snapshot.stat().st_size / 2**20:.0f} MiB), tail "
          f"{events - seq:,} events ({(events - seq) / events:.1%})")
    views = root / "views" / "views.sqlite3"
    aside = root / "aside"

    def remove_views() -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{views}{suffix}").unlink(missing_ok=True)

    def rebuild() -> RunResult:
        result = run_measured([uwf_exe(), "--store", str(root), "--json", "registry",
                               "rebuild"], env=env, own_rss=True)
        check(result, "registry rebuild")
        payload = json.loads(result.out)
        if payload["checkpoint"] != events:
            sys.exit(f"bench: rebuild reached {payload['checkpoint']}, not {events}")
        return result

    def from_snapshot() -> RunResult:
        result = rebuild()
        if json.loads(result.out).get("fromSnapshot") != seq:
            sys.exit(f"bench: the rebuild did not restore the snapshot: {result.out!r}")
        listed = run_measured([uwf_exe(), "--store", str(root), "--json", "run", "list",
                               "--limit", "1"], env=env, own_rss=True)
        check(listed, "run list")
        results["first"].append(listed)
        return result

    def reader() -> RunResult:
        remove_views()
        result = run_measured([uwf_exe(), "--store", str(root), "--json", "run", "list",
                               "--limit", "1"], env=env, own_rss=True)
        check(result, "run list")
        return result

    def full() -> RunResult:
        aside.mkdir(exist_ok=True)
        shutil.move(snapshot, aside / snapshot.name)
        try:
            result = rebuild()
        finally:
            shutil.move(aside / snapshot.name, snapshot)
        if "fromSnapshot" in json.loads(result.out):
            sys.exit("bench: the full replay restored a snapshot")
        return result

    def copy() -> RunResult:
        target = where / "copy.sqlite3"
        result = run_measured(["cp", str(snapshot), str(target)], own_rss=True)
        check(result, "cp")
        target.unlink()
        return result

    def start() -> RunResult:
        result = run_measured([uwf_exe(), "--store", str(root), "workflow", "list"], env=env,
                              own_rss=True)
        check(result, "workflow list")
        return result

    sides = {"snapshot": from_snapshot, "reader": reader, "cp": copy, "start": start}
    check(run_measured([uwf_exe(), "--store", str(root), "registry", "refresh"], env=env),
          "refresh")  # views present for the first in-place restore
    begin(args.wait_quiet)
    results: dict[str, list[RunResult]] = {name: [] for name in (*sides, "full", "first")}
    if not args.no_full:
        results["full"].append(full())
        print(f"  full replay: {results['full'][-1].wall:.2f} s ({load()})", flush=True)
    for round_ in range(args.repeat):
        names = list(sides)
        names = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in names:
            results[name].append(sides[name]())
        print(f"  round {round_ + 1}/{args.repeat}: "
              + ", ".join(f"{name} {results[name][-1].wall:.2f} s" for name in sides)
              + f" ({load()})", flush=True)
    section(f"result: medians of {args.repeat} (full: {len(results['full'])} run; end: "
            f"{load()})")
    print(f"{'':34} {'wall':>8} {'CPU-s':>7} {'events/s eq.':>13} {'per CPU-s':>11} "
          f"{'peak RSS':>10}")
    labels = {"snapshot": "rebuild: snapshot + tail", "reader": "fresh reader: snapshot + tail",
              "first": "then the first `run list`",
              "full": "baseline: rebuild, whole log", "cp": "baseline: cp of the snapshot",
              "start": "baseline: `uwf workflow list`"}
    for name, label in labels.items():
        if not results[name]:
            continue
        wall = median([r.wall for r in results[name]])
        cpu = median([r.cpu for r in results[name]])
        rss = max(r.maxrss_kib for r in results[name])
        rates = (f"{fmt_rate(events / wall):>13} {fmt_rate(events / cpu):>11}"
                 if name not in ("cp", "start", "first") else f"{'':>13} {'':>11}")
        print(f"{label:34} {wall:7.2f}s {cpu:7.2f} {rates} {fmt_mib(rss):>10}")
    wall = median([r.wall for r in results["snapshot"]])
    peak = max(r.maxrss_kib for r in results["snapshot"]) / 1024
    if results["full"]:
        print(f"rebuild from the snapshot vs the whole log: "
              f"{median([r.wall for r in results['full']]) / wall:.1f} x faster")
    print(f"target >= {RATE_TARGET:,} events/s equivalent: {verdict(events / wall >= RATE_TARGET)}"
          f" ({events / wall:,.0f}/s)")
    print(f"target peak RSS <= {RSS_TARGET_MIB} MiB: {verdict(peak <= RSS_TARGET_MIB)} "
          f"({peak:.0f} MiB)")
    remove_views()
    return 0


if __name__ == "__main__":
    sys.exit(main())
