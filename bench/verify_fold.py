"""What `log verify` costs now that it folds each aggregate's whole state with `evolve`.

    python bench/verify_fold.py [--entries N] [--threads N] [--rounds R] [--baseline TREE]

A store in a temporary folder holds a log written through the journal (no command
runs): N queue entries each added, leased, renewed and completed (4 events), and N
threads each started, three steps (started, stepped) and ended (8 events). Then
`audit.verify` runs over it in a fresh process per round, once with this tree's uwf
and once with the baseline tree's (default: /work/main, the code before the change),
interleaved: CPU seconds of the verify call (`time.process_time`), per event, and the
process's peak RSS. Medians of R rounds; the ratio is this tree over the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
T0 = 1_790_000_000_000

_MEASURE = """
import json, resource, sys, time
# The tree to measure, ahead of the editable install's finder (which maps `uwf` to the
# worktree it was installed from, whatever sys.path says).
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, sys.argv[2])
import uwf
from uwf.audit.verify import verify
from uwf.store import Store
store = Store.open(sys.argv[1])
start = time.process_time()
report = verify(store)
cpu = time.process_time() - start
assert report.ok, report.problems[:3]
print(json.dumps({"cpu": cpu, "events": report.events,
                  "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "where": uwf.__file__}))
"""


def generate(root: Path, entries: int, threads: int) -> None:
    from uwf.cas.builtins import builtin_hash
    from uwf.engine.events import NewEvent
    from uwf.engine.journal import Outcome
    from uwf.queue.events import QueueAdded, QueueCompleted, QueueLeased, QueueRenewed
    from uwf.store import Store
    from uwf.threads.events import ThreadEnded, ThreadStarted, ThreadStepped, ThreadStepStarted

    now = [T0]
    store = Store.open(root, clock=lambda: now[0])
    store.cas.ensure_builtins()
    node = builtin_hash("Workflow")
    batch: list[NewEvent] = []

    def flush() -> None:
        events = list(batch)
        store.journal.write(lambda views: Outcome(events))
        batch.clear()
        now[0] += 1

    for index in range(entries):
        subject, lease = f"queue/E{index:025d}", f"L{index:025d}"
        batch += [NewEvent(subject, QueueAdded("/r", 100)),
                  NewEvent(subject, QueueLeased(lease, T0 + 10**9, 1)),
                  NewEvent(subject, QueueRenewed(lease, T0 + 2 * 10**9)),
                  NewEvent(subject, QueueCompleted(lease))]
        if len(batch) >= 400:
            flush()
    for index in range(threads):
        subject = f"thread/T{index:025d}"
        batch.append(NewEvent(subject, ThreadStarted(node, "wf", node, "/r", node)))
        for step in range(3):
            step_id = f"S{index:020d}{step}"
            batch += [NewEvent(subject, ThreadStepStarted(step_id, "p", "", "mock",
                                                          T0 + 10**9)),
                      NewEvent(subject, ThreadStepped(step_id, node, "p", "_", node))]
        batch.append(NewEvent(subject, ThreadEnded("end")))
        if len(batch) >= 400:
            flush()
    if batch:
        flush()
    store.close()


def measure(tree: Path, root: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(root), str(tree)],
                          capture_output=True, text=True, check=True)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default="/work/main")
    args = parser.parse_args()
    trees = {"this tree": REPO, "baseline": Path(args.baseline)}
    with tempfile.TemporaryDirectory(prefix="uwf-verify-") as folder:
        root = Path(folder) / "store"
        generate(root, args.entries, args.threads)
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():  # interleaved: both see the same machine
                results[name].append(measure(tree, root))
    print(f"load average: {os.getloadavg()}")
    medians = {}
    for name, rows in results.items():
        cpu = statistics.median(row["cpu"] for row in rows)
        events = rows[0]["events"]
        rss = statistics.median(row["rss_kib"] for row in rows)
        medians[name] = cpu
        print(f"{name:>10}: verify of {events:,.0f} events: {cpu:.2f} CPU-s "
              f"({cpu / events * 1e6:.1f} µs/event), peak RSS {rss / 1024:.0f} MiB "
              f"(CPU per round: {', '.join(format(row['cpu'], '.2f') for row in rows)}; "
              f"uwf from {rows[0]['where']})")
    print(f"ratio this tree / baseline (CPU): {medians['this tree'] / medians['baseline']:.2f}")


if __name__ == "__main__":
    main()
