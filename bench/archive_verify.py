"""`uwf archive verify`: peak memory against the log's size, for two shapes of log.

    python bench/archive_verify.py [--events N ...] [--shapes short,long] [--rss-runs R]
                                   [--dir DIR] [--fresh] [--keep] [--wait-quiet S]

For each size and shape, a store is written in bulk (no fsync, views not built),
archived once with `uwf archive sync` (untimed beyond one figure, durability
none), then `uwf --store S archive verify A` runs R times under GNU time for its
own peak RSS (`common.peak_rss`), beside `python -c pass` (the same interpreter).
The verify must say ok. Shapes:

- `short`: many short runs, as `common.generate_threads` writes them (a planner
  step each, 4 events a run, a tenth killed): the number of runs grows with the log.
- `long`: 100 runs of many steps each (`thread.step_started` + `thread.stepped`,
  the runs interleaved step by step), ended: the lines per run grow with the log.

Issue 16's figure: 564 MiB at 220,000 events before verify was streamed. What may
grow now: a few hundred bytes per run (its fold, its summary's digest for
index.json), never the lines. Stores live in DIR/archive-verify and are deleted at
the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from common import (
    BASE_MS,
    _bench_cas,
    _example_payload,
    add_common_args,
    begin,
    bulk_log,
    bytecode_env,
    check,
    data_dir,
    env_with,
    fmt_bytes,
    generate_threads,
    log_bytes,
    median,
    peak_rss,
    print_header,
    run_measured,
    section,
    uwf_exe,
)

LONG_RUNS = 100


def generate_long_runs(root: Path, events: int) -> int:
    """`LONG_RUNS` runs of examples/solve-issue.yaml stepping the planner over and over,
    interleaved step by step, each ended in its last step's batch; about `events`
    events in all. The events written."""
    from ulid import ULID

    from uwf.cas.builtins import builtin_hash
    from uwf.engine.events import FORMAT_VERSION, StoreCreated
    from uwf.threads.events import (
        ThreadEnded,
        ThreadStarted,
        ThreadStepped,
        ThreadStepStarted,
    )
    from uwf.workflows.events import WorkflowRegistered

    shutil.rmtree(root, ignore_errors=True)
    cas = _bench_cas(root)
    payload = _example_payload(cas)
    workflow = cas.put(builtin_hash("Workflow"), payload)
    name = str(payload["name"])
    begin_node = cas.put(builtin_hash("StartNode"), {"workflow": workflow, "prompt": "Loop"})
    output = cas.put(payload["roles"]["planner"]["meta"], {"status": "ready", "plan": "again"})
    steps = max(1, (events - 2 - 2 * LONG_RUNS) // (2 * LONG_RUNS))
    ms = BASE_MS
    with bulk_log(root) as writer:
        writer.command([("store", StoreCreated(format=FORMAT_VERSION)),
                        (f"workflow/{name}", WorkflowRegistered(name, workflow, None))], ms)
        threads = []
        for _ in range(LONG_RUNS):
            ms += 3
            thread = str(ULID.from_timestamp(ms))
            threads.append(thread)
            writer.command([(f"thread/{thread}", ThreadStarted(workflow, name, begin_node,
                                                               "/work/bench-repo"))], ms)
        for step in range(steps):
            for thread in threads:
                ms += 2
                subject = f"thread/{thread}"
                step_id = str(ULID.from_timestamp(ms))
                writer.command([(subject, ThreadStepStarted(step_id, "planner", "Loop",
                                                            "mock", ms + 600_000))], ms)
                stepped = (subject, ThreadStepped(step_id, begin_node, "planner", "ready",
                                                  output))
                if step == steps - 1:
                    writer.command([stepped, (subject, ThreadEnded("end"))], ms + 1)
                else:
                    writer.command([stepped], ms + 1)
        written: int = writer.seq
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--events", type=int, nargs="+", default=[13_750, 55_000, 220_000],
                        help="log sizes, in events (default 13,750 55,000 220,000)")
    parser.add_argument("--shapes", default="short,long",
                        help="short (many runs), long (100 runs), or both (default)")
    parser.add_argument("--rss-runs", type=int, default=3,
                        help="verify runs per store, under GNU time (default 3)")
    add_common_args(parser)
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    args = parser.parse_args(argv)

    work = data_dir(args.dir) / "archive-verify"
    work.mkdir(parents=True, exist_ok=True)
    print_header("archive verify: peak RSS against the log's size", work)
    env = bytecode_env(env_with(UWF_DURABILITY="none"), work / "pycache")
    begin(args.wait_quiet)
    baseline = median([float(peak_rss([sys.executable, "-c", "pass"], env=env))
                       for _ in range(args.rss_runs)])
    print(f"baseline: `python -c pass` peak RSS {baseline / 1024:.1f} MiB")
    rows = []
    for shape in args.shapes.split(","):
        section(f"shape {shape}")
        for wanted in args.events:
            root, folder = work / f"{shape}-{wanted}", work / f"{shape}-{wanted}-archive"
            shutil.rmtree(folder, ignore_errors=True)
            start = time.perf_counter()
            if shape == "short":
                made = generate_threads(root, max(1, wanted // 4), 10, fresh=True)
                events, runs = made.events, made.threads
            else:
                events, runs = generate_long_runs(root, wanted), LONG_RUNS
            generated = time.perf_counter() - start
            start = time.perf_counter()
            check(run_measured([uwf_exe(), "--store", str(root), "archive", "sync",
                                str(folder)], env=env), "uwf archive sync")
            synced = time.perf_counter() - start
            verify = [uwf_exe(), "--store", str(root), "archive", "verify", str(folder)]
            timed = run_measured(verify, env=env)
            check(timed, "uwf archive verify")
            if not json.loads(timed.out)["ok"]:
                sys.exit(f"bench: verify of {folder} is not ok")
            rss = median([float(peak_rss(verify, env=env)) for _ in range(args.rss_runs)])
            print(f"{events:>9,} events, {runs:>6,} runs: log {fmt_bytes(log_bytes(root))}, "
                  f"generated {generated:.1f} s, synced {synced:.1f} s; verify "
                  f"{timed.wall:.1f} s, peak RSS {rss / 1024:.1f} MiB "
                  f"({(rss - baseline) / 1024:.1f} MiB over the baseline)")
            rows.append((shape, events, runs, timed.wall, rss))
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
                shutil.rmtree(folder, ignore_errors=True)
                (root.parent / f"{root.name}.json").unlink(missing_ok=True)
    section("summary")
    print(f"| shape | events | runs | verify wall | peak RSS | over `python -c pass` "
          f"({baseline / 1024:.1f} MiB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for shape, events, runs, wall, rss in rows:
        print(f"| {shape} | {events:,} | {runs:,} | {wall:.1f} s | {rss / 1024:.1f} MiB | "
              f"{(rss - baseline) / 1024:.1f} MiB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
