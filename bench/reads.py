"""In-process reads against store size (issue 21): every listing at 100,000 runs vs 100.

    python bench/reads.py [--quick] [--size N] [--small N] [--word WORD] [--repeat R]
                          [--dir DIR] [--fresh] [--keep] [--wait-quiet S]

Two stores of `bench/runs.py`'s mix of runs (`generate_runs`, the stores
`bench/dashboard.py` uses: reused when present under DIR/dashboard), their views
built once, untimed. Each read is one CLI call in this process, `uwf.cli.main.main`
with `--json` (stdout captured): the store opened, the views checked against the
log, the read, the payload rendered; imports excluded (done before timing). The
calls: `run search --text WORD`, `run list --status S` for failed, running,
stalled and queued, `history`, `thread list`, `queue list`, `run counts`, each
with a page limit, cut to what the small store can fill (both stores print the
same rows: a longer page costs more to render whatever the store's size). R
calls of each on each store (default 15; 7 with --quick), interleaved in rotating
order; medians, and big / small. The baseline is the same call on the small
store, in the same rounds.

Target (issue 21): every listing <= 1.5 x "whatever the number of matches".
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from common import add_common_args, begin, data_dir, load, pressure, print_header, section
from runs import add_store_args, build_current, generate_runs

TARGET = 1.5


def calls(word: str) -> list[list[str]]:
    return [["run", "search", "--text", word, "--limit", "20"],
            ["run", "list", "--status", "failed", "--limit", "50"],
            ["run", "list", "--status", "running", "--limit", "50"],
            ["run", "list", "--status", "stalled", "--limit", "50"],
            ["run", "list", "--status", "queued", "--limit", "50"],
            ["history", "--limit", "20"],
            ["thread", "list", "--limit", "50"],
            ["queue", "list", "--limit", "20"],
            ["run", "counts"]]


def timed(root: Path, argv: list[str]) -> tuple[float, float]:
    """The call's wall time and CPU time (this process's), seconds."""
    start_cpu = time.process_time()
    seconds = called(root, argv)[0]
    return seconds, time.process_time() - start_cpu


def called(root: Path, argv: list[str]) -> tuple[float, Any]:
    """The call's wall time and its JSON payload."""
    from uwf.cli.main import main

    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main(["--store", str(root), *argv, "--json"])
    seconds = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"bench: `uwf {' '.join(argv)}` exited {code} on {root}")
    return seconds, json.loads(out.getvalue())


def rows(payload: Any) -> int | None:
    """The rows a listing printed (None: not a listing)."""
    if isinstance(payload, dict):
        for key in ("runs", "entries"):
            if isinstance(payload.get(key), list):
                return len(payload[key])
        return None
    return len(payload) if isinstance(payload, list) else None


def same_page(roots: dict[str, Path], argv: list[str]) -> list[str]:
    """`argv` with its --limit cut to what the small store can fill, so both stores
    print the same number of rows: a page of 50 costs more to render than a page of
    9 whatever the store's size, and that is not what is measured."""
    if "--limit" not in argv:
        return argv
    small = rows(called(roots["small"], argv)[1])
    at = argv.index("--limit") + 1
    if small is None or small == 0 or small >= int(argv[at]):
        return argv  # (nothing on the small store: the rows check below says if it matters)
    return [*argv[:at], str(small), *argv[at + 1:]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    add_store_args(parser)
    parser.add_argument("--repeat", type=int,
                        help="timed calls of each read on each store (default 15; 7 with "
                             "--quick)")
    parser.add_argument("--quick", action="store_true", help="10,000 runs, 7 repeats")
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.size = 10_000
    repeat = args.repeat or (7 if args.quick else 15)
    work = data_dir(args.dir) / "dashboard"
    work.mkdir(parents=True, exist_ok=True)
    print_header("reads: one CLI call in process against store size", work)
    roots: dict[str, Path] = {}
    for size, count in (("small", args.small), ("big", args.size)):
        made = generate_runs(work / f"runs-{count}", count, args.word, fresh=args.fresh)
        build_current(made.root, dict(os.environ))
        roots[size] = made.root
        print(f"{size}: {made.root} ({count:,} runs{', reused' if made.reused else ''})")
    cwd = work / "cwd"  # in no repository: every call's scope is the whole store
    cwd.mkdir(exist_ok=True)
    os.chdir(cwd)
    reads = [same_page(roots, argv_) for argv_ in calls(args.word)]
    for argv_ in reads:  # untimed: imports, caches, and each page's rows checked once
        shown = {size: rows(called(root, argv_)[1]) for size, root in roots.items()}
        if shown["small"] != shown["big"]:
            raise SystemExit(f"bench: `uwf {' '.join(argv_)}` lists {shown} rows")
    begin(args.wait_quiet)
    print(pressure())
    times: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    for round_ in range(repeat):
        order = reads[round_ % len(reads):] + reads[:round_ % len(reads)]
        for argv_ in order:
            for size in (("small", "big") if round_ % 2 else ("big", "small")):
                wall, cpu = timed(roots[size], argv_)
                times.setdefault((size, " ".join(argv_)), []).append(wall)
                cpus.setdefault((size, " ".join(argv_)), []).append(cpu)
    section(f"result (medians of {repeat}; end: {load()}; {pressure()})")
    width = max(len(" ".join(argv_)) for argv_ in reads)
    print(f"{'call':<{width}} {'small':>9} {'big':>9} {'ratio':>6}  {'CPU small':>9} "
          f"{'CPU big':>9} {'ratio':>6}  target <= {TARGET} (wall)")
    met = True
    for argv_ in reads:
        name = " ".join(argv_)
        small = statistics.median(times[("small", name)])
        big = statistics.median(times[("big", name)])
        cpu_small = statistics.median(cpus[("small", name)])
        cpu_big = statistics.median(cpus[("big", name)])
        ratio = big / small
        met = met and ratio <= TARGET
        print(f"{name:<{width}} {small * 1e3:7.1f}ms {big * 1e3:7.1f}ms {ratio:6.2f}  "
              f"{cpu_small * 1e3:7.1f}ms {cpu_big * 1e3:7.1f}ms "
              f"{cpu_big / max(cpu_small, 1e-9):6.2f}  "
              f"{'MET' if ratio <= TARGET else 'NOT MET'}")
    print(f"\nevery listing <= {TARGET} x: {'MET' if met else 'NOT MET'}")
    if not args.keep:
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
