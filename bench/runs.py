"""The run registry at scale: `run search`, `history`, `run list`, `run show` and a rebuild.

    python bench/runs.py [--quick | --size N] [--small N] [--word WORD] [--repeat R]
                         [--rebuilds K] [--dir DIR] [--fresh] [--keep]
                         [--no-bytecode-cache] [--wait-quiet S] [--profile]

Two stores of the same mix of runs, one of 100,000 runs (`--size`; 10,000 with
`--quick`) and one of 100 (`--small`), written in bulk through uwf's own log
interface (`common.bulk_log`, no fsync, as UWF_DURABILITY=none would) with real
CAS nodes behind every reference, then `uwf registry rebuild` once (untimed).
A run is written as uwf's commands write it: `thread start` (`thread.started`
with its `inputsDigest`), `thread step` (`thread.step_started`, then
`thread.stepped`, `thread.step_failed` or `thread.blocked`), `thread kill`,
`run rerun` (`thread.started` + `run.rerun_linked` in one batch) and `run
archive` (`run.archived`, some time after the run ended). The mix: about 45 %
completed, 15 % failed, 15 % running (steps taken, none in flight), 5 % with a
step in flight (stalled by now: their deadlines passed long ago), 10 % cancelled,
5 % blocked, 5 % queued; about 7 % archived, 3 % reruns; 25 repos, two workflow
names; prompts of two lines drawn from a few hundred phrases and an issue
number, a quarter of them containing WORD (default "timeout").

Timed, as real CLI processes (`uwf --store S ...`), each end to end, R runs of
each (default 21; 15 with --quick), all interleaved in rotating order with
`python -c pass`:

- `run search --text WORD --limit 20`, `history --limit 20`,
  `run list --status failed --limit 50`: target big / small <= 1.5;
- `run show ID` (a completed run in the middle of each store): target <= 1.1.

Each output is checked once first (rows printed, totals). Then the same reads
in-process (open the store, read; medians of 51 calls, imports excluded), and
rebuilds of the big store, K times each (default 3; 1 with --quick), in
rotation: `uwf registry rebuild` (the CLI, every view), and in-process the
`runs` view alone (`Journal.rebuild` with only the runs projection, into a
scratch views file): events per second over the whole log, by wall time
(target >= 300,000/s) and by CPU time. A third, in-process, rebuilds the runs
view without its search text (no FTS index), to show where the time goes.
Stores live in DIR/runs and are deleted at the end unless --keep.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    BASE_MS,
    GENERATOR_VERSION,
    RunResult,
    _bench_cas,
    _example_payload,
    _mark,
    _reusable,
    add_common_args,
    begin,
    bulk_log,
    bytecode_env,
    check,
    data_dir,
    env_with,
    fmt_mib,
    fmt_ms,
    fmt_rate,
    load,
    median,
    pressure,
    print_header,
    profile,
    remove_store,
    run_measured,
    section,
    uwf_exe,
    verdict,
)

TARGET_LIST_RATIO = 1.5
TARGET_SHOW_RATIO = 1.1
TARGET_RATE = 300_000
SEARCH_LIMIT = 20
HISTORY_LIMIT = 20
LIST_LIMIT = 50
DEFAULT_WORD = "timeout"
RARE = "#1050"  # one prompt's issue number: about 50 of 100,000 runs
PROMPTS = 2_000  # distinct prompts (StartNodes) at most; runs share them
STEP_MS = 30_000  # one run started every 30 s: 100,000 runs span 35 days
RUN_GENERATOR = 1

# The lifecycle each generated run ends in, with its weight (per 100 runs).
MIX = (("completed", 45), ("failed", 15), ("running", 15), ("in-flight", 5),
       ("cancelled", 10), ("blocked", 5), ("queued", 5))
REPOS = tuple(f"/work/repos/{name}" for name in (
    "api", "web", "billing", "search", "auth", "mobile", "infra", "docs", "data", "ml",
    "payments", "gateway", "admin", "cli", "sdk", "reports", "mail", "chat", "media",
    "ops", "cache", "queue", "notify", "export", "import"))
VERBS = ("Fix", "Speed up", "Refactor", "Add tests for", "Document", "Simplify",
         "Investigate", "Harden", "Remove dead code in", "Upgrade the dependencies of")
THINGS = ("the login flow", "the search page", "the billing export", "the CI pipeline",
          "the retry loop", "the cache layer", "the password reset", "the CSV importer",
          "the webhook handler", "the PDF renderer", "the rate limiter", "the audit log",
          "the session store", "the upload form", "the nightly report", "the invite email",
          "the feature flags", "the admin dashboard", "the GraphQL schema", "the cron jobs")
# Two of eight second lines contain the search word: a quarter of the prompts.
DETAILS = ("Users report a {word} after 30 s on large accounts.",
           "It fails on Windows only, since the last release.",
           "The job hits its {word} when the queue is long.",
           "Memory grows by 200 MB per hour under load.",
           "The error message is unhelpful and untranslated.",
           "Two customers lost data last week; see the incident notes.",
           "The code path has no tests and three TODOs.",
           "p95 latency doubled after the ORM upgrade.")


@dataclass(frozen=True)
class Chain:
    """One prompt's nodes: its StartNode and the StepNodes runs of it reuse."""

    workflow: str
    name: str
    prompt: str
    start: str
    steps: dict[str, str]  # planner, developer, reviewer-ok, reviewer-no, developer-2, reviewer-2


@dataclass(frozen=True)
class GeneratedRuns:
    root: Path
    runs: int
    events: int
    seconds: float
    reused: bool


def prompt_text(rng: random.Random, word: str, issue: int) -> str:
    first = f"{rng.choice(VERBS)} {rng.choice(THINGS)} (#{issue})"
    return first + "\n" + rng.choice(DETAILS).format(word=word)


Outputs = dict[str, tuple[str, str, str]]  # key -> (output hash, status, next edge prompt)


def _outputs(cas: Any, payload: dict[str, Any]) -> Outputs:
    """The outputs every chain shares, with their status and the edge prompt they lead to."""
    roles = payload["roles"]
    made: Outputs = {}
    for key, role, output, next_prompt in (
        ("planner", "planner", {"status": "ready", "plan": "Bound the retries; add a test."},
         "Implement: Bound the retries; add a test."),
        ("developer", "developer", {"status": "done", "files": ["src/retry.py"],
                                    "summary": "retries bounded at 5"},
         "Review the change to src/retry.py: retries bounded at 5"),
        ("reviewer-ok", "reviewer", {"status": "approved"}, ""),
        ("reviewer-no", "reviewer", {"status": "rejected", "comments": "Add a test"},
         "Fix: Add a test"),
        ("developer-2", "developer", {"status": "done", "files": ["src/retry.py",
                                                                  "tests/test_retry.py"],
                                      "summary": "added a test"},
         "Review the change to src/retry.py,tests/test_retry.py: added a test"),
        ("reviewer-2", "reviewer", {"status": "approved"}, ""),
    ):
        made[key] = (cas.put(roles[role]["meta"], output), str(output["status"]), next_prompt)
    return made


def _chains(cas: Any, count: int, word: str, rng: random.Random
            ) -> tuple[list[Chain], Outputs]:
    """`count` prompts, each with its StartNode and a chain of StepNodes to share."""
    from uwf.cas.builtins import builtin_hash

    base = _example_payload(cas)
    workflow_type = builtin_hash("Workflow")
    workflows = [(cas.put(workflow_type, dict(base, name=name)), name)
                 for name in ("solve-issue", "fix-ci")]
    outputs = _outputs(cas, base)
    details = {key: cas.put_text(f"{key} transcript: what the agent did and why")
               for key in outputs}
    parents = {"planner": None, "developer": "planner", "reviewer-ok": "developer",
               "reviewer-no": "developer", "developer-2": "reviewer-no",
               "reviewer-2": "developer-2"}
    step_type = builtin_hash("StepNode")
    chains = []
    for index in range(count):
        workflow, name = workflows[1 if index % 5 == 4 else 0]
        prompt = prompt_text(rng, word, 1000 + index)
        start = cas.put(builtin_hash("StartNode"), {"workflow": workflow, "prompt": prompt})
        steps: dict[str, str] = {}
        for key, parent in parents.items():
            steps[key] = cas.put(step_type, {
                "start": start, "prev": None if parent is None else steps[parent],
                "role": key.partition("-")[0], "output": outputs[key][0],
                "detail": details[key], "agent": "uwf-mock"})
        chains.append(Chain(workflow, name, prompt, start, steps))
    return chains, outputs


@dataclass(frozen=True)
class Failed:
    """A failed run a later `run rerun` may take."""

    run_id: str
    repo: str
    chain: int
    origin: str
    generation: int


class RunWriter:
    """Writes one run's commands as uwf writes them, on a `BulkWriter`."""

    def __init__(self, writer: Any, outputs: Outputs, subject: str, chain: Chain, at: int
                 ) -> None:
        self.writer, self.outputs, self.subject, self.chain, self.at = (
            writer, outputs, subject, chain, at)

    def command(self, *events: Any, after: int) -> None:
        self.at += after
        self.writer.command([(self.subject, data) for data in events], self.at)

    def started(self, role: str, edge: str) -> str:
        """`thread.step_started` (phase 1 of `thread step`); its step id."""
        from ulid import ULID

        from uwf.threads.events import ThreadStepStarted

        step_id = str(ULID.from_timestamp(self.at + 1))
        self.command(ThreadStepStarted(step_id, role, edge, "mock", self.at + 3_630_000),
                     after=1)
        return step_id

    def step(self, key: str, edge: str, *, end: bool = False) -> None:
        """A whole accepted step: started, then stepped (and ended, at `$END`)."""
        from uwf.threads.events import ThreadEnded, ThreadStepped

        role = key.partition("-")[0]
        step_id = self.started(role, edge)
        output, status, _ = self.outputs[key]
        stepped = ThreadStepped(step_id, self.chain.steps[key], role, status, output)
        if end:
            self.command(stepped, ThreadEnded("end"), after=2_000)
        else:
            self.command(stepped, after=2_000)

    def play(self, final: str, rng: random.Random) -> None:
        """The run's steps, up to the lifecycle `final`."""
        from uwf.threads.events import ThreadBlocked, ThreadEnded, ThreadStepFailed

        plan, developed = self.outputs["planner"][2], self.outputs["developer"][2]
        if final == "queued":
            return
        if final == "blocked":
            self.command(ThreadBlocked("no-agent", "no agent configured for role planner "
                                       "(defaultAgent, agentOverrides)", "planner"), after=1)
            return
        self.step("planner", self.chain.prompt)
        if final == "cancelled":
            self.command(ThreadEnded("killed", "superseded"), after=500)
        elif final == "failed":
            step_id = self.started("developer", plan)
            self.command(ThreadStepFailed(step_id, "developer", "exit",
                                          "agent exited with status 1: tests failed"),
                         after=9_000)
        elif final == "in-flight":
            self.started("developer", plan)
        elif final == "running":
            self.step("developer", plan)
        elif rng.random() < 0.1:  # completed after one rejection
            self.step("developer", plan)
            self.step("reviewer-no", developed)
            self.step("developer-2", self.outputs["reviewer-no"][2])
            self.step("reviewer-2", self.outputs["developer-2"][2], end=True)
        else:
            self.step("developer", plan)
            self.step("reviewer-ok", developed, end=True)


def generate_runs(root: Path, runs: int, word: str, fresh: bool = False) -> GeneratedRuns:
    """A store of `runs` runs in the mix above, bulk-written; views not built."""
    wanted = {"runs": runs, "word": word, "generator": GENERATOR_VERSION,
              "kind": "runs", "runGenerator": RUN_GENERATOR}
    if _reusable(root, wanted, fresh):
        return GeneratedRuns(root, runs, 0, 0.0, True)

    from ulid import ULID

    from uwf.engine.events import FORMAT_VERSION, StoreCreated
    from uwf.runs.events import RunArchived, RunRerunLinked
    from uwf.threads.events import INPUTS_DIGEST_CHARS, ThreadStarted
    from uwf.workflows.events import WorkflowRegistered

    started_at = time.perf_counter()
    rng = random.Random(20261126)
    cas = _bench_cas(root)
    chains, outputs = _chains(cas, min(PROMPTS, runs), word, rng)
    lifecycles = [name for name, weight in MIX for _ in range(weight)]
    ended: list[tuple[int, str]] = []  # (index, id) of ended runs, archived some time later
    failed: list[Failed] = []
    ms = BASE_MS
    with bulk_log(root) as writer:
        first: list[tuple[str, Any]] = [("store", StoreCreated(format=FORMAT_VERSION))]
        for chain in {chain.name: chain for chain in chains}.values():
            first.append((f"workflow/{chain.name}",
                          WorkflowRegistered(chain.name, chain.workflow, None)))
        writer.command(first, ms)
        for index in range(runs):
            ms += STEP_MS
            run_id = str(ULID.from_timestamp(ms))
            rerun = failed.pop(rng.randrange(len(failed))) if (
                failed and rng.random() < 0.03) else None
            number = rerun.chain if rerun else rng.randrange(len(chains))
            chain = chains[number]
            repo = rerun.repo if rerun else REPOS[rng.randrange(len(REPOS))]
            run = RunWriter(writer, outputs, f"thread/{run_id}", chain, ms)
            started = ThreadStarted(chain.workflow, chain.name, chain.start, repo,
                                    inputs_digest=chain.prompt[:INPUTS_DIGEST_CHARS])
            if rerun:  # `run rerun`: the new thread and its link, in one batch
                run.command(started, RunRerunLinked(
                    rerun.run_id, rerun.repo, rerun.origin, rerun.generation + 1,
                    "retry after the fix"), after=0)
            else:
                run.command(started, after=0)
            final = lifecycles[rng.randrange(len(lifecycles))]
            run.play(final, rng)
            if final == "failed":
                failed.append(Failed(run_id, repo, number, rerun.origin if rerun else run_id,
                                     rerun.generation + 1 if rerun else 0))
            if final in ("completed", "cancelled", "failed"):
                ended.append((index, run_id))
            # `run archive` of a run that ended some 3,000 runs ago, now and then.
            if ended and ended[0][0] <= index - 3_000:
                _, old = ended.pop(0)
                if rng.random() < 0.1:
                    writer.command([(f"thread/{old}", RunArchived("done with it"))], run.at + 3)
        written = writer.seq
    _mark(root, wanted)
    return GeneratedRuns(root, runs, written, time.perf_counter() - started_at, False)


# -- measuring -------------------------------------------------------------------

@dataclass
class Command:
    label: str
    argv: list[str]
    runs: list[RunResult] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return median([run.wall for run in self.runs])


def build_current(root: Path, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """`uwf registry rebuild` once (untimed); `registry show` must then say valid."""
    start = time.perf_counter()
    check(run_measured([uwf_exe(), "--store", str(root), "registry", "rebuild"], env=env),
          "uwf registry rebuild")
    seconds = time.perf_counter() - start
    shown = run_measured([uwf_exe(), "--store", str(root), "registry", "show"], env=env)
    check(shown, "uwf registry show")
    status: dict[str, Any] = json.loads(shown.out)
    if status["status"] != "valid":
        sys.exit(f"bench: views of {root} are {status['status']} after rebuild")
    return seconds, status


def middle_completed(root: Path) -> str:
    """The id of the completed run in the middle of the store (for `run show`)."""
    from uwf.runs.service import RunFilter, search
    from uwf.store import Store

    store = Store.open(root)
    try:
        total = search(store, RunFilter(status="completed"), limit=0).total
        page = search(store, RunFilter(status="completed"), limit=1, offset=total // 2)
        return page.runs[0].run_id
    finally:
        store.close()


def check_outputs(commands: dict[str, Command], env: dict[str, str]) -> dict[str, str]:
    """One untimed run of each (it also warms the page cache): rows printed, of how many."""
    seen: dict[str, str] = {}
    for key, command in commands.items():
        result = run_measured(command.argv, env=env)
        check(result, command.label)
        if key == "python":
            continue
        payload = json.loads(result.out)
        if key.startswith("show"):
            if not payload.get("found"):
                sys.exit(f"bench: {command.label}: run not found")
            seen[key] = f"found, {payload['run']['lifecycle']}"
            continue
        rows, total = len(payload["runs"]), payload["total"]
        if rows == 0:
            sys.exit(f"bench: {command.label} printed no runs")
        seen[key] = f"{rows} rows of {total:,}"
    return seen


def in_process(roots: dict[str, Path], ids: dict[str, str], word: str, calls: int,
               profiled: bool) -> None:
    """The same reads in this process (a new Store each call, imports excluded)."""
    from uwf.runs.results import RunPage
    from uwf.runs.service import RunFilter, search, show
    from uwf.store import Store

    def opened(call: Callable[[Any], object]) -> Callable[[Path], object]:
        def run(root: Path) -> object:
            store = Store.open(root)
            try:
                return call(store)
            finally:
                store.close()
        return run

    reads: dict[str, Callable[[str], Callable[[Path], object]]] = {
        "run search --text": lambda size: opened(
            lambda s: search(s, RunFilter(text=word), SEARCH_LIMIT)),
        "history": lambda size: opened(
            lambda s: search(s, RunFilter(), HISTORY_LIMIT, newest_first=True)),
        "run list --status failed": lambda size: opened(
            lambda s: search(s, RunFilter(status="failed"), LIST_LIMIT)),
        "run show": lambda size: opened(lambda s: show(s, ids[size])),
        # Not targets, for comparison: a word few runs contain, and `running`, whose
        # deadline test is not in the (derived, created_at, key) index.
        f"run search --text {RARE}": lambda size: opened(
            lambda s: search(s, RunFilter(text=RARE), SEARCH_LIMIT)),
        "run list --status running": lambda size: opened(
            lambda s: search(s, RunFilter(status="running"), LIST_LIMIT)),
    }
    section(f"in-process: open the store and read (median of {calls} calls, imports excluded)")
    for label, make in reads.items():
        figures, totals = [], []
        for size in ("small", "big"):
            call = make(size)
            first = call(roots[size])
            totals.append(first.total if isinstance(first, RunPage) else 1)
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                call(roots[size])
                times.append(time.perf_counter() - start)
            figures.append(median(times))
        print(f"{label:<26} small {fmt_ms(figures[0]):>9}   big {fmt_ms(figures[1]):>9}   "
              f"ratio {figures[1] / figures[0]:6.2f}   (matches: {totals[0]:,} / {totals[1]:,})")
    if profiled:
        for label, make in reads.items():
            section(f"profile: {label}, in-process, 100 calls on the big store")
            call = make("big")
            profile(lambda c=call: [c(roots["big"]) for _ in range(100)],  # type: ignore[misc]
                    top=12)


@dataclass(frozen=True)
class Rebuilt:
    wall: float
    cpu: float  # this process's CPU seconds (in-process) or the child's (CLI)
    events: int


def rebuild_runs_view(root: Path, scratch: Path, *, search_text: bool = True) -> Rebuilt:
    """In-process: the `runs` view alone rebuilt from the whole log into a new views
    file (`Journal.rebuild` with only the runs projection). Without `search_text`,
    the same projection with no search text (no FTS index): where the time goes."""
    from typing import ClassVar

    from uwf.engine.clock import system_clock
    from uwf.engine.filelog import FileLog
    from uwf.engine.journal import Journal
    from uwf.engine.viewstore import SqliteViewStore
    from uwf.runs.projection import RunsProjection
    from uwf.store import event_catalog

    class WithoutText(RunsProjection):
        text: ClassVar[bool] = False

    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    projection = RunsProjection() if search_text else WithoutText()
    log = FileLog(root / "events", root / "lock", durable=False)
    views = SqliteViewStore(scratch / "views.sqlite3", [projection.spec()])
    journal = Journal(log, views, [projection], event_catalog(), clock=system_clock)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        head = journal.rebuild()
        rebuilt = Rebuilt(time.perf_counter() - wall, time.process_time() - cpu, head.seq)
    finally:
        views.close()
        log.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return rebuilt


def rebuilds(root: Path, events: int, times: int, *, env: dict[str, str], work: Path,
             profiled: bool) -> tuple[float, float]:
    """`uwf registry rebuild` (CLI), the runs view alone, and the runs view without its
    search text (both in-process), in rotation; (CLI rate, runs-view rate), by wall."""
    section(f"rebuild of the big store ({events:,} events), {times} times each, in rotation")
    cli: list[Rebuilt] = []
    rss: list[int] = []
    alone: list[Rebuilt] = []
    bare: list[Rebuilt] = []
    scratch = work / "runs-view-only"
    for index in range(times):
        result = run_measured([uwf_exe(), "--store", str(root), "registry", "rebuild"],
                              env=env, own_rss=True)
        check(result, "uwf registry rebuild")
        if json.loads(result.out).get("checkpoint") != events:
            sys.exit("bench: the rebuild did not reach the log's end")
        cli.append(Rebuilt(result.wall, result.cpu, events))
        rss.append(result.maxrss_kib)
        alone.append(rebuild_runs_view(root, scratch))
        bare.append(rebuild_runs_view(root, scratch, search_text=False))
        if alone[-1].events != events or bare[-1].events != events:
            sys.exit(f"bench: a runs-view rebuild stopped short of seq {events}")
        print(f"  {index + 1}: uwf registry rebuild {result.wall:.2f} s (CPU {result.cpu:.2f} s, "
              f"{fmt_mib(result.maxrss_kib)});  runs view alone {alone[-1].wall:.2f} s (CPU "
              f"{alone[-1].cpu:.2f} s);  without search text {bare[-1].wall:.2f} s (CPU "
              f"{bare[-1].cpu:.2f} s)")
    rates = {}
    for label, runs in (("uwf registry rebuild (CLI, all 5 views)", cli),
                        ("runs view alone (in-process)", alone),
                        ("runs view, no search text (in-process)", bare)):
        wall, cpu = median([r.wall for r in runs]), median([r.cpu for r in runs])
        rates[label] = events / wall
        print(f"{label:<40} {wall:6.2f} s  {fmt_rate(events / wall):>10}   CPU {cpu:6.2f} s  "
              f"{fmt_rate(events / cpu):>10} per CPU-second")
    print(f"uwf registry rebuild peak RSS: {fmt_mib(max(rss))}")
    if profiled:
        section("profile: the runs view alone, in-process")
        profile(lambda: rebuild_runs_view(root, scratch), top=15)
    return (rates["uwf registry rebuild (CLI, all 5 views)"],
            rates["runs view alone (in-process)"])


def add_store_args(parser: Any) -> None:
    """The two stores of runs a scale benchmark compares (this one, bench/dashboard.py,
    bench/reads.py): --size, --small, --word, --fresh and --keep."""
    parser.add_argument("--size", type=int, default=100_000,
                        help="runs in the big store (default 100,000)")
    parser.add_argument("--small", type=int, default=100,
                        help="runs in the small store (default 100)")
    parser.add_argument("--word", default=DEFAULT_WORD,
                        help=f"the word a quarter of the prompts contain (default {DEFAULT_WORD})")
    parser.add_argument("--fresh", action="store_true", help="regenerate the stores")
    parser.add_argument("--keep", action="store_true",
                        help="keep the stores afterwards (default: delete them)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    add_store_args(parser)
    parser.add_argument("--repeat", type=int,
                        help="timed runs of each command (default 21; 15 with --quick)")
    parser.add_argument("--rebuilds", type=int,
                        help="rebuilds of each kind (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="10,000 runs, 15 repeats")
    add_common_args(parser)
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE if set")
    parser.add_argument("--profile", action="store_true",
                        help="also profile each read, and the runs-view rebuild, in-process")
    args = parser.parse_args(argv)
    if args.quick:
        args.size = 10_000
    args.repeat = args.repeat or (15 if args.quick else 21)
    args.rebuilds = args.rebuilds or (1 if args.quick else 3)

    base = data_dir(args.dir)
    work = base / "runs"
    work.mkdir(parents=True, exist_ok=True)
    print_header("runs: `run search`, `history`, `run list`, `run show`, rebuild against "
                 "store size", work)
    env = env_with()
    if args.no_bytecode_cache:
        print(f"bytecode: as inherited (PYTHONDONTWRITEBYTECODE="
              f"{env.get('PYTHONDONTWRITEBYTECODE', '')!r})")
    else:
        env = bytecode_env(env, base / "pycache")
        print(f"bytecode: cached in {base / 'pycache'}, as in an installed uwf")

    roots: dict[str, Path] = {}
    events: dict[str, int] = {}
    for size, count in (("small", args.small), ("big", args.size)):
        made = generate_runs(work / f"runs-{count}", count, args.word, fresh=args.fresh)
        seconds, status = build_current(made.root, env)
        roots[size], events[size] = made.root, int(status["logSeq"])
        how = "reused" if made.reused else f"written in {made.seconds:.1f} s"
        rows = {name: view["rows"] for name, view in status["views"].items()}
        print(f"{size}: {made.root}  {count:,} runs, {events[size]:,} events ({how}; "
              f"`registry rebuild` {seconds:.1f} s); rows {rows}")

    ids = {size: middle_completed(root) for size, root in roots.items()}
    exe = uwf_exe()
    commands: dict[str, Command] = {}
    for size, root in roots.items():
        store = [exe, "--store", str(root)]
        n = f"{args.small if size == 'small' else args.size:,} runs"
        commands[f"search-{size}"] = Command(
            f"run search --text {args.word} --limit {SEARCH_LIMIT}, {n}",
            [*store, "run", "search", "--text", args.word, "--limit", str(SEARCH_LIMIT)])
        commands[f"history-{size}"] = Command(
            f"history --limit {HISTORY_LIMIT}, {n}",
            [*store, "history", "--limit", str(HISTORY_LIMIT)])
        commands[f"list-{size}"] = Command(
            f"run list --status failed --limit {LIST_LIMIT}, {n}",
            [*store, "run", "list", "--status", "failed", "--limit", str(LIST_LIMIT)])
        commands[f"show-{size}"] = Command(f"run show ID, {n}",
                                           [*store, "run", "show", ids[size]])
    commands["python"] = Command("python -c pass", [sys.executable, "-c", "pass"])
    section("outputs (checked once, untimed)")
    for key, seen in check_outputs(commands, env).items():
        print(f"{commands[key].label:<52} {seen}")

    begin(args.wait_quiet)
    print(pressure())
    order = list(commands.values())
    for index in range(args.repeat):
        shift = index % len(order)
        for command in order[shift:] + order[:shift]:
            result = run_measured(command.argv, env=env)
            check(result, command.label)
            command.runs.append(result)

    section(f"result (medians of {args.repeat} runs each, interleaved; end: {load()}; "
            f"{pressure()})")
    print(f"{'command':<52} {'wall':>9} {'min':>9} {'max':>9}")
    for command in commands.values():
        walls = [run.wall for run in command.runs]
        print(f"{command.label:<52} {fmt_ms(command.wall):>9} {fmt_ms(min(walls)):>9} "
              f"{fmt_ms(max(walls)):>9}")
    python = commands["python"].wall
    ratios: dict[str, float] = {}
    for what in ("search", "history", "list", "show"):
        big, small = commands[f"{what}-big"], commands[f"{what}-small"]
        ratios[what] = big.wall / small.wall
        print(f"ratio {what} big/small: {ratios[what]:.2f}  (small {small.wall / python:.2f} x, "
              f"big {big.wall / python:.2f} x python -c pass)")

    in_process(roots, ids, args.word, 51, args.profile)
    cli_rate, alone_rate = rebuilds(roots["big"], events["big"], args.rebuilds, env=env, work=work,
                                    profiled=args.profile)

    section("targets")
    for what, name, target in (
        ("search", f"run search --text {args.word} --limit {SEARCH_LIMIT}", TARGET_LIST_RATIO),
        ("history", f"history --limit {HISTORY_LIMIT}", TARGET_LIST_RATIO),
        ("list", f"run list --status failed --limit {LIST_LIMIT}", TARGET_LIST_RATIO),
        ("show", "run show ID", TARGET_SHOW_RATIO),
    ):
        print(f"{name}: {args.size:,} / {args.small:,} runs <= {target}: "
              f"{verdict(ratios[what] <= target)} ({ratios[what]:.2f})")
    print(f"rebuild >= {TARGET_RATE:,} events/s: `uwf registry rebuild` (all views) "
          f"{verdict(cli_rate >= TARGET_RATE)} ({fmt_rate(cli_rate)}); the runs view alone "
          f"{verdict(alone_rate >= TARGET_RATE)} ({fmt_rate(alone_rate)})")

    if args.keep:
        print(f"\nstores kept in {work}")
    else:
        for root in roots.values():
            remove_store(root)
        shutil.rmtree(work / "runs-view-only", ignore_errors=True)
        with contextlib.suppress(OSError):  # other sizes' stores, kept earlier, stay
            work.rmdir()
        print(f"\nstores deleted ({', '.join(str(root) for root in roots.values())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
