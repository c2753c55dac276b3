"""`uwf doctor` on a store of 100 runs vs one of 100,000 runs, beside `python -c pass`.

    python bench/doctor.py [--quick] [--size N] [--small N] [--repeat R] [--dir DIR]
                           [--fresh] [--keep] [--wait-quiet S]

Each figure is the median wall time, and the median CPU time (the child's user +
system), of R real child processes: `uwf --store SMALL doctor --json`, `uwf --store
BIG doctor --json` and `python -c pass` with the same interpreter, interleaved so
that all three see the same machine. The stores are the run mix of bench/runs.py
(reused when present), their views built (`registry rebuild`) before timing; every
doctor run must exit 0 (all checks ok or warnings). The children get the bytecode
cache back (kept in DIR/pycache), as an installed uwf has its .pyc files.
Target (issue 34): doctor under a second on 100,000 runs; and it should not grow with
the store (it reads a fixed number of things).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence

from common import (
    begin,
    bytecode_env,
    check,
    data_dir,
    env_with,
    fmt_ms,
    load,
    median,
    print_header,
    run_measured,
    section,
    uwf_exe,
    verdict,
)
from runs import add_store_args, build_current, generate_runs

TARGET_S = 1.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    add_store_args(parser)
    parser.add_argument("--repeat", type=int, help="timed runs of each (default 21; 11 "
                        "with --quick)")
    parser.add_argument("--quick", action="store_true", help="10,000 runs, 11 repeats")
    parser.add_argument("--dir", help="data directory (default bench/out, or $UWF_BENCH_DIR)")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                        help="first wait up to S seconds for idle CPUs (default 0: don't)")
    args = parser.parse_args(argv)
    if args.quick:
        args.size = 10_000
    args.repeat = args.repeat or (11 if args.quick else 21)

    base = data_dir(args.dir)
    work = base / "runs"
    work.mkdir(parents=True, exist_ok=True)
    print_header("doctor: `uwf doctor` against store size", work)
    config = base / "doctor-config"  # no config file: the user's is not read
    config.mkdir(exist_ok=True)
    env = bytecode_env(env_with(XDG_CONFIG_HOME=str(config)), base / "pycache")
    env.pop("UWF_HOME", None)
    roots = {}
    events = {}
    for label, count in (("small", args.small), ("big", args.size)):
        made = generate_runs(work / f"runs-{count}", count, args.word, fresh=args.fresh)
        seconds, status = build_current(made.root, env)
        roots[label], events[label] = made.root, int(status["logSeq"])
        how = "reused" if made.reused else f"written in {made.seconds:.1f} s"
        print(f"{label}: {made.root}  {count:,} runs, {events[label]:,} events ({how}; "
              f"`registry rebuild` {seconds:.1f} s)")

    exe = uwf_exe()
    commands = {
        "small": [exe, "--store", str(roots["small"]), "doctor", "--json"],
        "big": [exe, "--store", str(roots["big"]), "doctor", "--json"],
        "python": [sys.executable, "-c", "pass"],
    }
    for label in ("small", "big"):
        first = run_measured(commands[label], env=env)  # warm the caches; check the output
        check(first, f"uwf doctor ({label})")
        report = json.loads(first.out)
        print(f"{label}: " + ", ".join(f"{item['name']} {item['status']}"
                                       for item in report["checks"]))
    run_measured(commands["python"], env=env)

    begin(args.wait_quiet)
    times: dict[str, list[float]] = {label: [] for label in commands}
    cpus: dict[str, list[float]] = {label: [] for label in commands}
    order = list(commands)
    for index in range(args.repeat):
        for label in order[index % 3:] + order[:index % 3]:
            result = run_measured(commands[label], env=env)
            check(result, label)
            times[label].append(result.wall)
            cpus[label].append(result.cpu)

    section(f"result (medians of {args.repeat} runs each, interleaved; end: {load()})")
    rows = [(f"uwf doctor, {args.small:,} runs ({events['small']:,} events)", "small"),
            (f"uwf doctor, {args.size:,} runs ({events['big']:,} events)", "big"),
            ("python -c pass", "python")]
    for label, key in rows:
        values = times[key]
        print(f"{label:<46} wall {fmt_ms(median(values)):>10}  "
              f"(min {fmt_ms(min(values))}, max {fmt_ms(max(values))})  "
              f"CPU {fmt_ms(median(cpus[key])):>10}")
    big, small = median(times["big"]), median(times["small"])
    print(f"{'ratio big / small':<46} wall {big / small:10.2f}")
    print(f"{'ratio big / python -c pass':<46} wall {big / median(times['python']):10.2f}")
    print(f"target doctor < {TARGET_S:g} s at {args.size:,} runs: {verdict(big < TARGET_S)}")
    if not args.keep:
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
