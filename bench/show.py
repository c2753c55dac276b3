"""`uwf workflow show NAME` on a ~10-event store vs a 1,000,000-event store.

    python bench/show.py [--quick | --events N] [--runs R] [--dir DIR] [--fresh] [--wait-quiet S]
                         [--no-bytecode-cache] [--instructions [--baseline-tree DIR]]

Each figure is the median wall time, and the median CPU time (the child's user +
system), of R real child processes (R >= 15): `uwf --store SMALL workflow show
wf-0002`, `uwf --store BIG workflow show wf-0042`, and `python -c pass` with the
same interpreter, interleaved so that all three see the same machine. Both stores'
views are brought up to date (`uwf registry refresh`) before timing, and checked
valid with `uwf registry show`. The children get the bytecode cache back (kept in
DIR/pycache), as an installed uwf has its .pyc files; a shell exporting
PYTHONDONTWRITEBYTECODE=1 would otherwise have them compile stale modules anew.
The 1M log is the one bench/rebuild.py generates (reused when present).
Targets: show(1M) / show(10) <= 1.25 (issue 6), and show <= 3.5 x `python -c pass`
(issue 30, item 6; it was 6 x in issue 21). Beside them, the floor: the same
interpreter importing msgspec as the CLI does (without typing_extensions,
`uwf.cli.entry.lean_msgspec`), the one dependency every command needs; and the
floor of a read without msgspec (bench/showfloor.py: the checks and reads such a
path would make at the least, with the standard library, xxhash and uwf's hashing
module; not built: docs/benchmarks.md says why), its output checked to be byte for
byte the command's.

With `--baseline-tree DIR` (an older uwf's source, say `git archive REV uwf | tar -x -C
DIR`), the instructions section also counts the same `uwf workflow show` with that
tree first on PYTHONPATH (the same console script, interpreter and stores): a before
and after from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from common import (
    add_common_args,
    begin,
    bytecode_env,
    check,
    data_dir,
    fmt_ms,
    generate_log,
    load,
    median,
    print_header,
    run_measured,
    section,
    uwf_exe,
    verdict,
)

TARGET_RATIO = 1.25
TARGET_VS_PYTHON = 3.5
# msgspec imported as `uwf.cli.entry.lean_msgspec` does: typing_extensions made absent.
FLOOR = "import sys; sys.modules['typing_extensions'] = None; import msgspec"
SMALL_EVENTS = 10


def make_current(root: Path, env: dict[str, str] | None) -> int:
    """Bring the views up to date (untimed) and check they say so; return the log seq."""
    check(run_measured([uwf_exe(), "--store", str(root), "registry", "refresh"], env=env),
          "uwf registry refresh")
    shown = run_measured([uwf_exe(), "--store", str(root), "registry", "show"], env=env)
    check(shown, "uwf registry show")
    status = json.loads(shown.out)
    if status["status"] != "valid":
        sys.exit(f"bench: views of {root} are {status['status']} after refresh")
    return int(status["logSeq"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--events", type=int, default=1_000_000,
                        help="events in the big store (default 1M)")
    parser.add_argument("--runs", type=int, help="runs of each (default 21; 15 with --quick; "
                        "at least 15)")
    parser.add_argument("--quick", action="store_true", help="200,000-event big store")
    add_common_args(parser)
    parser.add_argument("--fresh", action="store_true", help="regenerate the logs")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE if set")
    parser.add_argument("--instructions", action="store_true",
                        help="also count each command's instructions under valgrind's "
                             "callgrind (median of 3): a figure the machine's load cannot "
                             "blur")
    parser.add_argument("--baseline-tree", type=Path,
                        help="with --instructions: also count `uwf workflow show` with "
                             "this older uwf source tree (holding uwf/) on PYTHONPATH")
    args = parser.parse_args(argv)
    if args.quick:
        args.events = 200_000
    args.runs = max(args.runs or (15 if args.quick else 21), 15)

    base = data_dir(args.dir)
    print_header("show: `uwf workflow show NAME` against log size", base)
    small = generate_log(base / f"log-{SMALL_EVENTS}", SMALL_EVENTS, names=5, fresh=args.fresh)
    big = generate_log(base / f"log-{args.events}", args.events, fresh=args.fresh)
    env = None if args.no_bytecode_cache else bytecode_env(dict(os.environ), base / "pycache")
    print("bytecode: " + ("as inherited" if env is None else f"cached in {base / 'pycache'}"))
    small_seq = make_current(small.root, env)
    big_seq = make_current(big.root, env)
    print(f"small store: {small.root} ({small_seq} events, views valid)")
    print(f"big store:   {big.root} ({big_seq:,} events, views valid)")

    exe = uwf_exe()
    commands = {
        "small": [exe, "--store", str(small.root), "workflow", "show", "wf-0002"],
        "big": [exe, "--store", str(big.root), "workflow", "show", "wf-0042"],
        "python": [sys.executable, "-c", "pass"],
        "floor": [sys.executable, "-c", FLOOR],
        "bare": [sys.executable, str(Path(__file__).with_name("showfloor.py")),
                 str(small.root), "wf-0002"],
    }
    for label in ("small", "big"):
        first = run_measured(commands[label], env=env)  # warm the caches; check the output
        check(first, f"uwf workflow show ({label})")
        if json.loads(first.out)["name"] not in ("wf-0002", "wf-0042"):
            sys.exit(f"bench: unexpected show output for {label}")
    run_measured(commands["python"], env=env)
    run_measured(commands["floor"], env=env)
    shown = run_measured(commands["small"], env=env).out
    bare = run_measured(commands["bare"], env=env)
    check(bare, "bare")
    if bare.out != shown:
        sys.exit("bench: showfloor.py does not print what uwf workflow show prints")

    begin(args.wait_quiet)
    times: dict[str, list[float]] = {label: [] for label in commands}
    cpus: dict[str, list[float]] = {label: [] for label in commands}
    order = list(commands)
    for index in range(args.runs):
        rotated = order[index % len(order):] + order[:index % len(order)]
        for label in rotated:
            result = run_measured(commands[label], env=env)
            check(result, label)
            times[label].append(result.wall)
            cpus[label].append(result.cpu)

    show_small = median(times["small"])
    show_big = median(times["big"])
    python = median(times["python"])
    ratio = show_big / show_small
    section(f"result (medians of {args.runs} runs each, interleaved; end: {load()})")
    rows = [(f"uwf workflow show, {small_seq:,} events", "small"),
            (f"uwf workflow show, {big_seq:,} events", "big"),
            ("python -c pass", "python"),
            ("python importing msgspec (the floor)", "floor"),
            ("the read without msgspec (showfloor)", "bare")]
    for label, key in rows:
        values = times[key]
        print(f"{label:<36} wall {fmt_ms(median(values)):>10}  "
              f"(min {fmt_ms(min(values))}, max {fmt_ms(max(values))})  "
              f"CPU {fmt_ms(median(cpus[key])):>10}")
    cpu_python = median(cpus["python"])
    print(f"{'ratio big / small':<36} wall {ratio:10.2f}  "
          f"CPU {median(cpus['big']) / median(cpus['small']):10.2f}")
    print(f"{'ratio show(small) / python':<36} wall {show_small / python:10.2f}  "
          f"CPU {median(cpus['small']) / cpu_python:10.2f}")
    print(f"{'ratio show(big) / python':<36} wall {show_big / python:10.2f}  "
          f"CPU {median(cpus['big']) / cpu_python:10.2f}")
    print(f"target big/small <= {TARGET_RATIO}: {verdict(ratio <= TARGET_RATIO)}")
    worst = max(show_small, show_big) / python
    print(f"target show <= {TARGET_VS_PYTHON:g} x python -c pass:  "
          f"{verdict(worst <= TARGET_VS_PYTHON)} (worst of the two: {worst:.2f} x; "
          f"the floor {median(times['floor']) / python:.2f} x)")
    if args.instructions:
        counted = {label: instructions(argv, env) for label, argv in commands.items()}
        if args.baseline_tree is not None:
            older = baseline_env(env, args.baseline_tree)
            for label in ("small", "big"):
                check(run_measured(commands[label], env=older), f"baseline {label}")  # warm
                counted[f"before-{label}"] = instructions(commands[label], older)
            rows[2:2] = [(f"  with {args.baseline_tree}, {small_seq:,} events", "before-small"),
                         (f"  with {args.baseline_tree}, {big_seq:,} events", "before-big")]
        section("instructions (valgrind --tool=callgrind, user space, median of 3)")
        for label, key in rows:
            print(f"{label:<36} {counted[key] / 1e6:10.1f} M  "
                  f"{counted[key] / counted['python']:6.2f} x python -c pass")
        counted_worst = max(counted["small"], counted["big"]) / counted["python"]
        print(f"target show <= {TARGET_VS_PYTHON:g} x python -c pass, in instructions: "
              f"{verdict(counted_worst <= TARGET_VS_PYTHON)} ({counted_worst:.2f} x)")
    return 0


def baseline_env(env: dict[str, str] | None, tree: Path) -> dict[str, str]:
    """`env` with the older uwf source `tree` first on PYTHONPATH (checked to hold uwf/)."""
    if not (tree / "uwf" / "__init__.py").is_file():
        sys.exit(f"bench: {tree} holds no uwf/ package")
    older = dict(os.environ if env is None else env)
    older["PYTHONPATH"] = os.pathsep.join(
        [str(tree.resolve()), *filter(None, [older.get("PYTHONPATH")])])
    return older


def instructions(argv: Sequence[str], env: dict[str, str] | None) -> int:
    """The instructions a command runs in user space (callgrind's `Collected`), the median
    of three runs: unlike its time, the same on a busy machine as on a quiet one."""
    import re
    import shutil
    import subprocess

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        sys.exit("bench: --instructions needs valgrind on PATH")
    exe = argv[0] if argv[0] == sys.executable else sys.executable
    rest = list(argv[1:]) if argv[0] == sys.executable else [argv[0], *argv[1:]]
    counts = []
    for _ in range(3):
        done = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null",
                               exe, *rest], env=env, capture_output=True, text=True, check=True)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            sys.exit(f"bench: no instruction count from callgrind:\n{done.stderr}")
        counts.append(int(found.group(1)))
    return sorted(counts)[1]


if __name__ == "__main__":
    sys.exit(main())
