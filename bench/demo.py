"""`uwf demo`'s wall time: the figure README.md and docs/audit.md quote.

    python bench/demo.py [--runs R]

Each run is a real `uwf demo` process (piped: its JSON document), timed from start to
exit; printed: the median, the fastest and the slowest wall time, and the median CPU
time (the child's user + system). The demo runs a workflow with `uwf-mock` (a process
per step), rebuilds views, syncs and verifies an archive and forges four logs, so its
time is mostly process start-ups.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from common import check, fmt_ms, load, machine, median, run_measured, uwf_exe


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="demo runs (default 5)")
    args = parser.parse_args(argv)
    walls, cpus = [], []
    for _ in range(max(1, args.runs)):
        result = run_measured([uwf_exe(), "demo"])
        check(result, "uwf demo")
        walls.append(result.wall)
        cpus.append(result.cpu)
    print(f"uwf demo, {len(walls)} runs ({machine()['cpu']}, {load()})")
    print(f"  wall: median {fmt_ms(median(walls))}, fastest {fmt_ms(min(walls))}, "
          f"slowest {fmt_ms(max(walls))}")
    print(f"  CPU (user + sys): median {fmt_ms(median(cpus))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
