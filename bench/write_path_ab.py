"""The write path's CPU, one code against another, in alternating rounds (issue 30).

    python bench/write_path_ab.py BASE [--b COMMIT] [--rounds R] [--cycles N] [--entries N]
                                  [--only cycle,step,batch] [--instructions N] [--dir DIR]

BASE is a commit: its `uwf/` is taken with `git archive` into a scratch folder and put
first on PYTHONPATH of every child of side A; side B is the work tree, or with `--b`
another commit taken the same way (so one change is measured alone while the tree moves
on). Each round runs, for A then B, each in a fresh process, the CPU time
(`time.process_time`, the figure a shared machine blurs least) of:

- cycle: N lease+complete cycles in-process (`sched.lease(store, 1)`, `sched.complete`),
  UWF_DURABILITY=none and =fsync, on a copy of one store of 5,000 ready entries;
- step: a 301-step `run_thread` of examples/solve-issue.yaml with an in-process agent
  (`bench/thread_run.py`'s), UWF_DURABILITY=none;
- batch: `uwf queue add --batch` of --entries entries through `main()` in-process
  (fsync), entries per CPU-second; beside it, once a round, its floor on this design:
  the same log lines written and fsynced, and the same queue rows, stream entries and
  counts inserted into a new SQLite file of the same schema in one transaction.

`--instructions N`: also each side's batch under callgrind (user-space instructions,
which the machine's load does not move): a batch of N entries and one of 1, the
difference an entry (so the CLI's start-up and the store's opening drop out); and the
floor's, on B's store of N: the floor's process less the same process stopped before its
timed part, an entry.

`--only` runs some of the three. Every child loads uwf from bytecode compiled before the
first round (kept under DIR, PYTHONDONTWRITEBYTECODE dropped), as an installed uwf does:
a shell exporting PYTHONDONTWRITEBYTECODE=1 otherwise makes each child compile every
module it imports (~0.15 s of a batch's ~1.2 CPU-s) on a side without `__pycache__`.

Medians over the rounds, and B / A.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from common import EXAMPLE, REPO, bytecode_env, code_of, median

CYCLE = """
import os, sys, time
from uwf.queue import sched
from uwf.store import Store
store = Store.open(sys.argv[1]); store.read()
def run(n):
    for _ in range(n):
        lease = sched.lease(store, 1).leases[0]
        sched.complete(store, lease.id, lease.lease_id)
run(30)
n = int(sys.argv[2]); cpu = time.process_time(); run(n)
print((time.process_time() - cpu) / n * 1e6)
"""

STEP = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
import thread_run
run = thread_run.uwf_run(Path(sys.argv[1]), 150, "none", "ab")
print(run.cpu / run.steps * 1e6)
"""

BATCH = """
import sys, time
from uwf.cli.main import main
cpu = time.process_time()
main(["--store", sys.argv[1], "queue", "add", "--batch", sys.argv[2]])
print(int(sys.argv[3]) / (time.process_time() - cpu), file=sys.stderr)
"""

# The floor of a batch on a log + SQLite views design, from the store B's batch just made:
# its log lines written with one write and one fsync, and its queue rows, stream entries
# and counts inserted into a new file of the same schema in one transaction (the rows
# read back before the clock starts). Entries per CPU-second.
FLOOR = """
import os, sqlite3, sys, time
store, n = sys.argv[1], int(sys.argv[2])
src = sqlite3.connect(f"{store}/views/views.sqlite3")
schema = [sql for name, sql in src.execute(
    "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL AND (tbl_name = 'v_queue' "
    "OR name IN ('streams', 'counts')) ORDER BY type DESC")]
rows = src.execute("SELECT * FROM v_queue").fetchall()
streams = src.execute("SELECT * FROM streams WHERE subject LIKE 'queue/%'").fetchall()
counts = src.execute("SELECT * FROM counts").fetchall()
segment = sorted(os.listdir(f"{store}/events"))[-1]
lines = open(f"{store}/events/{segment}", "rb").read().splitlines(True)[-n:]
path = f"{store}/floor.sqlite3"
for made in (path, f"{path}-wal", f"{path}-shm", f"{store}/floor.jsonl"):
    if os.path.exists(made):  # a run before this one's
        os.remove(made)
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA synchronous=OFF")
tables = [sql for sql in schema if sql.startswith("CREATE TABLE")]
indexes = [sql for sql in schema if not sql.startswith("CREATE TABLE")]
for sql in tables + indexes:
    db.execute(sql)
marks = ", ".join("?" * len(rows[0]))
if sys.argv[3:] == ["setup"]:  # the same process up to here: its instructions' baseline
    sys.exit(0)
cpu = time.process_time()
fd = os.open(f"{store}/floor.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, b"".join(lines))
db.execute("BEGIN IMMEDIATE")
db.executemany(f"INSERT INTO v_queue VALUES ({marks})", rows)
db.executemany("INSERT INTO streams VALUES (?, ?)", streams)
db.executemany("INSERT INTO counts VALUES (?, ?, ?, ?)", counts)
db.execute("COMMIT")
os.fsync(fd)
print(n / (time.process_time() - cpu))
"""


def child(code: str, args: list[str], path: Path | None, env: dict[str, str],
          stderr: bool = False) -> float:
    run_env = {**env, **({"PYTHONPATH": str(path)} if path is not None else {})}
    done = subprocess.run([sys.executable, "-c", code, *args], env=run_env, cwd="/",
                          capture_output=True, text=True, check=True)
    return float((done.stderr if stderr else done.stdout).strip().splitlines()[-1])


def uwf(args: list[str], path: Path | None, env: dict[str, str]) -> None:
    code = "import sys; from uwf.cli.main import main; sys.exit(main(sys.argv[1:]))"
    child_env = {**env, **({"PYTHONPATH": str(path)} if path is not None else {})}
    subprocess.run([sys.executable, "-c", code, *args], env=child_env, cwd="/",
                   capture_output=True, check=True)


def batch_instructions(work: Path, count: int, path: Path | None, env: dict[str, str], *,
                       floor: bool) -> tuple[int, int]:
    """The user-space instructions of a batch of `count` entries (`entries-COUNT.jsonl`)
    on a new store, the whole process; with `floor`, then the floor's on that store (its
    timed part: the process less the same stopped before it), else 0."""
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        store = Path(scratch) / "s"
        uwf(["--store", str(store), "workflow", "put", str(EXAMPLE)], path, env)
        code = "import sys; from uwf.cli.main import main; sys.exit(main(sys.argv[1:]))"
        run_env = {**env, "UWF_DURABILITY": "fsync",
                   **({"PYTHONPATH": str(path)} if path is not None else {})}
        batch = collected(["-c", code, "--store", str(store), "queue", "add", "--batch",
                           str(work / f"entries-{count}.jsonl")], run_env)
        if not floor:
            return batch, 0
        floored = [collected(["-c", FLOOR, str(store), str(count), *setup], env)
                   for setup in ([], ["setup"])]
        return batch, floored[0] - floored[1]


def collected(args: list[str], env: dict[str, str]) -> int:
    """The user-space instructions of `python ARGS` (callgrind's `Collected`)."""
    import re

    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           sys.executable, *args], env=env, cwd="/", capture_output=True,
                          text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from callgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base")
    parser.add_argument("--b", default=None, metavar="COMMIT",
                        help="side B from this commit, not the work tree")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--only", default="cycle,step,batch",
                        help="which figures, comma-separated (cycle, step, batch)")
    parser.add_argument("--instructions", type=int, default=0, metavar="N",
                        help="also count a batch's instructions an entry under callgrind, "
                             "batches of N and 1")
    parser.add_argument("--dir", type=Path, default=REPO / "bench" / "out" / "write-ab")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    work = args.dir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    base = code_of(args.base, work / "base")
    env = bytecode_env({k: v for k, v in os.environ.items() if not k.startswith("UWF_")},
                       work / "pycache")
    env.pop("PYTHONPATH", None)
    sides: dict[str, Path | None] = {
        "A": base, "B": None if args.b is None else code_of(args.b, work / "other")}
    for path in sides.values():  # each side's bytecode, before any child is timed
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(path or REPO / "uwf")],
                       env=env, check=True, stdout=subprocess.DEVNULL)

    template = work / "template"
    uwf(["--store", str(template), "workflow", "put", str(EXAMPLE)], base, env)
    uwf(["--store", str(template), "sched", "policy", "set", "--max-concurrent", "64"],
        base, env)
    entries = work / "entries.jsonl"
    entries.write_text("".join(json.dumps(
        {"workflow": "solve-issue", "prompt": f"Fix issue #{n}: the login bug",
         "repo": str(REPO), "priority": 100 + n % 7}) + "\n" for n in range(args.entries)))
    ready = work / "ready.jsonl"
    ready.write_text("".join(entries.read_text().splitlines(True)[:5000]))
    uwf(["--store", str(template), "queue", "add", "--batch", str(ready)], base, env)

    figures: dict[tuple[str, str], list[float]] = {}
    if args.instructions:
        lines = entries.read_text().splitlines(True)
        for count in (args.instructions, 1):
            (work / f"entries-{count}.jsonl").write_text("".join(lines[:count]))
        for side, path in sides.items():
            counted = {count: batch_instructions(work, count, path, env, floor=side == "B")
                       for count in (args.instructions, 1)}
            figures[("batch instructions an entry", side)] = [
                (counted[args.instructions][0] - counted[1][0]) / (args.instructions - 1)]
            if side == "B":
                figures[("batch floor instructions", "B")] = [
                    counted[args.instructions][1] / args.instructions]
    print(f"# write path A/B: A = {args.base}, B = {args.b or 'the work tree'}; "
          f"{args.rounds} rounds; "
          f"load {os.getloadavg()}")
    for index in range(args.rounds):
        for side, path in sides.items():
            for durability in ("none", "fsync") if "cycle" in only else ():
                store = work / f"cycle-{side}"
                shutil.rmtree(store, ignore_errors=True)
                shutil.copytree(template, store)
                figures.setdefault((f"cycle CPU µs ({durability})", side), []).append(child(
                    CYCLE, [str(store), str(args.cycles)], path,
                    {**env, "UWF_DURABILITY": durability}))
            with tempfile.TemporaryDirectory(dir=work) as scratch:
                if "step" in only:
                    figures.setdefault(("step CPU µs (none)", side), []).append(child(
                        STEP, [str(Path(scratch) / "s"), str(REPO / "bench")], path, env))
                if "batch" not in only:
                    continue
                store = Path(scratch) / "batch"
                uwf(["--store", str(store), "workflow", "put", str(EXAMPLE)], path, env)
                figures.setdefault(("batch entries per CPU-s", side), []).append(child(
                    BATCH, [str(store), str(entries), str(args.entries)], path,
                    {**env, "UWF_DURABILITY": "fsync"}, stderr=True))
                if side == "B":  # the floor, on B's store (the same rows for any side)
                    figures.setdefault(("batch floor: write+fsync+inserts", "B"), []).append(
                        child(FLOOR, [str(store), str(args.entries)], None, env))
        print(f"  round {index + 1}/{args.rounds} done (load {os.getloadavg()[0]:.2f})")
    print(f"\n{'figure':28} {'A':>10} {'B':>10} {'B / A':>7}   (medians; end load "
          f"{os.getloadavg()})")
    for name in dict.fromkeys(name for name, _ in figures):
        b = median(figures[(name, "B")])
        if (name, "A") not in figures:  # a primitive, measured once a round
            of = ("batch instructions an entry" if "instructions" in name
                  else "batch entries per CPU-s")
            batch = median(figures[(of, "B")])
            print(f"{name:28} {'':>10} {b:>10,.0f}   (B's batch / this: {batch / b:.2f})")
            continue
        a = median(figures[(name, "A")])
        print(f"{name:28} {a:>10,.0f} {b:>10,.0f} {b / a:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
