"""The CPU each test costs: a pytest plugin and its report (docs/benchmarks.md, "the test
phase's CPU"). Not loaded by default:

    UWF_TEST_CPU=/tmp/cpu python -m pytest -n 2 -p tests.cpukit
    python -m tests.cpukit /tmp/cpu [FILES [TESTS]]
    python -m tests.cpukit --procs /tmp/procs [ROWS]

Each test's CPU is this process's (`time.process_time`, the worker's own, its threads
included) plus that of the child processes it started and waited for (the rusage of
RUSAGE_CHILDREN before and after it). A server a session fixture started is counted
when the session ends, by no test. Each xdist worker writes its rows to
`$UWF_TEST_CPU.<worker>.json`; the report sums them by tier, by file and by test.

`--procs` reads the process census instead (tests/census/sitecustomize.py: a line for
each Python process the run started): how many processes of each program, their CPU,
and which test files started the most.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Generator, Sequence

import pytest

# (node id, own CPU-s, children's CPU-s, wall s), one per test run in this process.
Row = tuple[str, float, float, float]
_ROWS: list[Row] = []


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, None, None]:
    own, children, wall = time.process_time(), _children(), time.monotonic()
    yield
    _ROWS.append((item.nodeid, time.process_time() - own, _children() - children,
                  time.monotonic() - wall))


def pytest_sessionfinish(session: pytest.Session) -> None:
    prefix = os.environ.get("UWF_TEST_CPU")
    if prefix:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{prefix}.{worker}.json", "w", encoding="utf-8") as out:
            json.dump(_ROWS, out)


def report(prefix: str, files: int = 30, tests: int = 30) -> str:
    rows: list[Row] = []
    for path in sorted(glob.glob(f"{glob.escape(prefix)}.*.json")):
        with open(path, encoding="utf-8") as handle:
            rows += [(str(node), float(mine), float(theirs), float(wall))
                     for node, mine, theirs, wall in json.load(handle)]
    own, children = sum(row[1] for row in rows), sum(row[2] for row in rows)
    lines = [f"{len(rows)} tests: {own:.1f} CPU-s in the test processes + {children:.1f} "
             f"in their children = {own + children:.1f}"]
    tiers: defaultdict[str, float] = defaultdict(float)
    by_file: defaultdict[str, float] = defaultdict(float)
    for node, mine, theirs, _ in rows:
        path = node.split("::")[0]
        by_file[path] += mine + theirs
        tiers[path.split("/")[1] if path.count("/") > 1 else "(top)"] += mine + theirs
    lines.append("by tier: " + ", ".join(f"{tier} {cpu:.1f}" for tier, cpu in
                                         sorted(tiers.items(), key=lambda kv: -kv[1])))
    lines += [f"{cpu:8.1f}  {path}" for path, cpu in
              sorted(by_file.items(), key=lambda kv: -kv[1])[:files]]
    lines += [f"{mine + theirs:8.1f}  (own {mine:.1f}, children {theirs:.1f}, wall "
              f"{wall:.1f})  {node}" for node, mine, theirs, wall in
              sorted(rows, key=lambda row: -(row[1] + row[2]))[:tests]]
    return "\n".join(lines)


def program(command: str) -> str:
    """What a census line's command counts as: the script's name, with the subcommand
    for `uwf` and `json-cas`; `python -c` for an interpreter given code (the workers)."""
    words = command.split()
    if not words or words[0] == "-c":
        return "python -c"
    if words[0] in ("uwf", "json-cas") and len(words) > 1 and not words[1].startswith("-"):
        return f"{words[0]} {words[1]}"
    return words[0]


def census(path: str, rows: int = 30) -> str:
    """The process census at `path` summed: processes and CPU-s by program, and by the
    test file that started them (the processes whose environment named the test)."""
    count: defaultdict[str, int] = defaultdict(int)
    cpu: defaultdict[str, float] = defaultdict(float)
    files: defaultdict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            _, _, own, command, test = line.rstrip("\n").split("\t")
            name = program(command)
            count[name] += 1
            cpu[name] += float(own)
            if test and name != "python -c":
                files[test.split("::")[0]][0] += 1
                files[test.split("::")[0]][1] += float(own)
    lines = [f"{sum(count.values())} Python processes, {sum(cpu.values()):.1f} CPU-s of their "
             "own (the workers' included)", "  count   CPU-s  ms each  program"]
    lines += [f"{count[name]:7d} {cpu[name]:7.1f} {1000 * cpu[name] / count[name]:8.1f}  {name}"
              for name in sorted(cpu, key=lambda name: -cpu[name])[:rows]]
    lines.append("  count   CPU-s  test file (processes it started, workers aside)")
    lines += [f"{int(n):7d} {own:7.1f}  {file}" for file, (n, own) in
              sorted(files.items(), key=lambda kv: -kv[1][1])[:rows]]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    if not argv or (argv[0] == "--procs" and len(argv) < 2):
        sys.stderr.write("usage: python -m tests.cpukit PREFIX [FILES [TESTS]] | "
                         "--procs FILE [ROWS]\n")
        return 2
    if argv[0] == "--procs":
        print(census(argv[1], *(int(n) for n in argv[2:3])))
        return 0
    print(report(argv[0], *(int(n) for n in argv[1:3])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
