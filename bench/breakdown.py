"""Where a command's and a step's time goes (issue 21): timers around the engine's parts.

    python bench/breakdown.py [--quick] [--cycles N] [--steps N] [--dir DIR]
                              [--wait-quiet S]

1. A command: `sched.lease` then `sched.complete` (one lease+complete cycle, two
   commands) in process, --cycles times, on a store of --cycles + 10 ready entries
   added by `uwf queue add --batch`, with UWF_DURABILITY=fsync.
2. A step: `run_thread` of examples/solve-issue.yaml with bench/thread_run.py's
   in-process agent (planner, then developer and reviewer until the reviewer
   approves), about --steps steps, durable.

Each part's functions are wrapped with timers (time.perf_counter around each call, a
few hundred nanoseconds each); the figures are inclusive, so an indented line is part
of the line above it. Per command or per step: the mean time of each part, and how
many calls. `fsync(2)` is every fsync the process made (the log's, the nodes' and
their folders'), counted and timed by wrapping `os.fsync`. Beside them, in the same
run: raw `write(2)` + `fsync(2)` of a 300-byte line on the same disk, and `python -c
pass`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from common import (
    EXAMPLE,
    REPO,
    add_common_args,
    begin,
    fresh_dir,
    median,
    print_header,
    run_measured,
    section,
    uwf_exe,
)


class Timers:
    """Inclusive time and calls per label, from wrappers installed on functions."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._undo: list[Callable[[], None]] = []

    def add(self, label: str, seconds: float) -> None:
        self.seconds[label] = self.seconds.get(label, 0.0) + seconds
        self.calls[label] = self.calls.get(label, 0) + 1

    def _replace(self, owner: Any, name: str, new: Any) -> None:
        real = getattr(owner, name)
        setattr(owner, name, new)
        self._undo.append(lambda: setattr(owner, name, real))

    def wrap(self, owner: Any, name: str, label: str) -> None:
        real = getattr(owner, name)
        self._replace(owner, name, functools.wraps(real)(self.wrapped(label)(real)))

    def wrap_context(self, owner: Any, name: str, label: str) -> None:
        """A context manager method: the time its body runs (a lock held)."""
        real = getattr(owner, name)
        add = self.add

        @contextlib.contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with real(*args, **kwargs) as value:
                start = time.perf_counter()
                yield value
                add(label, time.perf_counter() - start)

        self._replace(owner, name, timed)

    def wrap_decide(self, owner: Any, name: str, label: str) -> None:
        """`Journal.write_at(decide)`: the time `decide` itself takes."""
        real = getattr(owner, name)
        timed = self.wrapped(label)

        def write_at(journal: Any, decide: Callable[..., Any], **kwargs: Any) -> Any:
            return real(journal, timed(decide), **kwargs)

        self._replace(owner, name, write_at)

    def wrapped(self, label: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A decorator timing each call of a function under `label`."""
        add = self.add

        def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
            def timed(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()  # inline, not a context manager: cheap
                try:
                    return function(*args, **kwargs)
                finally:
                    add(label, time.perf_counter() - start)
            return timed
        return decorate

    def undo(self) -> None:
        for step in reversed(self._undo):
            step()
        self._undo.clear()


def engine_timers(timers: Timers) -> None:
    """The write path's parts, shared by both measurements."""
    from uwf.cas import backends
    from uwf.engine import filelog, journal, segments, viewstore

    timers.wrap(journal.Journal, "write_at", "journal write (whole)")
    timers.wrap_context(segments.FileSegments, "lock", "writers' lock held")
    timers.wrap(filelog._FileSession, "recover", "tail check + recovery")
    timers.wrap(viewstore.SqliteViewStore, "checkpoints", "views' checkpoints read")
    timers.wrap_decide(journal.Journal, "write_at", "decide")
    timers.wrap(journal.Journal, "_append", "append + fold (encode, write, views)")
    timers.wrap(segments.FileSegments, "append", "the log's write(2)")
    timers.wrap(viewstore.SqliteViewStore, "commit", "views commit (SQLite)")
    timers.wrap(filelog._FileSession, "settle", "log fsync (after the lock)")
    timers.wrap(backends.FileBlobs, "write", "CAS node write (file + folder fsync)")
    timers.wrap(os, "fsync", "fsync(2), every one")


COMMAND_ROWS = [
    ("command", 0),
    ("journal write (whole)", 1),
    ("writers' lock held", 2),
    ("tail check + recovery", 3),
    ("views' checkpoints read", 3),
    ("decide", 3),
    ("append + fold (encode, write, views)", 3),
    ("the log's write(2)", 4),
    ("views commit (SQLite)", 4),
    ("log fsync (after the lock)", 2),
    ("fsync(2), every one", 0),
]

STEP_ROWS = [
    ("step", 0),
    ("journal write (whole)", 1),
    ("writers' lock held", 2),
    ("decide", 3),
    ("moderator (evaluate)", 4),
    ("step checks (check_step)", 4),
    ("views commit (SQLite)", 3),
    ("log fsync (after the lock)", 2),
    ("agent context", 1),
    ("the agent", 1),
    ("submit (validate, write nodes)", 1),
    ("CAS node write (file + folder fsync)", 2),
    ("fsync(2), every one", 0),
]


def show(timers: Timers, rows: list[tuple[str, int]], per: int, unit: str) -> None:
    print(f"{'part (inclusive; indented = inside the line above)':<58} "
          f"{'µs/' + unit:>10} {'calls/' + unit:>10}")
    for label, depth in rows:
        seconds = timers.seconds.get(label, 0.0)
        calls = timers.calls.get(label, 0)
        print(f"{'  ' * depth + label:<58} {seconds / per * 1e6:>10,.0f} "
              f"{calls / per:>10.2f}")


# -- 1. a command -------------------------------------------------------------------

def commands(work: Path, cycles: int) -> dict[str, float]:
    from uwf.queue import sched
    from uwf.store import Store

    root = work / "queue"
    shutil.rmtree(root, ignore_errors=True)
    env = dict(os.environ, UWF_DURABILITY="none")
    for args in (["workflow", "put", str(EXAMPLE)],
                 ["sched", "policy", "set", "--max-concurrent", "1000"]):
        subprocess.run([uwf_exe(), "--store", str(root), *args], env=env, check=True,
                       capture_output=True)
    batch = work / "batch.jsonl"
    batch.write_text("".join(json.dumps({"workflow": "solve-issue", "prompt": f"Fix #{n}",
                                         "repo": str(REPO)}) + "\n"
                             for n in range(cycles + 10)), "utf-8")
    subprocess.run([uwf_exe(), "--store", str(root), "queue", "add", "--batch", str(batch)],
                   env=env, check=True, capture_output=True)
    os.environ["UWF_DURABILITY"] = "fsync"
    store = Store.open(root)
    store.read()
    for _ in range(5):  # warm: connections, caches
        lease = sched.lease(store, 1).leases[0]
        sched.complete(store, lease.id, lease.lease_id)
    timers = Timers()
    engine_timers(timers)
    try:
        start = time.perf_counter()
        for _ in range(cycles):
            began = time.perf_counter()
            lease = sched.lease(store, 1).leases[0]
            timers.add("command", time.perf_counter() - began)
            began = time.perf_counter()
            sched.complete(store, lease.id, lease.lease_id)
            timers.add("command", time.perf_counter() - began)
        wall = time.perf_counter() - start
    finally:
        timers.undo()
        store.close()
    section(f"1. a command: {cycles:,} lease+complete cycles ({2 * cycles:,} commands), "
            "in process, fsync")
    print(f"{cycles / wall:,.0f} cycles/s; {wall / (2 * cycles) * 1e6:,.0f} µs a command")
    show(timers, COMMAND_ROWS, 2 * cycles, "cmd")
    return {"command_us": wall / (2 * cycles) * 1e6}


# -- 2. a step ----------------------------------------------------------------------

def steps(work: Path, count: int) -> dict[str, float]:
    from thread_run import agent_output

    from uwf.config.configfile import Config, WorkflowConfig
    from uwf.store import Store
    from uwf.threads import agent, routing, stepping
    from uwf.threads.results import StepContext
    from uwf.threads.service import start_thread
    from uwf.workflows.service import put_workflow

    root = work / "thread"
    shutil.rmtree(root, ignore_errors=True)
    os.environ["UWF_DURABILITY"] = "fsync"
    store = Store.open(root)
    put_workflow(store, EXAMPLE)
    reviews = max(count // 2, 1)
    thread = start_thread(store, "solve-issue", "Fix the login bug in #42",
                          repo=str(root), settings=store.settings).thread
    timers = Timers()

    @timers.wrapped("the agent")
    def the_agent(ctx: StepContext) -> tuple[Any, str]:
        role = ctx.role["name"]
        return agent_output(role, ctx.visits.get(role, 0), reviews)

    engine_timers(timers)
    timers.wrap(stepping, "step_thread", "step")
    timers.wrap(agent, "agent_context", "agent context")
    timers.wrap(agent, "submit_step", "submit (validate, write nodes)")
    timers.wrap(routing, "evaluate", "moderator (evaluate)")
    timers.wrap(stepping, "check_step", "step checks (check_step)")
    try:
        start = time.perf_counter()
        ran = stepping.run_thread(store, thread, in_process=the_agent,
                                  max_steps=2 + 2 * reviews,
                                  config=Config(WorkflowConfig(), None, None),
                                  settings=store.settings)
        wall = time.perf_counter() - start
    finally:
        timers.undo()
        store.close()
    if not ran.done:
        sys.exit(f"bench: the thread did not end: {ran}")
    section(f"2. a step: run_thread of {ran.steps:,} steps, in process, fsync")
    print(f"{ran.steps / wall:,.0f} steps/s; {wall / ran.steps * 1e3:,.2f} ms a step")
    show(timers, STEP_ROWS, ran.steps, "step")
    return {"step_ms": wall / ran.steps * 1e3}


# -- baselines ----------------------------------------------------------------------

def baselines(work: Path, count: int = 2000) -> None:
    path = work / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    line = b"x" * 299 + b"\n"
    times = []
    try:
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, line)
            os.fsync(fd)
            times.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()
    walls = [run_measured([sys.executable, "-c", "pass"]).wall for _ in range(15)]
    section("baselines, same run")
    print(f"raw write(2) + fsync(2) of a 300-byte line: median {median(times) * 1e6:,.0f} µs")
    print(f"python -c pass: median {median(walls) * 1e3:,.1f} ms")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--cycles", type=int, default=1000, help="lease+complete cycles")
    parser.add_argument("--steps", type=int, default=600, help="about this many steps")
    parser.add_argument("--quick", action="store_true", help="300 cycles, 200 steps")
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.cycles, args.steps = 300, 200
    work = fresh_dir(args.dir, "breakdown")
    print_header("where a command's and a step's time goes", work)
    begin(args.wait_quiet)
    commands(work, args.cycles)
    steps(work, args.steps)
    baselines(work)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
