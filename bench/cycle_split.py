"""Where a lease+complete cycle's CPU goes: its SQL statements replayed alone, the write
protocol without an append, and the rest (issue 30).

    python bench/cycle_split.py [--cycles N] [--rounds R] [--dir DIR]

In one process, UWF_DURABILITY=none, on a store of 5,000 ready entries (the queue view's
shape of `bench/write_path_ab.py`), alternating R rounds of:

- cycle: N `sched.lease(store, 1)` + `sched.complete(...)`, CPU per cycle;
- SQL: the statements one cycle sends to the views (caught with SQLite's trace
  callback, literal values included) replayed N times on a copy of the views file
  (the stream entry's subject made new each time): what SQLite alone costs a cycle;
- protocol: `journal.write` of a decide that reads one row and appends nothing, twice
  (a cycle is two commands): the lock, the tail check, the recovery check, the views'
  checkpoints, the decide's read.

The rest of a cycle is Python around them: the decisions, the envelopes and the log's
append, the fold, the rows and the commit's bookkeeping (a rough split: the protocol's
own few statements, a PRAGMA and the read, are counted in SQL too). Medians of the
rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from common import EXAMPLE, REPO, load, median


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=REPO / "bench" / "out" / "cycle-split")
    args = parser.parse_args(argv)
    os.environ["UWF_DURABILITY"] = "none"
    from uwf.cli.main import main as uwf
    from uwf.engine.journal import Outcome, Views
    from uwf.queue import sched
    from uwf.store import Store

    work = args.dir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    home = str(work / "store")
    entries = work / "entries.jsonl"
    entries.write_text("".join(json.dumps(
        {"workflow": "solve-issue", "prompt": f"Fix issue #{n}: the login bug",
         "repo": str(REPO), "priority": 100 + n % 7}) + "\n" for n in range(5000)))
    with open(os.devnull, "w") as quiet:
        saved, sys.stdout = sys.stdout, quiet
        try:
            uwf(["--store", home, "workflow", "put", str(EXAMPLE)])
            uwf(["--store", home, "sched", "policy", "set", "--max-concurrent", "64"])
            uwf(["--store", home, "queue", "add", "--batch", str(entries)])
        finally:
            sys.stdout = saved
    store = Store.open(home)
    store.read()

    def cycles(n: int) -> None:
        for _ in range(n):
            granted = sched.lease(store, 1).leases[0]
            sched.complete(store, granted.id, granted.lease_id)

    cycles(30)
    statements: list[str] = []
    db = store.views._connect(create=False)  # type: ignore[attr-defined]
    db.set_trace_callback(statements.append)
    cycles(1)
    db.set_trace_callback(None)
    views_file = Path(home) / "views" / "views.sqlite3"
    copy = work / "replay.sqlite3"
    source = sqlite3.connect(views_file)
    target = sqlite3.connect(copy)
    source.backup(target)
    source.close()
    target.close()
    replay = sqlite3.connect(copy, isolation_level=None)
    replay.execute("PRAGMA journal_mode=WAL")
    replay.execute("PRAGMA synchronous=OFF")
    counter = [0]

    def sql(n: int) -> None:
        for _ in range(n):
            counter[0] += 1
            for statement in statements:
                fresh = statement.replace("VALUES (", f"VALUES ('r{counter[0]}' || ") \
                    if statement.startswith("INSERT INTO streams") else statement
                replay.execute(fresh).fetchall()

    def decide(views: Views) -> Outcome[None]:
        views.get("sched", "policy")
        return Outcome((), None)

    def protocol(n: int) -> None:
        for _ in range(2 * n):
            store.journal.write(decide)

    sides: dict[str, Callable[[int], None]] = {"cycle": cycles, "SQL": sql,
                                               "protocol": protocol}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    print(f"cycle split: {args.rounds} rounds of {args.cycles}; {len(statements)} SQL "
          f"statements a cycle; start: {load()}")
    for index in range(args.rounds):
        names = list(sides)
        for name in names[index % 3:] + names[:index % 3]:
            start = time.process_time()
            sides[name](args.cycles)
            cpu[name].append((time.process_time() - start) / args.cycles * 1e6)
    store.close()
    replay.close()
    cycle, spent, guard = median(cpu["cycle"]), median(cpu["SQL"]), median(cpu["protocol"])
    print(f"cycle CPU                       {cycle:7.0f} us")
    print(f"  its SQL statements replayed   {spent:7.0f} us")
    print(f"  the write protocol, 2 commands that append nothing {guard:7.0f} us")
    print(f"  the rest (decide, append, fold, rows) {cycle - spent - guard:7.0f} us")
    print(f"end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
