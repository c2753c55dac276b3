"""`run_thread` of a long looping thread (in-process agent, durable) beside LangGraph + SqliteSaver.

    python bench/thread_run.py [--quick | --steps N] [--rounds R] [--dir DIR]
                               [--wait-quiet S] [--profile]

uwf: examples/solve-issue.yaml (planner -> developer -> reviewer, the reviewer
rejecting until the last visit, then approving): `run_thread(store, thread,
in_process=agent, config=Config(WorkflowConfig(), None, None))` with
UWF_DURABILITY=fsync, the store under --dir on a real disk. N = 1,000 gives
1 + 2 x 500 = 1,001 steps. Each `step_thread` call that `run_thread` makes is
timed (by wrapping `uwf.threads.stepping.step_thread`). Stored bytes = growth of the
store folder (events + cas + views, after the store is closed) over the run;
file sizes, and the disk blocks they take. The same run with
UWF_DURABILITY=none shows uwf's own cost without the disk. As a check on the
first-100 / last-100 figure that time-varying load cannot skew, another thread is
stepped to 100 steps before its end, then blocks of 10 steps alternate between
its last 100 steps and the first 100 of a thread in a new store.

LangGraph: the same loop as a StateGraph (nodes planner, developer, reviewer;
conditional edges on the last output's status) compiled with SqliteSaver, a
sqlite file in the same folder, one thread_id, default durability ("async"),
recursion_limit = steps + 10, one `invoke`. The state carries what uwf's nodes
carry: the prompt, the last output of each role, and `messages` with an `add`
reducer, one {role, output, detail} per node execution (the history a LangGraph
app naturally keeps; SqliteSaver stores the whole state in every checkpoint).
The node outputs and details are the same as the uwf agent's, per visit.
Stored bytes = the sqlite file (+ -wal, -shm if present) after the connection
is closed. Because "async" durability lets nodes run ahead of their checkpoint
writes (the writes are awaited at the end), per-step cost is measured by a
second run of the same graph in chunks of 100 supersteps (recursion_limit=100;
GraphRecursionError caught; `invoke(None)` resumes the same thread_id), each
chunk's wall time / node executions. A third run with durability="sync" (each
checkpoint written before the next node) is shown for reference.

The floor (issue 30): the log bytes of a uwf run of the same thread (made once, with
UWF_DURABILITY=none, before the rounds), appended to one file by a bare loop, one
os.write a batch and an fdatasync after every batch uwf fsyncs (all but a step's
start): what any design that makes each step's result durable in one file pays.
Issue 30's targets are printed last: uwf >= 1 x LangGraph `sync` steps/s (per
round), CPU per step <= 0.8 ms.

Rounds (default 3) alternate the runs in rotating order, each on fresh
storage; figures are medians over rounds, speed ratios medians of per-round
ratios. Targets (issue): uwf >= 2 x LangGraph steps/s, uwf bytes/step <=
0.5 x LangGraph's, and uwf per-step cost last 100 / first 100 <= 1.2 (ratio
of medians).
"""

from __future__ import annotations

import argparse
import itertools
import operator
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

from common import (
    EXAMPLE,
    Usage,
    add_common_args,
    begin,
    fmt_bytes,
    fmt_ms,
    fresh_dir,
    load,
    median,
    pressure,
    print_header,
    profile,
    section,
    settings_of,
    spread,
    usage,
    verdict,
)

TARGET_SPEED = 2.0
TARGET_BYTES = 0.5
TARGET_GROWTH = 1.2
WINDOW = 100
PROMPT = "Fix the login bug in #42"
ROLES = ("planner", "developer", "reviewer")


# -- the agent, shared by both -----------------------------------------------------

def agent_output(role: str, visit: int, reviews: int) -> tuple[dict[str, Any], str]:
    """The n-th visit's (output, detail): the reviewer rejects until its last visit."""
    detail = f"{role}, visit {visit + 1}"
    if role == "planner":
        return {"status": "ready", "plan": "Reject empty passwords in login()"}, detail
    if role == "developer":
        return {"status": "done", "files": ["auth/login.py", "tests/test_login.py"],
                "summary": f"round {visit + 1}: login() refuses empty passwords"}, detail
    if visit + 1 >= reviews:
        return {"status": "approved"}, detail
    return {"status": "rejected", "comments": f"round {visit + 1}: add a test"}, detail


@dataclass
class Run:
    """One run of one side: its speed, its storage and its per-step costs."""

    label: str
    steps: int = 0
    seconds: float = 0.0
    cpu: float = 0.0  # CPU seconds of this process (all its threads) over the run
    stored: Usage = field(default_factory=lambda: Usage(0, 0, 0))
    costs: list[float] = field(default_factory=list)  # per step, seconds
    parts: dict[str, Usage] = field(default_factory=dict)  # stored, by folder

    @property
    def rate(self) -> float:
        return self.steps / self.seconds

    def window(self, last: bool) -> list[float]:
        size = min(WINDOW, len(self.costs) // 2)
        return self.costs[-size:] if last else self.costs[:size]

    @property
    def growth(self) -> float:
        return median(self.window(True)) / median(self.window(False))


# -- uwf ---------------------------------------------------------------------------

def uwf_run(root: Path, reviews: int, durability: str, label: str, *,
            profiled: bool = False) -> Run:
    """One thread run to its end in-process; every step_thread call timed.

    `profiled`: the run_thread call (and only it) runs under cProfile, printed after.
    """
    from uwf.config.configfile import Config, WorkflowConfig
    from uwf.store import Store
    from uwf.threads import stepping
    from uwf.threads.results import StepContext, ThreadRan, ThreadSummary
    from uwf.threads.service import start_thread
    from uwf.workflows.service import put_workflow

    shutil.rmtree(root, ignore_errors=True)
    os.environ["UWF_DURABILITY"] = durability
    store = Store.open(root)
    if store.durability != durability:
        sys.exit(f"bench: store opened with durability {store.durability}, wanted {durability}")
    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", PROMPT, repo=str(root),
                          **settings_of(start_thread, store)).thread
    store.close()
    folders = ("events", "cas", "views")
    before = {name: usage(root / name) for name in folders}
    total_before = usage(root)
    store = Store.open(root)

    def agent(ctx: StepContext) -> tuple[Any, str]:
        role = ctx.role["name"]
        return agent_output(role, ctx.visits.get(role, 0), reviews)

    run = Run(label)
    original = stepping.step_thread

    def timed(*args: Any, **kwargs: Any) -> ThreadSummary:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            run.costs.append(time.perf_counter() - start)

    results: list[ThreadRan] = []

    def execute() -> None:
        results.append(stepping.run_thread(store, thread, in_process=agent,
                                           max_steps=2 + 2 * reviews,
                                           config=Config(WorkflowConfig(), None, None),
                                           **settings_of(original, store)))

    stepping.step_thread = timed
    try:
        start, cpu = time.perf_counter(), time.process_time()
        if profiled:
            profile(execute, top=30)
        else:
            execute()
        run.seconds = time.perf_counter() - start
        run.cpu = time.process_time() - cpu
    finally:
        stepping.step_thread = original
    result = results[0]
    store.close()
    if not result.done:
        sys.exit(f"bench: the uwf thread did not end: {result}")
    run.steps = result.steps
    run.stored = usage(root) - total_before
    run.parts = {name: usage(root / name) - before[name] for name in folders}
    return run


def uwf_growth(work: Path, reviews: int, block: int = 10) -> tuple[list[float], list[float]]:
    """First WINDOW steps of a new thread vs the last WINDOW of a long one, interleaved.

    Store A's thread is stepped (step_thread, in-process, fsync) to WINDOW steps
    before its end; then blocks of `block` steps alternate between a new store
    B's first steps and A's last ones, so both windows see the same disk and CPU
    weather. Returns (B's first WINDOW step costs, A's last WINDOW step costs).
    """
    from uwf.config.configfile import Config, WorkflowConfig
    from uwf.store import Store
    from uwf.threads.results import StepContext
    from uwf.threads.service import show_thread, start_thread
    from uwf.threads.stepping import step_thread
    from uwf.workflows.service import put_workflow

    os.environ["UWF_DURABILITY"] = "fsync"
    config = Config(WorkflowConfig(), None, None)

    def agent(ctx: StepContext) -> tuple[Any, str]:
        role = ctx.role["name"]
        return agent_output(role, ctx.visits.get(role, 0), reviews)

    def opened(root: Path) -> tuple[Any, str]:
        shutil.rmtree(root, ignore_errors=True)
        store = Store.open(root)
        put_workflow(store, EXAMPLE)
        return store, start_thread(store, "solve-issue", PROMPT, repo=str(root),
                                   settings=store.settings).thread

    def steps(store: Any, thread: str, count: int, costs: list[float]) -> None:
        for _ in range(count):
            start = time.perf_counter()
            step_thread(store, thread, config=config, in_process=agent, settings=store.settings)
            costs.append(time.perf_counter() - start)

    total = 1 + 2 * reviews
    window = min(WINDOW, total // 2)
    old, old_thread = opened(work / "growth-old")
    steps(old, old_thread, total - window, [])
    new, new_thread = opened(work / "growth-new")
    first: list[float] = []
    last: list[float] = []
    for index in range(0, window, block):
        count = min(block, window - index)
        pair = [(new, new_thread, first), (old, old_thread, last)]
        for store, thread, costs in pair if index // block % 2 == 0 else pair[::-1]:
            steps(store, thread, count, costs)
    if not show_thread(old, old_thread).done:
        sys.exit("bench: the long thread did not end where expected")
    old.close()
    new.close()
    return first, last


# -- the floor: the step's bytes, written and fdatasynced by a bare loop ---------------

def step_writes(root: Path) -> tuple[list[tuple[bytes, bool]], int]:
    """The writes a uwf run made to its log, from its segments: each batch of lines as
    one write, and whether it was fsynced on its own (every batch but a step's start,
    which its result's fsync covers); and the number of steps (thread.stepped lines)."""
    import json

    writes: list[tuple[bytes, bool]] = []
    batch: list[bytes] = []
    steps = 0
    for segment in sorted((root / "events").glob("*.jsonl")):
        for raw in segment.read_bytes().splitlines(keepends=True):
            line = json.loads(raw)
            batch.append(raw)
            steps += line["type"] == "thread.stepped"
            k, n = line["batch"]
            if k == n:
                writes.append((b"".join(batch), line["type"] != "thread.step_started"))
                batch = []
    return writes, steps


def floor_run(path: Path, writes: list[tuple[bytes, bool]], steps: int) -> Run:
    """The same bytes as a uwf run's log, appended to one file by os.write, one write a
    batch, with an fdatasync where uwf fsyncs: what any design that makes each step's
    result (its event and nodes) durable in one file pays, and nothing else."""
    path.unlink(missing_ok=True)
    run = Run("floor")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for data, synced in writes:
            os.write(fd, data)
            if synced:
                os.fdatasync(fd)
        run.seconds = time.perf_counter() - start
        run.cpu = time.process_time() - cpu
    finally:
        os.close(fd)
    run.steps = steps
    run.stored = usage(path)
    run.costs = [run.seconds / steps] * steps
    return run


# -- LangGraph ------------------------------------------------------------------------

class State(TypedDict, total=False):
    """The LangGraph state: what uwf's nodes carry (module level, for get_type_hints)."""

    prompt: str
    planner: dict[str, Any]
    developer: dict[str, Any]
    reviewer: dict[str, Any]
    messages: Annotated[list[dict[str, Any]], operator.add]


def langgraph_versions() -> str:
    """LangGraph's and its SQLite saver's versions, as a run prints them; the bench
    exits saying what to install when they are missing."""
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        sys.exit("bench: needs LangGraph: pip install -e '.[bench]'")
    from importlib.metadata import version

    return (f"langgraph {version('langgraph')}, langgraph-checkpoint-sqlite "
            f"{version('langgraph-checkpoint-sqlite')}")


def langgraph_app(reviews: int, saver: Any, marks: list[float], *,
                  per_thread: bool = False) -> Any:
    """The loop as a StateGraph; the agent's visits are counted in the app, or with
    `per_thread` per thread_id (one app serving many threads: bench/threads_concurrent.py)."""
    from collections import Counter

    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END, START, StateGraph

    visits: Counter[tuple[str, str]] = Counter()

    def node(role: str) -> Callable[[State, RunnableConfig], dict[str, Any]]:
        def execute(state: State, config: RunnableConfig) -> dict[str, Any]:
            marks.append(time.perf_counter())
            thread = str(config["configurable"]["thread_id"]) if per_thread else ""
            output, detail = agent_output(role, visits[(thread, role)], reviews)
            visits[(thread, role)] += 1
            return {role: output, "messages": [{"role": role, "output": output,
                                                "detail": detail}]}
        return execute

    def after_planner(state: State) -> str:
        return "developer" if state["planner"]["status"] == "ready" else END

    def after_reviewer(state: State) -> str:
        return END if state["reviewer"]["status"] == "approved" else "developer"

    graph = StateGraph(State)
    for role in ROLES:
        graph.add_node(role, node(role))  # type: ignore[call-overload]
    graph.add_edge(START, "planner")
    graph.add_conditional_edges("planner", after_planner)
    graph.add_edge("developer", "reviewer")
    graph.add_conditional_edges("reviewer", after_reviewer)
    return graph.compile(checkpointer=saver)


def sqlite_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def langgraph_run(path: Path, reviews: int, steps: int, label: str, *,
                  durability: str | None = None, chunk: int | None = None) -> Run:
    """The loop in one invoke (or in chunks of `chunk` supersteps), checkpointed to sqlite."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.errors import GraphRecursionError

    for old in sqlite_files(path):
        old.unlink(missing_ok=True)
    marks: list[float] = []
    run = Run(label)
    config: dict[str, Any] = {"configurable": {"thread_id": "bench"},
                              "recursion_limit": chunk or steps + 10}
    options: dict[str, Any] = {} if durability is None else {"durability": durability}
    with SqliteSaver.from_conn_string(str(path)) as saver:
        app = langgraph_app(reviews, saver, marks)
        saver.setup()
        start, cpu = time.perf_counter(), time.process_time()
        state: Any = {"prompt": PROMPT}
        while True:
            count, began = len(marks), time.perf_counter()
            try:
                result = app.invoke(state, config, **options)
                finished = True
            except GraphRecursionError:
                if chunk is None:
                    raise
                finished = False
            if chunk is not None:
                done = len(marks) - count
                run.costs += [(time.perf_counter() - began) / max(done, 1)] * done
            state = None
            if finished:
                break
        run.seconds = time.perf_counter() - start
        run.cpu = time.process_time() - cpu
    run.steps = len(marks)
    if run.steps != steps or len(result["messages"]) != steps:
        sys.exit(f"bench: LangGraph ran {run.steps} nodes, wanted {steps}")
    if chunk is None:
        run.costs = [b - a for a, b in itertools.pairwise(marks)]
    run.stored = usage(*sqlite_files(path))
    return run


# -- main ---------------------------------------------------------------------------------

def show(label: str, runs: list[Run], note: str = "") -> None:
    rates = [run.rate for run in runs]
    per_step = [run.stored.apparent / run.steps for run in runs]
    on_disk = [run.stored.allocated / run.steps for run in runs]
    first = [median(run.window(False)) for run in runs]
    last = [median(run.window(True)) for run in runs]
    print(f"{label}{note}")
    cpu = [run.cpu / run.steps for run in runs]
    print(f"  CPU per step               {median(cpu) * 1e6:7,.0f} us   per round: "
          + ", ".join(f"{value * 1e6:,.0f} us" for value in cpu))
    print(f"  steps/s                    {median(rates):10,.1f}   per round: "
          + ", ".join(f"{rate:,.1f}" for rate in rates))
    print(f"  stored per step            {fmt_bytes(median(per_step)):>10}   "
          f"(disk blocks: {fmt_bytes(median(on_disk))}; files: "
          f"{median([run.stored.files for run in runs]):,.0f})")
    if runs[0].parts:
        print("    of which " + ", ".join(
            f"{name} {fmt_bytes(median([run.parts[name].apparent / run.steps for run in runs]))}"
            for name in runs[0].parts))
    print(f"  per-step cost, first {WINDOW}   {fmt_ms(median(first)):>10}   "
          f"(median of the window)")
    print(f"  per-step cost, last {WINDOW}    {fmt_ms(median(last)):>10}")
    print(f"  ratio last / first         {spread([run.growth for run in runs]):>10}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--steps", type=int, default=1000,
                        help="about this many steps: 1 + 2 x (N // 2) (default 1000)")
    parser.add_argument("--quick", action="store_true", help="200 steps")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    add_common_args(parser)
    parser.add_argument("--profile", action="store_true",
                        help="also profile one durable uwf run with cProfile")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 200
    reviews = max(args.steps // 2, 1)
    steps = 1 + 2 * reviews

    versions = langgraph_versions()
    work = fresh_dir(args.dir, "thread-run")
    print_header("thread run: a long looping thread, uwf run_thread vs LangGraph", work)
    print(f"{steps:,} steps: planner + {reviews:,} x (developer, reviewer); {args.rounds} "
          f"rounds; {versions}")

    sides: dict[str, Callable[[], Run]] = {
        "uwf": lambda: uwf_run(work / "uwf", reviews, "fsync", "uwf"),
        "uwf-none": lambda: uwf_run(work / "uwf-none", reviews, "none", "uwf-none"),
        "lg": lambda: langgraph_run(work / "lg.sqlite3", reviews, steps, "lg"),
        "lg-chunks": lambda: langgraph_run(work / "lg-chunks.sqlite3", reviews, steps,
                                           "lg-chunks", chunk=WINDOW),
        "lg-sync": lambda: langgraph_run(work / "lg-sync.sqlite3", reviews, steps, "lg-sync",
                                         durability="sync"),
    }
    uwf_run(work / "warm", min(reviews, 20), "fsync", "warm")  # imports, page cache
    uwf_run(work / "floor-source", reviews, "none", "floor-source")  # the floor's bytes
    writes, floor_steps = step_writes(work / "floor-source")
    sides["floor"] = lambda: floor_run(work / "floor.jsonl", writes, floor_steps)
    langgraph_run(work / "warm.sqlite3", min(reviews, 20), 1 + 2 * min(reviews, 20), "warm")
    shutil.rmtree(work / "warm", ignore_errors=True)

    begin(args.wait_quiet)
    print(pressure())
    runs: dict[str, list[Run]] = {name: [] for name in sides}
    growths: list[float] = []

    def growth_check() -> Run:
        first, last = uwf_growth(work, reviews)
        growths.append(median(last) / median(first))
        return Run("growth", len(first) + len(last), sum(first) + sum(last))

    sides["growth"] = growth_check
    runs["growth"] = []
    order = list(sides)
    for index in range(args.rounds):
        shift = index % len(order)
        for name in order[shift:] + order[:shift]:
            runs[name].append(sides[name]())
        print(f"  round {index + 1}: " + ", ".join(
            f"{name} {runs[name][-1].rate:,.0f}/s" for name in order if name != "growth")
            + f"; interleaved uwf last/first {growths[-1]:.2f}")

    section(f"result (medians over {args.rounds} rounds; end: {load()}; {pressure()})")
    show("uwf run_thread, in-process agent, UWF_DURABILITY=fsync", runs["uwf"],
         "  (per-step cost: each step_thread call)")
    show("uwf, UWF_DURABILITY=none (reference: uwf's own cost without fsync)",
         runs["uwf-none"])
    show("LangGraph StateGraph + SqliteSaver, default durability (async), one invoke",
         runs["lg"], "\n  (per-step cost: time between node starts, but with async durability "
         "the nodes run ahead of\n  their checkpoint writes, awaited at the end: see the "
         "chunked run for the cost per step)")
    show(f"LangGraph, same, in chunks of {WINDOW} supersteps resuming the thread_id",
         runs["lg-chunks"], "  (per-step cost: chunk wall time / nodes)")
    show('LangGraph, durability="sync" (reference: each checkpoint before the next node)',
         runs["lg-sync"], "  (per-step cost: time between node starts)")
    show("floor: uwf's log bytes, one os.write a batch, fdatasync where uwf fsyncs "
         "(no uwf)", runs["floor"])

    section("targets")
    speed = [a.rate / b.rate for a, b in zip(runs["uwf"], runs["lg"], strict=True)]
    uwf_bytes = median([run.stored.apparent / run.steps for run in runs["uwf"]])
    lg_bytes = median([run.stored.apparent / run.steps for run in runs["lg"]])
    uwf_disk = median([run.stored.allocated / run.steps for run in runs["uwf"]])
    lg_disk = median([run.stored.allocated / run.steps for run in runs["lg"]])
    growth = median([run.growth for run in runs["uwf"]])
    def versus(other: str) -> str:
        return spread([a.rate / b.rate for a, b in zip(runs["uwf"], runs[other], strict=True)])

    print(f"uwf / LangGraph steps/s, per round   {spread(speed)}")
    print(f"  (vs LangGraph sync: {versus('lg-sync')}; "
          f"vs LangGraph in chunks: {versus('lg-chunks')})")
    print(f"uwf / LangGraph bytes per step       {uwf_bytes / lg_bytes:.3f}  "
          f"({fmt_bytes(uwf_bytes)} / {fmt_bytes(lg_bytes)}; in disk blocks "
          f"{uwf_disk / lg_disk:.3f}: {fmt_bytes(uwf_disk)} / {fmt_bytes(lg_disk)})")
    within = spread([run.growth for run in runs["uwf"]])
    print(f"uwf last {WINDOW} / first {WINDOW} per step      {within}  (within each run_thread)")
    print(f"  interleaved check: a long thread's last {WINDOW} steps / a new thread's first "
          f"{WINDOW},\n  alternating blocks of 10 (same weather): {spread(growths)}")
    print(f"target uwf >= {TARGET_SPEED:g} x LangGraph steps/s:       "
          f"{verdict(median(speed) >= TARGET_SPEED)} ({median(speed):.2f} x)")
    print(f"target uwf <= {TARGET_BYTES:g} x LangGraph bytes per step: "
          f"{verdict(uwf_bytes / lg_bytes <= TARGET_BYTES)} ({uwf_bytes / lg_bytes:.3f} x; "
          f"disk blocks: {verdict(uwf_disk / lg_disk <= TARGET_BYTES)}, "
          f"{uwf_disk / lg_disk:.3f} x)")
    print(f"target uwf last/first {WINDOW} <= {TARGET_GROWTH:g}:          "
          f"{verdict(growth <= TARGET_GROWTH)} ({growth:.2f} within the runs; interleaved "
          f"check: {verdict(median(growths) <= TARGET_GROWTH)}, {median(growths):.2f})")

    section("issue 30 targets")
    cpu = median([run.cpu / run.steps for run in runs["uwf"]])
    floor_cpu = median([run.cpu / run.steps for run in runs["floor"]])
    own = median([run.cpu / run.steps for run in runs["uwf-none"]])
    sync = [a.rate / b.rate for a, b in zip(runs["uwf"], runs["lg-sync"], strict=True)]
    print(f"uwf / LangGraph sync steps/s, per round   {spread(sync)}")
    print(f"uwf CPU per step {cpu * 1e6:,.0f} us (without fsync {own * 1e6:,.0f} us); the "
          f"floor's {floor_cpu * 1e6:,.0f} us, LangGraph sync "
          f"{median([run.cpu / run.steps for run in runs['lg-sync']]) * 1e6:,.0f} us")
    print(f"target uwf >= 1 x LangGraph sync steps/s: {verdict(median(sync) >= 1)} "
          f"({median(sync):.2f} x)")
    print(f"target CPU per step <= 0.8 ms:            {verdict(cpu <= 0.0008)} "
          f"({cpu * 1e3:.2f} ms)")

    if args.profile:
        section(f"profile: one durable uwf run of {steps:,} steps")
        uwf_run(work / "profiled", reviews, "fsync", "profiled", profiled=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
