"""Shared helpers for the benchmarks: where data lives, timing, RSS, the log generator.

Benchmarks are plain scripts (`python bench/<name>.py`), never timed assertions
in tests. Each one prints its figures beside a baseline measured in the same run.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "solve-issue.yaml"
BIN = Path(sys.executable).parent
GENERATOR_VERSION = 2  # 2: written through FileLog sessions (the event-level log)
BASE_MS = 1_790_000_000_000  # 2026-09-21: the generated log's first timestamp


# -- figures ------------------------------------------------------------------

def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def fmt_rate(per_second: float) -> str:
    return f"{per_second:,.0f}/s"


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def fmt_mib(kib: int) -> str:
    return f"{kib / 1024:.0f} MiB"


def verdict(met: bool) -> str:
    return "MET" if met else "NOT MET"


def section(title: str) -> None:
    print(f"\n== {title}")


# -- where the data lives -------------------------------------------------------

def mount_of(path: Path) -> tuple[str, str, str]:
    """(device, mount point, filesystem type) of the mount holding `path`."""
    path = path.resolve()
    best = ("?", "/", "?")
    with open("/proc/mounts", encoding="utf-8") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) < 3:
                continue
            device, point, fstype = parts[0], parts[1].replace("\\040", " "), parts[2]
            if (path == Path(point) or Path(point) in path.parents) and len(point) >= len(
                best[1]
            ):
                best = (device, point, fstype)
    return best


def describe_fs(path: Path) -> str:
    device, point, fstype = mount_of(path)
    return f"{fstype} on {device} (mounted at {point})"


def data_dir(explicit: str | None) -> Path:
    """Where benchmark stores go: --dir > $UWF_BENCH_DIR > bench/out (git-ignored).

    It must be a real disk, like the one /work is on: tmpfs would make fsync free
    and every durable figure meaningless, so it is refused.
    """
    chosen = Path(explicit or os.environ.get("UWF_BENCH_DIR") or REPO / "bench" / "out")
    chosen.mkdir(parents=True, exist_ok=True)
    chosen = chosen.resolve()
    _, _, fstype = mount_of(chosen)
    if fstype in ("tmpfs", "ramfs"):
        sys.exit(f"bench: {chosen} is on {fstype}; give --dir on a real disk")
    work_dev = os.stat(REPO).st_dev
    if os.stat(chosen).st_dev != work_dev:
        print(f"note: {chosen} is not on the same filesystem as {REPO}", file=sys.stderr)
    return chosen


def fresh_dir(explicit: str | None, name: str) -> Path:
    """An empty folder `name` under the data dir (`data_dir`): one benchmark's stores."""
    work = data_dir(explicit) / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return work


def machine() -> dict[str, str]:
    model = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "kernel": platform.release(),
    }


def code_version() -> str:
    """Which uwf is measured: the work tree (commit, dirty or not) or a snapshot.

    To measure one commit while others edit the tree, export it and put it
    first on PYTHONPATH (children inherit it):
    `git archive HEAD uwf | tar -x -C SNAP && git rev-parse HEAD > SNAP/COMMIT`.
    """
    import uwf

    package = Path(uwf.__file__).resolve().parent
    if package != REPO / "uwf":
        marker = package.parent / "COMMIT"
        commit = marker.read_text("utf-8").strip() if marker.exists() else "unknown commit"
        return f"uwf from {package} (snapshot of {commit})"
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "uwf"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"uwf from {package}"
    return f"uwf from {package}, commit {head}" + (
        " + uncommitted changes in uwf/" if dirty else "")


def code_of(rev: str, into: Path) -> Path:
    """`rev`'s `uwf/` package, extracted into `into` (made if missing) and compiled: a
    folder to put first on a child's PYTHONPATH, to measure that commit's code beside
    the work tree's (compiled here, so no measured run pays for compiling it, whether or
    not the runs may write bytecode)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "uwf"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "uwf")], check=True,
                   stdout=subprocess.DEVNULL)
    return into


def callgrind_sides(base: str | None, work: Path) -> dict[str, Path | None]:
    """For an instruction count A/B: valgrind there (else exit), `work` made empty, and
    the code of each side by name: `base`'s `uwf/` (`code_of`) when given, then the work
    tree's (None: as installed)."""
    if shutil.which("valgrind") is None:
        sys.exit("bench: valgrind is not installed (apt-get install valgrind)")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sides: dict[str, Path | None] = {"work tree": None}
    return sides if base is None else {base: code_of(base, work / "base"), **sides}


def side_env(uwf_path: Path | None, durability: str) -> dict[str, str]:
    """The environment of an instruction count's child: no UWF_ variable of this shell
    but UWF_DURABILITY=`durability`, hashing seeded, and the side's code first on
    PYTHONPATH (`uwf_path`; None: the work tree as installed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
    env.update(UWF_DURABILITY=durability, PYTHONHASHSEED="0")
    if uwf_path is not None:
        env["PYTHONPATH"] = str(uwf_path)
    else:
        env.pop("PYTHONPATH", None)
    return env


def callgrind_total(out: Path) -> int:
    """The instructions callgrind counted in all, from its output file `out`."""
    import re

    found = re.search(rb"^(?:summary|totals): (\d+)", out.read_bytes(), re.MULTILINE)
    if found is None:
        sys.exit(f"bench: no total in callgrind's output {out}")
    return int(found.group(1))


def takes(function: Callable[..., Any], name: str) -> bool:
    """Whether `function` has a parameter `name`: an A/B bench also runs an older
    commit's code, whose signatures may be older."""
    import inspect

    return name in inspect.signature(function).parameters


def settings_of(step: Callable[..., Any], store: Any) -> dict[str, Any]:
    """`settings=` for uwf's `run_thread` or `step_thread` when it takes them."""
    return {"settings": store.settings} if takes(step, "settings") else {}


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs, from /proc/stat."""
    with open("/proc/stat", encoding="utf-8") as handle:
        fields = [int(value) for value in handle.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def cpu_busy(seconds: float = 1.0) -> float:
    """Fraction of all CPUs busy over the next `seconds` (this process sleeps)."""
    busy0, total0 = _cpu_times()
    time.sleep(seconds)
    busy1, total1 = _cpu_times()
    return (busy1 - busy0) / max(1, total1 - total0)


def load() -> str:
    """Load averages and CPU use right now: others' work on a shared box shows here."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}, CPUs {cpu_busy(0.5):.0%} busy"


def wait_quiet(limit: float, busy: float = 0.15, steady: int = 3) -> None:
    """Wait up to `limit` seconds for `steady` seconds in a row with CPUs < `busy` used.

    Other people's test runs on a 2-core machine move every figure; starting in
    a quiet moment helps, and the header says whether one was found.
    """
    if limit <= 0:
        return
    deadline = time.monotonic() + limit
    quiet = 0
    while time.monotonic() < deadline:
        quiet = quiet + 1 if cpu_busy(1.0) < busy else 0
        if quiet >= steady:
            print(f"quiet: CPUs under {busy:.0%} busy for {steady} s")
            return
    print(f"quiet: not found within {limit:g} s; measuring anyway")


def interleave(
    sides: dict[str, Callable[[], float]], blocks: int, budget: float = 0.0, least: int = 10
) -> dict[str, list[float]]:
    """Run each side's block (returning a rate) `blocks` times, rotating the order.

    Short alternating blocks see the same disk and CPU weather, so per-block
    ratios stay meaningful on a shared, noisy machine where long rounds do not.
    With a `budget` (seconds), stop early once it is spent and `least` blocks ran:
    a slow disk then costs fewer blocks, not a longer run.
    """
    results: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    start = time.monotonic()
    for index in range(blocks):
        if budget > 0 and index >= least and time.monotonic() - start > budget:
            print(f"  (budget of {budget:g} s spent: stopped after {index} of {blocks} blocks)")
            break
        shift = index % len(order)
        for name in order[shift:] + order[:shift]:
            results[name].append(sides[name]())
    return results


def ratios(top: Sequence[float], bottom: Sequence[float]) -> list[float]:
    return [a / b for a, b in zip(top, bottom, strict=True)]


def spread(values: Sequence[float]) -> str:
    """Median with the quartiles, for per-block figures."""
    if len(values) < 4:
        return f"{median(values):.2f}"
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"{median(values):.2f} (quartiles {q1:.2f}-{q3:.2f})"


def add_common_args(parser: Any) -> None:
    parser.add_argument("--dir", help="data directory (default bench/out, or $UWF_BENCH_DIR)")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                        help="first wait up to S seconds for idle CPUs (default 0: don't)")


def begin(quiet: float) -> None:
    """Right before timing: wait for a quiet moment if asked, then say how busy it is."""
    wait_quiet(quiet)
    print(f"start: {load()}")


def print_header(title: str, where: Path) -> None:
    info = machine()
    print(f"# {title}")
    print(f"machine: nproc={info['nproc']}  cpu={info['cpu']}  {info['python']}  "
          f"linux {info['kernel']}")
    print(f"code: {code_version()}")
    print(f"data dir: {where}  [{describe_fs(where)}]")


# -- running processes -----------------------------------------------------------

@dataclass(frozen=True)
class RunResult:
    code: int
    wall: float  # seconds
    cpu: float  # the child's user + system seconds
    maxrss_kib: int  # peak resident set of the child, KiB
    out: bytes
    err: bytes


def run_measured(argv: Sequence[str], env: dict[str, str] | None = None,
                 own_rss: bool = False) -> RunResult:
    """Run a child to completion: wall time and its peak RSS (wait4 rusage).

    Output goes to unlinked temp files, not pipes, so no reader thread runs
    while the child is timed. The wait4 RSS is never below this process's own
    peak: Linux counts the memory a child shares with its parent between fork
    (or vfork) and exec. With `own_rss` the child is started by GNU time
    instead (a ~2 MiB process; its `%M` is the child's peak RSS): wall times
    then include GNU time's own fork and exec, well under a millisecond.
    """
    import tempfile

    report = None
    if own_rss:
        if not os.access(TIME, os.X_OK):
            sys.exit(f"bench: {TIME} (GNU time) is needed to measure a child's own peak RSS")
        report = tempfile.NamedTemporaryFile(prefix="uwf-bench-rss-")  # noqa: SIM115
        argv = [TIME, "-f", "%M", "-o", report.name, *argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        rss = int(usage.ru_maxrss)
        if report is not None:
            with report:
                words = Path(report.name).read_text("utf-8").split()
            # GNU time writes "Command exited with non-zero status N" first on failure.
            rss = int(words[-1]) if words and words[-1].isdigit() else 0
        return RunResult(proc.returncode, wall, cpu, rss, out.read(), err.read())


TIME = "/usr/bin/time"


def peak_rss(argv: Sequence[str], env: dict[str, str] | None = None) -> int:
    """A child's own peak RSS in KiB (started by GNU time, see `run_measured`)."""
    result = run_measured(argv, env=env, own_rss=True)
    check(result, " ".join(argv[:4]))
    return result.maxrss_kib


def uwf_exe() -> str:
    return shutil.which("uwf", path=str(BIN)) or "uwf"


def check(result: RunResult, what: str) -> None:
    if result.code != 0:
        sys.exit(f"bench: {what} failed with exit {result.code}:\n"
                 f"{result.err.decode(errors='replace')}")


def env_with(**changes: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(changes)
    return env


def profile(call: Callable[[], object], top: int = 20) -> None:
    """Run `call` under cProfile and print where the time goes."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    call()
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


# -- a realistic log, generated fast ------------------------------------------------

@dataclass(frozen=True)
class GeneratedLog:
    root: Path
    events: int
    names: int
    seconds: float
    reused: bool


class BulkWriter:
    """Appends commands' events as chained lines, in big batches, through the log interface.

    The lines are the ones `Journal._append` writes (one `Envelope` per event,
    `encode_line`, `prev` = `digest` of the line before, `batch` = (k, n) within a
    command, one id and ts per command); they are buffered and handed to one
    `FileLog(...).exclusive()` session with `append(lines)` every `flush_lines`
    lines, always at a command boundary. No fsync (durability none): a bulk load.
    Views are not touched: run `uwf registry rebuild` (or any read) afterwards.
    """

    def __init__(self, session: Any, head: Any, flush_lines: int) -> None:
        self.session = session
        self.seq: int = head.seq
        self.prev: str = head.digest
        self.flush_lines = flush_lines
        self._pending: list[bytes] = []

    def command(self, events: Sequence[tuple[str, Any]], ms: int) -> None:
        """One command's events, `(subject, EventData)` each, stamped at `ms`."""
        from ulid import ULID

        from uwf.engine.clock import format_ts
        from uwf.engine.events import Envelope, digest, encode_line

        ts = format_ts(ms)
        count = len(events)
        for index, (subject, data) in enumerate(events):
            self.seq += 1
            raw = encode_line(Envelope(
                seq=self.seq, id=str(ULID.from_timestamp(ms)), ts=ts, type=data.type,
                subject=subject, batch=(index + 1, count), data=data, prev=self.prev))
            self.prev = digest(raw)
            self._pending.append(raw)
        if len(self._pending) >= self.flush_lines:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        head = self.session.append(self._pending)
        self._pending = []
        if head.seq != self.seq or head.digest != self.prev:
            sys.exit(f"bench: the log's head is {head}, the writer expected seq {self.seq}")


@contextlib.contextmanager
def bulk_log(root: Path, flush_lines: int = 20_000) -> Iterator[BulkWriter]:
    """A `BulkWriter` on the file log of the store at `root` (durability none)."""
    from uwf.engine.filelog import FileLog

    log = FileLog(root / "events", root / "lock", durable=False)
    try:
        with log.exclusive() as session:
            head, repairs = session.recover()
            if repairs:
                sys.exit(f"bench: {root} had a torn tail; delete it and generate again")
            writer = BulkWriter(session, head, flush_lines)
            yield writer
            writer.flush()
    finally:
        log.close()


def _bench_cas(root: Path) -> Any:
    """The store's CAS without fsync (a bulk load), its built-in schemas present."""
    from uwf.cas.backends import FileBlobs
    from uwf.cas.store import Cas
    from uwf.engine.clock import system_clock

    cas = Cas(FileBlobs(root / "cas", durable=False, wall=system_clock), clock=system_clock)
    cas.ensure_builtins()
    return cas


def _example_payload(cas: Any) -> dict[str, Any]:
    """The Workflow payload of examples/solve-issue.yaml, its role schemas stored."""
    from uwf.config.yamlfile import load_yaml
    from uwf.language.compile import compile_workflow

    payload, schemas = compile_workflow(cas, load_yaml(EXAMPLE))
    for schema in schemas:
        cas.put_schema(schema)
    return payload


def workflow_name(index: int) -> str:
    return f"wf-{index:04d}"


def _workflow_payloads(cas: Any, names: int) -> dict[str, tuple[str, str]]:
    """Two versions of a real Workflow node per name; name -> (hash v0, hash v1)."""
    from uwf.cas.builtins import builtin_hash

    payload = _example_payload(cas)
    workflow_type = builtin_hash("Workflow")
    hashes: dict[str, tuple[str, str]] = {}
    for index in range(names):
        name = workflow_name(index)
        versions = []
        for version in range(2):
            node = dict(payload, name=name, description=f"{name}, version {version}")
            versions.append(cas.put(workflow_type, node))
        hashes[name] = (versions[0], versions[1])
    return hashes


def _commands(events: int, names: int) -> Iterator[list[tuple[str, int]]]:
    """The generated history as commands: lists of (name, version) registered together.

    Most commands register one workflow; every 50th registers three at once (a
    batch of three lines), so replay sees multi-line batches too. Each name
    flips between its two versions, so `previous` is always set after the first.
    """
    produced = 1  # store.created
    command = 0
    cursor = 0
    while produced < events:
        size = 3 if command % 50 == 49 else 1
        size = min(size, events - produced)
        batch = []
        for _ in range(size):
            batch.append((workflow_name(cursor % names), (cursor // names) % 2))
            cursor += 1
        produced += size
        command += 1
        yield batch


def _reusable(root: Path, wanted: dict[str, Any], fresh: bool) -> bool:
    """Whether a store made with the same parameters (`wanted`) is there; else clear it."""
    marker = root.parent / f"{root.name}.json"
    if not fresh and marker.exists() and (root / "events").exists():
        try:
            if json.loads(marker.read_text("utf-8")) == wanted:
                return True
        except ValueError:
            pass
    marker.unlink(missing_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    return False


def _mark(root: Path, wanted: dict[str, Any]) -> None:
    (root.parent / f"{root.name}.json").write_text(json.dumps(wanted), "utf-8")


def remove_store(root: Path) -> None:
    """Delete a generated store and its marker."""
    shutil.rmtree(root, ignore_errors=True)
    (root.parent / f"{root.name}.json").unlink(missing_ok=True)


def generate_log(root: Path, events: int, names: int = 1000, fresh: bool = False) -> GeneratedLog:
    """A store of `events` real events, written in bulk through uwf's log interface.

    The first command carries `store.created` (as `Journal.write` does for a new
    store), then `workflow.registered` over `names` names, each pointing at a
    real Workflow node in the CAS. No fsync (durability none): this is a bulk
    load (`BulkWriter`). Views are not built here. A store made with the same
    parameters is reused unless `fresh`.
    """
    wanted = {"events": events, "names": names, "generator": GENERATOR_VERSION}
    if _reusable(root, wanted, fresh):
        return GeneratedLog(root, events, names, 0.0, True)

    from uwf.engine.events import FORMAT_VERSION, StoreCreated
    from uwf.workflows.events import WorkflowRegistered

    start = time.perf_counter()
    hashes = _workflow_payloads(_bench_cas(root), names)
    current: dict[str, str] = {}
    ms = BASE_MS
    with bulk_log(root) as writer:
        for number, batch in enumerate(_commands(events, names)):
            new: list[tuple[str, Any]] = []
            if number == 0:
                new.append(("store", StoreCreated(format=FORMAT_VERSION)))
            for name, version in batch:
                target = hashes[name][version]
                new.append((f"workflow/{name}",
                            WorkflowRegistered(name, target, current.get(name))))
                current[name] = target
            ms += 7
            writer.command(new, ms)
        written = writer.seq
    if written != events:
        sys.exit(f"bench: generator wrote {written} events, wanted {events}")
    _mark(root, wanted)
    return GeneratedLog(root, events, names, time.perf_counter() - start, False)


@dataclass(frozen=True)
class GeneratedThreads:
    root: Path
    threads: int
    active: int
    events: int
    seconds: float
    reused: bool


def thread_states(threads: int, active: int) -> list[str]:
    """Each generated thread's final state, in creation order: `active` of them spread
    evenly (the last one among them), every tenth of the rest killed, the others ended."""
    spacing = threads / max(1, active)
    chosen = {threads - 1 - int(index * spacing) for index in range(min(active, threads))}
    states = []
    for index in range(threads):
        if index in chosen:
            states.append("active")
        else:
            states.append("killed" if index % 10 == 9 else "ended")
    return states


def generate_threads(root: Path, threads: int, active: int, fresh: bool = False
                     ) -> GeneratedThreads:
    """A store holding `threads` threads of examples/solve-issue.yaml, `active` still going.

    Commands as uwf writes them (one event each, as `thread start`, `thread step`
    and `thread kill` do), thread after thread: `workflow.registered`, then per
    thread `thread.started`, `thread.step_started` (planner) and `thread.stepped`.
    An ended thread's planner answered "unclear" and the thread reached `$END`
    (`thread.ended`, reason end, in the step's batch, as `thread step` writes it); a
    killed one answered "ready" and was killed;
    an active one answered "ready" and waits for its developer. The CAS holds the
    real Workflow node, one StartNode and the two planner StepNodes (with their
    outputs and details) that all threads share: `thread list` and `registry show`
    read only the views. Bulk-written without fsync; views not built.
    """
    wanted = {"threads": threads, "active": active, "generator": GENERATOR_VERSION,
              "kind": "threads"}
    if _reusable(root, wanted, fresh):
        return GeneratedThreads(root, threads, active, 0, 0.0, True)

    from ulid import ULID

    from uwf.cas.builtins import builtin_hash
    from uwf.engine.events import FORMAT_VERSION, StoreCreated
    from uwf.threads.events import (
        ThreadEnded,
        ThreadStarted,
        ThreadStepped,
        ThreadStepStarted,
    )
    from uwf.workflows.events import WorkflowRegistered

    start = time.perf_counter()
    cas = _bench_cas(root)
    payload = _example_payload(cas)
    workflow = cas.put(builtin_hash("Workflow"), payload)
    name = str(payload["name"])
    begin_node = cas.put(builtin_hash("StartNode"),
                         {"workflow": workflow, "prompt": "Fix the flaky test in tests/"})
    planner_meta = payload["roles"]["planner"]["meta"]
    steps: dict[str, tuple[str, str]] = {}  # status -> (StepNode, output)
    for status, extra in (("ready", {"plan": "Retry the fixture's connection."}),
                          ("unclear", {"question": "Which test is flaky?"})):
        output = cas.put(planner_meta, {"status": status, **extra})
        detail = cas.put_text(f"planner transcript ({status})")
        step = cas.put(builtin_hash("StepNode"), {
            "start": begin_node, "prev": None, "role": "planner", "output": output,
            "detail": detail, "agent": "mock"})
        steps[status] = (step, output)

    repo = "/work/bench-repo"
    ms = BASE_MS
    with bulk_log(root) as writer:
        writer.command([("store", StoreCreated(format=FORMAT_VERSION)),
                        (f"workflow/{name}", WorkflowRegistered(name, workflow, None))], ms)
        for final in thread_states(threads, active):
            ms += 11
            thread = str(ULID.from_timestamp(ms))
            subject = f"thread/{thread}"
            writer.command([(subject, ThreadStarted(workflow, name, begin_node, repo))], ms)
            step_id = str(ULID.from_timestamp(ms + 1))
            writer.command([(subject, ThreadStepStarted(
                step_id, "planner", "Fix the flaky test in tests/", "mock", ms + 600_000))],
                ms + 1)
            status = "unclear" if final == "ended" else "ready"
            head, output = steps[status]
            stepped = (subject, ThreadStepped(step_id, head, "planner", status, output))
            if final == "ended":  # `$END` ends the thread in the step's own batch
                writer.command([stepped, (subject, ThreadEnded("end"))], ms + 5)
            else:
                writer.command([stepped], ms + 5)
            if final == "killed":
                writer.command([(subject, ThreadEnded("killed", "bench: not needed"))], ms + 6)
        written = writer.seq
    _mark(root, wanted)
    return GeneratedThreads(root, threads, active, written, time.perf_counter() - start, False)


def log_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in (root / "events").glob("*.jsonl"))


# -- storage -------------------------------------------------------------------------

@dataclass(frozen=True)
class Usage:
    """What a folder (or a set of files) holds: bytes in files, and disk blocks used."""

    files: int
    apparent: int  # sum of file sizes
    allocated: int  # sum of st_blocks * 512: what the filesystem really spends

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.files - other.files, self.apparent - other.apparent,
                     self.allocated - other.allocated)


def usage(*paths: Path) -> Usage:
    """Regular files under `paths` (folders walked, missing paths skipped); folders not counted."""
    files = apparent = allocated = 0
    for top in paths:
        if top.is_file():
            found = [top]
        elif top.is_dir():
            found = [path for path in top.rglob("*") if path.is_file()]
        else:
            continue
        for path in found:
            stat = path.stat()
            files += 1
            apparent += stat.st_size
            allocated += stat.st_blocks * 512
    return Usage(files, apparent, allocated)


def fmt_bytes(count: float) -> str:
    if abs(count) >= 10 * 1024 * 1024:
        return f"{count / 1024 / 1024:,.1f} MiB"
    if abs(count) >= 10 * 1024:
        return f"{count / 1024:,.1f} KiB"
    return f"{count:,.0f} B"


def bytecode_env(env: dict[str, str], cache: Path) -> dict[str, str]:
    """`env` with Python's bytecode cache on, kept in `cache` (out of the source tree).

    A shell that exports PYTHONDONTWRITEBYTECODE=1 makes every child process
    compile uwf's modules from source again (tens of ms per process); a real
    installation has its .pyc files, so benchmarks of CLI processes turn it back on.
    """
    changed = {key: value for key, value in env.items() if key != "PYTHONDONTWRITEBYTECODE"}
    changed["PYTHONPYCACHEPREFIX"] = str(cache)
    return changed


def pressure() -> str:
    """Linux pressure stall info (share of time some task waited on CPU / IO, 10 s and 60 s).

    CPU use alone misses a disk busy with others' fsyncs; file-creating and
    fsyncing benchmarks feel that as IO pressure.
    """
    parts = []
    for kind in ("cpu", "io"):
        try:
            with open(f"/proc/pressure/{kind}", encoding="utf-8") as handle:
                fields = dict(item.split("=") for item in handle.readline().split()[1:])
        except (OSError, ValueError):
            continue
        parts.append(f"{kind} {fields.get('avg10', '?')}%/{fields.get('avg60', '?')}%")
    return "pressure (some, avg10/avg60): " + ", ".join(parts) if parts else "pressure: n/a"
