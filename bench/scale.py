"""Reads that must not grow with the store: `thread list`, `registry show`, `log tail -n 1`.

    python bench/scale.py [--quick] [--threads N] [--events N] [--runs R] [--dir DIR]
                          [--fresh] [--keep] [--no-bytecode-cache] [--wait-quiet S] [--profile]

Real CLI processes, each timed end to end (wall), and, in a second pass, its own peak
RSS (started by GNU time, `%M`: a child this script starts itself would count
this script's memory too, see `common.peak_rss`):

1. `uwf --store S thread list --limit 10` and `uwf --store S registry show` on a
   store with 50,000 threads (10 of them active, the rest ended or killed;
   `--active N` for more) and on one with 10 threads (all active): both lists
   print 10 rows. The
   stores are written in bulk (`common.generate_threads`), then `uwf registry
   rebuild` once, so every view is current (checked: `registry show` says
   valid). Where `--limit` is not accepted yet, `thread list` runs without it
   (the stores have only 10 active threads, so the output is the same), and
   the result says so.
2. `uwf --store S log tail -n 1` on a 1,000,000-event log and on a 1,000-event
   one (`common.generate_log`, views rebuilt too), beside coreutils
   `tail -n 1` of the last segment file (the floor: seek to the end, read back).

`python -c pass` (the same interpreter) runs in the same rotation. Every
command runs R times (R >= 15) for its wall time, then --rss-runs times for
its peak RSS, all interleaved in rotating order so that all see the same
machine; figures are medians, ratios are of medians. The children get the
bytecode cache back (as an installed uwf has it), kept in DIR/pycache.
Then the same reads in-process (open the store, read; medians of 51 calls),
small beside big: the work that could grow with the store, without the
interpreter start and imports that dominate a CLI process (`--profile`:
cProfile of each on the big store).
Stores live in DIR/scale and are deleted at the end unless --keep.
Targets (issue 6): list(50k) / list(10) <= 1.25 and show(50k) / show(10) <= 1.25
in wall time; `log tail -n 1` in constant memory: peak RSS(1M) / RSS(1k) close
to 1 (read here as <= 1.10).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    RunResult,
    add_common_args,
    begin,
    bytecode_env,
    check,
    data_dir,
    env_with,
    fmt_bytes,
    fmt_ms,
    generate_log,
    generate_threads,
    load,
    median,
    peak_rss,
    pressure,
    print_header,
    remove_store,
    run_measured,
    section,
    uwf_exe,
    verdict,
)

TARGET_RATIO = 1.25
TARGET_RSS_RATIO = 1.10
SMALL_THREADS = 10
ACTIVE = 10
LIMIT = 10
SMALL_EVENTS = 1_000


@dataclass
class Command:
    label: str
    argv: list[str]
    runs: list[RunResult] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)  # own peak RSS per memory run

    @property
    def wall(self) -> float:
        return median([run.wall for run in self.runs])

    @property
    def cpu(self) -> float:
        """The median CPU time (user + system) of the child, seconds."""
        return median([run.cpu for run in self.runs])

    @property
    def rss(self) -> float:
        return median([float(kib) for kib in self.rss_kib])


def build_current(root: Path, env: dict[str, str]) -> dict[str, Any]:
    """`uwf registry rebuild` once (untimed), then `registry show` must say valid."""
    start = time.perf_counter()
    check(run_measured([uwf_exe(), "--store", str(root), "registry", "rebuild"], env=env),
          "uwf registry rebuild")
    seconds = time.perf_counter() - start
    shown = run_measured([uwf_exe(), "--store", str(root), "registry", "show"], env=env)
    check(shown, "uwf registry show")
    status: dict[str, Any] = json.loads(shown.out)
    if status["status"] != "valid":
        sys.exit(f"bench: views of {root} are {status['status']} after rebuild")
    status["rebuildSeconds"] = seconds
    return status


def disk(root: Path) -> str:
    parts = []
    for name in ("events", "views", "cas"):
        size = sum(p.stat().st_size for p in (root / name).rglob("*") if p.is_file())
        parts.append(f"{name} {fmt_bytes(size)}")
    return ", ".join(parts)


def limit_accepted(root: Path, env: dict[str, str]) -> bool:
    """Whether this uwf takes `thread list --limit N` (being added by another change)."""
    probe = run_measured([uwf_exe(), "--store", str(root), "thread", "list", "--limit",
                          str(LIMIT)], env=env)
    if probe.code == 0:
        return True
    if b"--limit" in probe.err:
        return False
    check(probe, "uwf thread list --limit")
    return False


def check_outputs(commands: dict[str, Command], env: dict[str, str], events: int) -> None:
    """One untimed run of each (warms the page cache) whose output is checked."""
    for key, command in commands.items():
        result = run_measured(command.argv, env=env)
        check(result, command.label)
        if key.startswith("list"):
            rows = json.loads(result.out)
            if len(rows) != LIMIT:
                sys.exit(f"bench: {command.label} printed {len(rows)} threads, not {LIMIT}")
        elif key.startswith("show"):
            if json.loads(result.out)["status"] != "valid":
                sys.exit(f"bench: {command.label}: views not valid")
        elif key.startswith("tail"):
            want = events if key == "tail-big" else SMALL_EVENTS
            if json.loads(result.out)["seq"] != want:
                sys.exit(f"bench: {command.label} did not print seq {want}")


def in_process(roots: dict[str, Path], limit: bool, calls: int, profiled: bool) -> None:
    """The same reads in this process (a new Store each call, imports excluded): medians
    of `calls` calls, small beside big; with `profiled`, cProfile of the big ones."""
    from common import profile

    from uwf.audit import verify as audit
    from uwf.runs import registry
    from uwf.store import Store
    from uwf.threads.service import list_threads

    def run_list(root: Path) -> object:
        store = Store.open(root)
        try:
            return list_threads(store, False, LIMIT if limit else None)
        finally:
            store.close()

    def run_show(root: Path) -> object:
        store = Store.open(root)
        try:
            return registry.show(store)
        finally:
            store.close()

    def run_tail(root: Path) -> object:
        store = Store.open(root)
        try:
            return audit.tail(store, 1)
        finally:
            store.close()

    section(f"in-process: open the store and read (median of {calls} calls, "
            "imports excluded)")
    for label, call, small, big in (
        ("thread list", run_list, roots["threads-small"], roots["threads-big"]),
        ("registry show", run_show, roots["threads-small"], roots["threads-big"]),
        ("log tail -n 1", run_tail, roots["log-small"], roots["log-big"]),
    ):
        figures, cpu = [], []
        for root in (small, big):
            call(root)
            times, cpus = [], []
            for _ in range(calls):
                start, start_cpu = time.perf_counter(), time.process_time()
                call(root)
                times.append(time.perf_counter() - start)
                cpus.append(time.process_time() - start_cpu)
            figures.append(median(times))
            cpu.append(median(cpus))
        print(f"{label:<16} small {fmt_ms(figures[0]):>9} (CPU {fmt_ms(cpu[0])})   "
              f"big {fmt_ms(figures[1]):>9} (CPU {fmt_ms(cpu[1])})   "
              f"ratio {figures[1] / figures[0]:.2f} (CPU {cpu[1] / max(cpu[0], 1e-9):.2f})")
    if profiled:
        for label, call, root in (("thread list", run_list, roots["threads-big"]),
                                  ("registry show", run_show, roots["threads-big"]),
                                  ("log tail -n 1", run_tail, roots["log-big"])):
            section(f"profile: {label}, in-process, 100 calls on {root.name}")
            profile(lambda c=call, r=root: [c(r) for _ in range(100)],  # type: ignore[misc]
                    top=12)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--threads", type=int, default=50_000,
                        help="threads in the big store (default 50,000)")
    parser.add_argument("--active", type=int, default=ACTIVE,
                        help=f"active threads in the big store (default {ACTIVE}; more needs "
                        "`thread list --limit`)")
    parser.add_argument("--events", type=int, default=1_000_000,
                        help="events in the big log (default 1M)")
    parser.add_argument("--runs", type=int, help="runs of each command (default 21; 15 with "
                        "--quick; at least 15)")
    parser.add_argument("--rss-runs", type=int, default=5,
                        help="memory runs of each command, under GNU time (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help="10,000 threads and a 200,000-event log, 15 runs")
    add_common_args(parser)
    parser.add_argument("--fresh", action="store_true", help="regenerate the stores")
    parser.add_argument("--keep", action="store_true",
                        help="keep the stores afterwards (default: delete them)")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE if set")
    parser.add_argument("--profile", action="store_true",
                        help="also profile each read in-process on the big stores")
    args = parser.parse_args(argv)
    if args.quick:
        args.threads, args.events = 10_000, 200_000
    args.runs = max(args.runs or (15 if args.quick else 21), 15)

    base = data_dir(args.dir)
    work = base / "scale"
    work.mkdir(parents=True, exist_ok=True)
    print_header("scale: `thread list`, `registry show`, `log tail -n 1` against store size",
                 work)
    env = env_with()
    if args.no_bytecode_cache:
        print(f"bytecode: as inherited (PYTHONDONTWRITEBYTECODE="
              f"{env.get('PYTHONDONTWRITEBYTECODE', '')!r})")
    else:
        env = bytecode_env(env, base / "pycache")
        print(f"bytecode: cached in {base / 'pycache'}, as in an installed uwf")

    small_t = generate_threads(work / f"threads-{SMALL_THREADS}", SMALL_THREADS, ACTIVE,
                               fresh=args.fresh)
    big_t = generate_threads(work / f"threads-{args.threads}-{args.active}", args.threads,
                             args.active,
                             fresh=args.fresh)
    small_l = generate_log(work / f"log-{SMALL_EVENTS}", SMALL_EVENTS, fresh=args.fresh)
    big_l = generate_log(work / f"log-{args.events}", args.events, fresh=args.fresh)
    stores = {}
    for label, made in (("threads, small", small_t), ("threads, big", big_t),
                        ("log, small", small_l), ("log, big", big_l)):
        how = "reused" if made.reused else f"written in {made.seconds:.1f} s"
        status = build_current(made.root, env)
        stores[label] = status
        threads = status["counts"]["threads"]
        print(f"{label + ':':<16} {made.root}  {status['logSeq']:,} events ({how}; "
              f"`registry rebuild` {status['rebuildSeconds']:.1f} s), "
              f"threads {threads or 'none'}; {disk(made.root)}")

    with_limit = limit_accepted(small_t.root, env)
    list_args = ["thread", "list", "--limit", str(LIMIT)] if with_limit else ["thread", "list"]
    if with_limit:
        print(f"`thread list --limit {LIMIT}` is accepted: timing it ({args.active:,} active "
              f"threads in the big store, {ACTIVE} in the small one)")
    elif args.active > LIMIT:
        sys.exit(f"bench: this uwf does not accept `thread list --limit`: use --active {LIMIT}")
    else:
        print(f"note: this uwf does not accept `thread list --limit` yet: timing `thread list`, "
              f"on stores where only {ACTIVE} threads are active (the same {LIMIT} rows)")

    exe = uwf_exe()
    n_big = f"{args.threads:,} threads" + (f", {args.active:,} active"
                                           if args.active != ACTIVE else "")
    commands = {
        "list-small": Command(f"thread list, {SMALL_THREADS} threads",
                              [exe, "--store", str(small_t.root), *list_args]),
        "list-big": Command(f"thread list, {n_big}",
                            [exe, "--store", str(big_t.root), *list_args]),
        "show-small": Command(f"registry show, {SMALL_THREADS} threads",
                              [exe, "--store", str(small_t.root), "registry", "show"]),
        "show-big": Command(f"registry show, {n_big}",
                            [exe, "--store", str(big_t.root), "registry", "show"]),
        "tail-small": Command(f"log tail -n 1, {SMALL_EVENTS:,} events",
                              [exe, "--store", str(small_l.root), "log", "tail", "-n", "1"]),
        "tail-big": Command(f"log tail -n 1, {args.events:,} events",
                            [exe, "--store", str(big_l.root), "log", "tail", "-n", "1"]),
        "coreutils": Command(f"coreutils tail -n 1, last segment of {args.events:,}",
                             ["tail", "-n", "1",
                              str(sorted((big_l.root / "events").glob("*.jsonl"))[-1])]),
        "python": Command("python -c pass", [sys.executable, "-c", "pass"]),
    }
    check_outputs(commands, env, args.events)

    begin(args.wait_quiet)
    print(pressure())
    order = list(commands.values())
    for index in range(args.runs):
        shift = index % len(order)
        for command in order[shift:] + order[:shift]:
            result = run_measured(command.argv, env=env)
            check(result, command.label)
            command.runs.append(result)
    # Peak RSS in a second pass, each child started by GNU time: a child started by
    # this process would count this process's own memory as its own (see peak_rss).
    for index in range(args.rss_runs):
        shift = index % len(order)
        for command in order[shift:] + order[:shift]:
            command.rss_kib.append(peak_rss(command.argv, env=env))

    section(f"result (wall: medians of {args.runs} runs each, interleaved; peak RSS: medians "
            f"of {args.rss_runs} runs under GNU time; end: {load()}; {pressure()})")
    print(f"{'command':<46} {'wall':>9} {'min':>9} {'max':>9} {'CPU':>9}   {'peak RSS':>9} "
          f"{'(min-max)':>13}")
    for command in commands.values():
        walls = [run.wall for run in command.runs]
        print(f"{command.label:<46} {fmt_ms(command.wall):>9} {fmt_ms(min(walls)):>9} "
              f"{fmt_ms(max(walls)):>9} {fmt_ms(command.cpu):>9}   "
              f"{command.rss / 1024:5.1f} MiB "
              f"({min(command.rss_kib) / 1024:.1f}-{max(command.rss_kib) / 1024:.1f})")
    python = commands["python"].wall
    ratios = {}
    for what in ("list", "show", "tail"):
        big, small = commands[f"{what}-big"], commands[f"{what}-small"]
        ratios[what] = (big.wall / small.wall, big.rss / small.rss)
        print(f"ratio {what} big/small: wall {ratios[what][0]:.2f}, CPU "
              f"{big.cpu / small.cpu:.2f}, peak RSS "
              f"{ratios[what][1]:.2f};  over python -c pass: small "
              f"{small.wall / python:.2f} x, big {big.wall / python:.2f} x")

    section("targets")
    list_name = f"thread list{' --limit ' + str(LIMIT) if with_limit else ''}"
    for what, name in (("list", list_name), ("show", "registry show")):
        ratio = ratios[what][0]
        print(f"{name}: {n_big} / {SMALL_THREADS} threads <= {TARGET_RATIO}: "
              f"{verdict(ratio <= TARGET_RATIO)} ({ratio:.2f})")
    rss_ratio = ratios["tail"][1]
    print(f"log tail -n 1: peak RSS {args.events:,} / {SMALL_EVENTS:,} events <= "
          f"{TARGET_RSS_RATIO}: {verdict(rss_ratio <= TARGET_RSS_RATIO)} ({rss_ratio:.2f}; "
          f"{commands['tail-big'].rss / 1024:.1f} vs {commands['tail-small'].rss / 1024:.1f} MiB)"
          f"; wall ratio {ratios['tail'][0]:.2f}")
    if not with_limit:
        print(f"(`thread list` ran without --limit: not accepted by this uwf; {ACTIVE} active "
              "threads in each store)")

    in_process({"threads-small": small_t.root, "threads-big": big_t.root,
                "log-small": small_l.root, "log-big": big_l.root}, with_limit, 51,
               args.profile)

    if args.keep:
        print(f"\nstores kept in {work}")
    else:
        for made_root in (small_t.root, big_t.root, small_l.root, big_l.root):
            remove_store(made_root)
        shutil.rmtree(work, ignore_errors=True)
        print(f"\nstores deleted ({work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
