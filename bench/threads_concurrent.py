"""16 uwf threads stepped at once in one process (one Store, 16 Python threads) vs LangGraph.

    python bench/threads_concurrent.py [--quick] [--threads 16] [--steps 200]
                                       [--rounds 3] [--dir DIR] [--wait-quiet S]

uwf: one store under --dir on a real disk, UWF_DURABILITY=fsync, the
`solve-issue` loop of bench/thread_run.py (planner -> developer -> reviewer, the
reviewer rejecting until its last visit): N threads are started, then N Python
threads, released together by a barrier, each call `run_thread(store, thread,
in_process=agent, config=Config(WorkflowConfig(), None, None))` on the same
`Store` object, with thread_run.py's in-process agent. --steps 200 gives
1 + 2 x 100 = 201 steps a thread. Aggregate steps/s = all steps / wall, from the
first thread's start to the last one's end. Beside it, the same N threads (a
fresh store) stepped one after another in one Python thread: the sequential
figure, so the gain from running at once (the log's group commit: the writers'
lock is let go before the append's fsync) shows. After each uwf run: `uwf log
verify` passes, every thread is done, the log holds the expected
`thread.stepped` events for each, and each thread's chain of StepNodes has the
expected length and roles, its last review approved (the bench fails otherwise).

LangGraph: thread_run.py's StateGraph (nodes planner, developer, reviewer, the
whole history in `messages`), N thread_ids, a SqliteSaver on a file in the same
folder, default durability ("async", as thread_run.py's main figure),
recursion_limit = steps + 10, run each way a user plausibly would:
- sequential: one `invoke` per thread_id, one after another;
- threads: N Python threads (barrier-released), one `invoke` each, sharing one
  SqliteSaver (it serializes every statement behind its own lock, on a
  connection opened with check_same_thread=False; its docstring says it "does
  not scale to multiple threads");
- batch: one `graph.batch(inputs, configs)` call (LangChain's default
  thread pool: max_concurrency unset, so min(32, cpus + 4) workers);
- async: `asyncio.gather` of N `ainvoke`s on an AsyncSqliteSaver (when
  langgraph.checkpoint.sqlite.aio and aiosqlite import).
thread_run.py's `langgraph_app` keeps its agent's visit counts in the app, so
each thread_id gets its own compiled app (compiled before the clock starts)
except for batch, which needs one app: there the same graph counts visits per
thread_id (`per_thread=True`). Each thread's result and stored checkpoint must
hold all its steps. The baseline is the fastest LangGraph variant (median steps/s).

Rounds (default 3) run every variant in rotating order, each on fresh storage;
figures are medians over rounds, ratios medians of per-round ratios.
--quick: 4 threads x 50 steps, 1 round. Target (issue 21): uwf at once >= 5 x
the fastest LangGraph variant, aggregate steps/s.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    EXAMPLE,
    add_common_args,
    begin,
    fresh_dir,
    load,
    median,
    pressure,
    print_header,
    section,
    spread,
    uwf_exe,
    verdict,
)
from thread_run import PROMPT, agent_output, langgraph_app, langgraph_versions, sqlite_files

TARGET = 5.0
HANG_SECONDS = 600.0  # a variant still running after this long is a hang


@dataclass
class Run:
    """One variant's run: all threads' steps and the wall time they took together."""

    steps: int = 0
    seconds: float = 0.0
    walls: list[float] = field(default_factory=list)  # each thread's own run, seconds

    @property
    def rate(self) -> float:
        return self.steps / self.seconds


class VariantFailed(Exception):
    """A LangGraph variant that does not work as a user would run it (reported, skipped)."""


def expected_roles(steps: int) -> list[str]:
    return ["planner"] + ["developer", "reviewer"] * ((steps - 1) // 2)


def in_threads(count: int, work: Callable[[int], None], what: str
               ) -> tuple[list[float], list[float], list[tuple[int, str]]]:
    """`work(i)` in `count` Python threads released by a barrier: (starts, ends, errors).

    A thread still running after HANG_SECONDS is a hang: every thread's stack is
    dumped and the process ends (exit 3).
    """
    barrier = threading.Barrier(count)
    starts = [0.0] * count
    ends = [0.0] * count
    errors: list[tuple[int, str]] = []

    def body(index: int) -> None:
        try:
            barrier.wait()
            starts[index] = time.perf_counter()
            work(index)
            ends[index] = time.perf_counter()
        except BaseException:  # reported by the caller
            errors.append((index, traceback.format_exc()))
            barrier.abort()

    workers = [threading.Thread(target=body, args=(index,), name=f"bench-{index}", daemon=True)
               for index in range(count)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + HANG_SECONDS
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    if any(worker.is_alive() for worker in workers):
        print(f"bench: HANG: {what}: threads still running after {HANG_SECONDS:g} s; stacks:",
              file=sys.stderr, flush=True)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(3)
    return starts, ends, errors


# -- uwf ---------------------------------------------------------------------------

def uwf_store(root: Path, threads: int) -> tuple[Any, list[str]]:
    """A fresh durable store with the example workflow and `threads` threads started."""
    from uwf.store import Store
    from uwf.threads.service import start_thread
    from uwf.workflows.service import put_workflow

    shutil.rmtree(root, ignore_errors=True)
    os.environ["UWF_DURABILITY"] = "fsync"
    store = Store.open(root)
    if store.durability != "fsync":
        sys.exit(f"bench: store opened with durability {store.durability}, wanted fsync")
    put_workflow(store, EXAMPLE)
    ids = [start_thread(store, "solve-issue", PROMPT, repo=str(root),
                        settings=store.settings).thread
           for _ in range(threads)]
    return store, ids


def uwf_run(root: Path, threads: int, reviews: int, at_once: bool) -> Run:
    """`threads` threads stepped to their end, at once (a Python thread each) or in turn."""
    from uwf.config.configfile import Config, WorkflowConfig
    from uwf.threads.results import StepContext, ThreadRan
    from uwf.threads.stepping import run_thread

    store, ids = uwf_store(root, threads)
    config = Config(WorkflowConfig(), None, None)

    def agent(ctx: StepContext) -> tuple[Any, str]:
        role = ctx.role["name"]
        return agent_output(role, ctx.visits.get(role, 0), reviews)

    results: list[ThreadRan | None] = [None] * threads

    def step(index: int) -> None:
        results[index] = run_thread(store, ids[index], in_process=agent,
                                    max_steps=2 + 2 * reviews, config=config,
                                    settings=store.settings)

    if at_once:
        starts, ends, errors = in_threads(threads, step, "uwf run_thread")
        if errors:
            for index, text in errors:
                print(f"bench: uwf thread {index} ({ids[index]}) raised:\n{text}",
                      file=sys.stderr)
            sys.exit(f"bench: FAILED: {len(errors)} of {threads} uwf run_thread calls raised "
                     f"when stepped concurrently on one Store")
    else:
        starts, ends = [], []
        for index in range(threads):
            starts.append(time.perf_counter())
            step(index)
            ends.append(time.perf_counter())
    store.close()
    steps = 1 + 2 * reviews
    for index, result in enumerate(results):
        if result is None or not result.done or result.steps != steps:
            sys.exit(f"bench: FAILED: uwf thread {index} ({ids[index]}) ran {result}, "
                     f"wanted done after {steps} steps")
    uwf_check(root, ids, steps)
    return Run(sum(result.steps for result in results if result is not None),
               max(ends) - min(starts), [b - a for a, b in zip(starts, ends, strict=True)])


def uwf_check(root: Path, ids: list[str], steps: int) -> None:
    """The store after a run: log verify passes, and each thread holds exactly its steps."""
    from uwf.store import Store
    from uwf.threads.service import iter_log, show_thread

    verify = subprocess.run([uwf_exe(), "--store", str(root), "log", "verify"],
                            capture_output=True, text=True, check=False)
    if verify.returncode != 0:
        sys.exit(f"bench: FAILED: uwf log verify on {root} exited {verify.returncode}:\n"
                 f"{verify.stdout}{verify.stderr}")
    stepped: Counter[str] = Counter()
    ended: Counter[str] = Counter()
    for segment in sorted((root / "events").glob("*.jsonl")):
        with segment.open("rb") as handle:
            for line in handle:
                event = json.loads(line)
                if event["type"] == "thread.stepped":
                    stepped[event["subject"]] += 1
                elif event["type"] == "thread.ended":
                    ended[event["subject"]] += 1
    roles = expected_roles(steps)
    store = Store.open(root)
    try:
        for thread in ids:
            subject = f"thread/{thread}"
            if stepped[subject] != steps or ended[subject] != 1:
                sys.exit(f"bench: FAILED: the log holds {stepped[subject]} thread.stepped and "
                         f"{ended[subject]} thread.ended for {thread}, wanted {steps} and 1")
            if not show_thread(store, thread).done:
                sys.exit(f"bench: FAILED: uwf thread {thread} is not done")
            records = list(iter_log(store, thread))
            if [record.role for record in records] != roles:
                sys.exit(f"bench: FAILED: uwf thread {thread}'s chain has {len(records)} steps "
                         f"(roles {[record.role for record in records][:6]}...), wanted {steps}")
            if records[-1].output.get("status") != "approved":
                sys.exit(f"bench: FAILED: uwf thread {thread}'s last step is {records[-1]}")
    finally:
        store.close()


# -- LangGraph ------------------------------------------------------------------------

def lg_configs(threads: int, steps: int) -> list[dict[str, Any]]:
    return [{"configurable": {"thread_id": f"bench-{index}"}, "recursion_limit": steps + 10}
            for index in range(threads)]


def lg_check(label: str, results: Sequence[Any], stored: Sequence[Any], marks: list[float],
             steps: int) -> None:
    """Each thread's returned state and stored checkpoint hold all its steps."""
    roles = expected_roles(steps)
    for index, (result, snapshot) in enumerate(zip(results, stored, strict=True)):
        for what, values in (("result", result), ("stored checkpoint", snapshot.values)):
            messages = values.get("messages", []) if isinstance(values, dict) else []
            last = values.get("reviewer", {}) if isinstance(values, dict) else {}
            if [message["role"] for message in messages] != roles or \
                    last.get("status") != "approved":
                raise VariantFailed(f"{label}: thread {index}'s {what} holds {len(messages)} "
                                    f"messages, wanted {steps} ending in an approval")
    if len(marks) != steps * len(results):
        raise VariantFailed(f"{label}: {len(marks)} node executions, wanted "
                            f"{steps * len(results)}")


def fresh(path: Path) -> None:
    for old in sqlite_files(path):
        old.unlink(missing_ok=True)


def lg_run(path: Path, threads: int, reviews: int, how: str) -> Run:
    """The threads run one way (`sequential`, `threads`, `batch`) on one SqliteSaver."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    fresh(path)
    steps = 1 + 2 * reviews
    configs = lg_configs(threads, steps)
    marks: list[float] = []
    start_state = {"prompt": PROMPT}
    with SqliteSaver.from_conn_string(str(path)) as saver:
        saver.setup()
        if how == "batch":
            app = langgraph_app(reviews, saver, marks, per_thread=True)
            apps = [app] * threads
        else:
            apps = [langgraph_app(reviews, saver, marks) for _ in range(threads)]
        results: list[Any] = [None] * threads

        def invoke(index: int) -> None:
            results[index] = apps[index].invoke(start_state, configs[index])

        if how == "sequential":
            starts, ends = [], []
            for index in range(threads):
                starts.append(time.perf_counter())
                invoke(index)
                ends.append(time.perf_counter())
        elif how == "threads":
            starts, ends, errors = in_threads(threads, invoke, f"LangGraph {how}")
            if errors:
                raise VariantFailed(f"{len(errors)} of {threads} invokes raised; the first "
                                    f"(thread {errors[0][0]}):\n{errors[0][1]}")
        elif how == "batch":
            begun = time.perf_counter()
            results = app.batch([start_state] * threads, configs)
            starts, ends = [begun], [time.perf_counter()]
        else:
            raise ValueError(how)
        stored = [apps[index].get_state(configs[index]) for index in range(threads)]
    lg_check(f"LangGraph {how}", results, stored, marks, steps)
    return Run(len(marks), max(ends) - min(starts),
               [b - a for a, b in zip(starts, ends, strict=True)])


def lg_async_run(path: Path, threads: int, reviews: int) -> Run:
    """The threads as `asyncio.gather` of `ainvoke`s on one AsyncSqliteSaver."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    fresh(path)
    steps = 1 + 2 * reviews
    configs = lg_configs(threads, steps)
    marks: list[float] = []

    async def main() -> Run:
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.setup()
            apps = [langgraph_app(reviews, saver, marks) for _ in range(threads)]
            starts = [0.0] * threads
            ends = [0.0] * threads

            async def one(index: int) -> Any:
                starts[index] = time.perf_counter()
                result = await apps[index].ainvoke({"prompt": PROMPT}, configs[index])
                ends[index] = time.perf_counter()
                return result

            results = await asyncio.gather(*(one(index) for index in range(threads)))
            stored = [await apps[index].aget_state(configs[index]) for index in range(threads)]
        lg_check("LangGraph async", results, stored, marks, steps)
        return Run(len(marks), max(ends) - min(starts),
                   [b - a for a, b in zip(starts, ends, strict=True)])

    return asyncio.run(main())


def async_available() -> str | None:
    """None if the async variant can run, else why not."""
    try:
        import aiosqlite  # noqa: F401
        import langgraph.checkpoint.sqlite.aio  # noqa: F401
    except ImportError as error:
        return f"not installed ({error})"
    return None


# -- main ---------------------------------------------------------------------------------

LABELS = {
    "uwf": "uwf, {n} threads at once (one Store, {n} Python threads), fsync",
    "uwf-seq": "uwf, the same {n} threads one after another (one Python thread), fsync",
    "lg-seq": "LangGraph + SqliteSaver, {n} thread_ids one after another",
    "lg-threads": "LangGraph, {n} Python threads sharing one SqliteSaver",
    "lg-batch": "LangGraph, graph.batch of {n} (default thread pool, {w} workers)",
    "lg-async": "LangGraph, asyncio.gather of {n} ainvoke, AsyncSqliteSaver",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="4 threads x 50 steps, 1 round")
    parser.add_argument("--threads", type=int, default=16, help="threads (default 16)")
    parser.add_argument("--steps", type=int, default=200,
                        help="about this many steps a thread: 1 + 2 x (N // 2) (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.threads, args.steps, args.rounds = 4, 50, 1
    threads = args.threads
    reviews = max(args.steps // 2, 1)
    steps = 1 + 2 * reviews

    versions = langgraph_versions()
    work = fresh_dir(args.dir, "threads-concurrent")
    print_header(f"threads concurrent: {threads} threads stepped at once in one process, "
                 "uwf vs LangGraph", work)
    workers = min(32, (os.cpu_count() or 1) + 4)
    print(f"{threads} threads x {steps:,} steps (planner + {reviews:,} x (developer, reviewer)) "
          f"= {threads * steps:,} steps a variant; {args.rounds} round(s); uwf "
          f"UWF_DURABILITY=fsync; LangGraph default durability (\"async\"); {versions}")

    variants: dict[str, Callable[[int, int], Run]] = {
        "uwf": lambda n, r: uwf_run(work / "uwf", n, r, at_once=True),
        "uwf-seq": lambda n, r: uwf_run(work / "uwf-seq", n, r, at_once=False),
        "lg-seq": lambda n, r: lg_run(work / "lg-seq.sqlite3", n, r, "sequential"),
        "lg-threads": lambda n, r: lg_run(work / "lg-threads.sqlite3", n, r, "threads"),
        "lg-batch": lambda n, r: lg_run(work / "lg-batch.sqlite3", n, r, "batch"),
        "lg-async": lambda n, r: lg_async_run(work / "lg-async.sqlite3", n, r),
    }
    skipped: dict[str, str] = {}
    missing = async_available()
    if missing:
        skipped["lg-async"] = missing
        del variants["lg-async"]

    # Warm-up (imports, page cache) at a small size; a LangGraph variant failing here
    # is reported and left out.
    for name in list(variants):
        try:
            variants[name](min(threads, 4), min(reviews, 10))
        except VariantFailed as error:
            skipped[name] = f"failed: {error}"
            del variants[name]
    for name in ("uwf", "uwf-seq"):
        shutil.rmtree(work / name, ignore_errors=True)

    begin(args.wait_quiet)
    print(pressure())
    runs: dict[str, list[Run]] = {name: [] for name in variants}
    order = list(variants)
    for index in range(args.rounds):
        shift = index % len(order)
        for name in order[shift:] + order[:shift]:
            if name not in variants:
                continue
            try:
                runs[name].append(variants[name](threads, reviews))
            except VariantFailed as error:
                skipped[name] = f"failed in round {index + 1}: {error}"
                del variants[name]
                runs.pop(name)
        print(f"  round {index + 1}: " + ", ".join(
            f"{name} {runs[name][-1].rate:,.0f}/s" for name in order if name in runs),
            flush=True)
    for name in ("uwf", "uwf-seq"):
        shutil.rmtree(work / name, ignore_errors=True)

    section(f"result (medians over {args.rounds} round(s); end: {load()}; {pressure()})")
    print(f"{'variant':<76} {'steps/s':>9}   per round")
    for name, results in runs.items():
        label = LABELS[name].format(n=threads, w=workers)
        rates = [run.rate for run in results]
        print(f"{label:<76} {median(rates):9,.1f}   " + ", ".join(f"{r:,.1f}" for r in rates))
        if name in ("uwf", "lg-threads", "lg-async"):
            print(f"  (each thread's own run: {fmt_range(results)})")
    for name, why in skipped.items():
        print(f"{LABELS[name].format(n=threads, w=workers):<76} {'skipped':>9}   {why}")

    section("targets")
    gain = [a.rate / b.rate for a, b in zip(runs["uwf"], runs["uwf-seq"], strict=True)]
    print(f"uwf at once / uwf one after another     {spread(gain)}")
    lg_names = [name for name in runs if name.startswith("lg-")]
    if not lg_names:
        print("no LangGraph variant ran: no baseline")
        return 1
    fastest = max(lg_names, key=lambda name: median([run.rate for run in runs[name]]))
    ratio = [a.rate / b.rate for a, b in zip(runs["uwf"], runs[fastest], strict=True)]
    print(f"fastest LangGraph variant: {fastest} "
          f"({median([run.rate for run in runs[fastest]]):,.1f} steps/s)")
    for name in lg_names:
        each = [a.rate / b.rate for a, b in zip(runs["uwf"], runs[name], strict=True)]
        print(f"  uwf at once / {name:<12} {spread(each)}")
    print(f"uwf at once / fastest LangGraph ({fastest}): {median(ratio):.2f} x; "
          f"target >= {TARGET:g} x: {verdict(median(ratio) >= TARGET)}")
    return 0


def fmt_range(results: list[Run]) -> str:
    walls = [wall for run in results for wall in run.walls]
    return f"{min(walls):.2f}-{max(walls):.2f} s over all rounds"


if __name__ == "__main__":
    sys.exit(main())
