"""`uwf store copy` of a folder store into PostgreSQL (issue 31): events/s, verify included.

    python bench/store_copy.py [--events N | --quick] [--rounds R] [--profile]
                               [--dir DIR] [--wait-quiet S]

A folder store of N events (`common.generate_log`: workflow registrations, default
1,000,000; --quick 100,000), copied R times (default 2), each into a new database of one
throw-away PostgreSQL server (`tests.pgkit.Server`, fsync on, a Unix socket), by
`uwf store copy`'s service (`copy_between`, in this process), timed end to end: the
source read and checked, the lines and nodes written, the views rebuilt, the copy
verified. The phases' ends are the moments the copy's progress reaches its total.

Baseline, same run, alternating with the copies: the primitive, the same lines read
from the same folder (`Store.log.read()`) and written alone by COPY, in one
transaction, into a table of the log's shape (seq, line, ends): what no copy into
PostgreSQL can beat here.

Each side runs in a new interpreter of its own (spawned), so its peak RSS is its own;
beside them, `log verify` of the same folder (`uwf.audit.verify.verify`), in its own
interpreter too: what the copy's memory is held to (the audit keeps a digest a line).
Every figure is printed beside its CPU: the child's (`time.process_time`) and the
server's processes' (the postmaster and its children), in µs an event, with the load.
Target (issue 31): >= 20,000 events/s, verify included.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import (
    REPO,
    add_common_args,
    begin,
    fresh_dir,
    generate_log,
    load,
    median,
    pressure,
    print_header,
    profile,
    section,
    verdict,
)

# isort: off
# uwf first, from PYTHONPATH when a snapshot is put there (`common.code_version`):
# pg_queue_bench puts the work tree first on sys.path, and its import imports uwf.
import uwf  # noqa: F401
from pg_queue_bench import server_cpu
# isort: on

sys.path.remove(str(REPO))  # last, for tests.pgkit: the spawned sides import it too
sys.path.append(str(REPO))
from tests.pgkit import Server, pg_bin  # the tests' throw-away server, fsync on here

TARGET = 20_000  # events/s (issue 31)
PHASES = "where each of the copy's progress bars reached its total"


class Figure:
    """One timed run: events/s, the CPU an event here and in the server, the peak RSS."""

    def __init__(self, events: int, wall: float, client: float, server: float, *,
                 phases: Sequence[float] = (), rss_kib: int = 0) -> None:
        self.rate = events / wall
        self.wall = wall
        self.client_us = client / events * 1e6
        self.server_us = server / events * 1e6
        self.phases = list(phases)
        self.rss_kib = rss_kib

    def __str__(self) -> str:
        return (f"{self.rate:,.0f} events/s ({self.wall:.1f} s; CPU {self.client_us:.1f} µs an "
                f"event here + {self.server_us:.1f} server = "
                f"{self.client_us + self.server_us:.1f}; peak RSS {self.rss_kib / 1024:,.0f} MiB)")


def _child(run: Callable[[Path, str, list[float]], None], folder: Path, url: str,
           out: Any) -> None:
    """In the spawned interpreter: `run`, timed; wall, phases, CPU and peak RSS out."""
    phases: list[float] = []
    cpu = time.process_time()
    started = time.perf_counter()
    run(folder, url, phases)
    wall = time.perf_counter() - started
    out.put((wall, [at - started for at in phases], time.process_time() - cpu,
             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))


def timed(server: Server, events: int, run: Callable[[Path, str, list[float]], None],
          folder: Path, url: str) -> Figure:
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    served = server_cpu(server)
    child = context.Process(target=_child, args=(run, folder, url, out))
    child.start()
    wall, phases, cpu, rss = out.get()
    child.join()
    if child.exitcode != 0:
        sys.exit(f"bench: {run.__name__} failed ({child.exitcode})")
    return Figure(events, wall, cpu, server_cpu(server) - served, phases=phases,
                  rss_kib=rss)


def copy_store(folder: Path, url: str, phases: list[float]) -> None:
    from uwf.config.settings import process_settings
    from uwf.storecopy.service import copy_between

    def progress(done: int, total: int) -> None:
        if done >= total:
            phases.append(time.perf_counter())

    copy_between(str(folder), url, process_settings(), progress)


def copy_lines(folder: Path, url: str, phases: list[float]) -> None:
    """The primitive: the folder's lines by COPY into a table of the log's shape."""
    import psycopg

    from uwf.store import Store

    store = Store.open(str(folder))
    try:
        with psycopg.connect(url) as connection:
            connection.execute("CREATE TABLE lines (seq bigint PRIMARY KEY, line bytea "
                               "NOT NULL, ends bigint NOT NULL)")
            ends = 0
            with connection.cursor().copy("COPY lines (seq, line, ends) FROM STDIN "
                                          "(FORMAT BINARY)") as copy:
                copy.set_types(["int8", "bytea", "int8"])
                for line in store.log.read():
                    ends += len(line.raw) + 1
                    copy.write_row((line.seq, line.raw, ends))
        phases.append(time.perf_counter())
    finally:
        store.close()


def verify_log(folder: Path, _url: str, phases: list[float]) -> None:
    """The memory's yardstick: `log verify` of the source folder."""
    from uwf.audit.verify import verify
    from uwf.store import Store

    store = Store.open(str(folder))
    try:
        verify(store)
        phases.append(time.perf_counter())
    finally:
        store.close()


def new_database(server: Server) -> str:
    """A new database; tried again a few times (`createdb` refuses while a backend of the
    side before, its process ended, still ends)."""
    for _attempt in range(4):
        try:
            return server.create_database()
        except subprocess.CalledProcessError as exc:
            print(f"  (createdb: {exc.stderr.strip()}; again)")
            time.sleep(2)
    return server.create_database()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100,000 events")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", action="store_true",
                        help="one copy under cProfile instead (this process only)")
    add_common_args(parser)
    args = parser.parse_args(argv)
    events = 100_000 if args.quick else args.events
    work = fresh_dir(args.dir, "storecopy")
    print_header(f"uwf store copy: a folder of {events:,} events into PostgreSQL", work)
    folder = work / "folder"
    made = generate_log(folder, events, fresh=True)
    print(f"source generated in {made.seconds:.1f} s")
    server = Server(work / "pg", pg_bin(), fsync=True)
    server.start()
    try:
        if args.profile:
            url = server.create_database()
            profile(lambda: copy_store(folder, url, []), top=30)
            return 0
        begin(args.wait_quiet)
        sides: dict[str, Callable[[Path, str, list[float]], None]] = {
            "copy": copy_store, "primitive": copy_lines, "log verify": verify_log}
        figures: dict[str, list[Figure]] = {name: [] for name in sides}
        order = list(sides)
        for index in range(args.rounds):
            for name in order[index % 3:] + order[:index % 3]:
                figure = timed(server, events, sides[name], folder, new_database(server))
                figures[name].append(figure)
                ends = ", ".join(f"{at:.1f}" for at in figure.phases)
                print(f"round {index + 1} {name:10}: {figure}"
                      + (f"; phases ended at {ends} s ({PHASES})" if name == "copy" else ""))
                print(f"  ({load()}; {pressure()})")
    finally:
        server.stop()
    section("result: medians")
    rates = {name: median([f.rate for f in got]) for name, got in figures.items()}
    cpu = {name: (median([f.client_us for f in got]), median([f.server_us for f in got]))
           for name, got in figures.items()}
    for name, got in figures.items():
        client, served = cpu[name]
        rss = median([f.rss_kib for f in got]) / 1024
        print(f"{name:10} {rates[name]:>9,.0f} events/s  CPU µs an event {client:.1f} here + "
              f"{served:.1f} server = {client + served:.1f}  peak RSS {rss:,.0f} MiB")
    print(f"copy / primitive: rate {rates['copy'] / rates['primitive']:.2f}, CPU "
          f"{sum(cpu['copy']) / sum(cpu['primitive']):.2f} x")
    print(f"end: {load()}; {pressure()}")
    print(f"store copy into PostgreSQL >= {TARGET:,} events/s: "
          f"{verdict(rates['copy'] >= TARGET)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
