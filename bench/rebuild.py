"""`uwf registry rebuild` over a 1,000,000-event log: events/s and peak RSS.

    python bench/rebuild.py [--quick | --events N] [--runs R] [--dir DIR] [--fresh]
                            [--wait-quiet S] [--profile]

uwf: the real CLI as a child process, `uwf --store DIR registry rebuild`, timed
end to end (interpreter start, imports, reading, decoding, chain check, fold,
writing the views), the child's own peak RSS from GNU time (`%M`; wait4's figure
would count this script's memory too, see `common.run_measured`).
Baseline, same run: the `eventsourcing` library (the project's `bench` extra)
holding the same events (state = the same line bytes) in its SQLite
application recorder; a child process reads every notification back with
`SQLiteApplicationRecorder.select_notifications`, in pages, and (second
figure) also decodes each and folds name -> latest hash, the work a rebuild does.
Targets (issue): >= 300,000 events/s, peak RSS < 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
from common import (
    RunResult,
    add_common_args,
    begin,
    check,
    data_dir,
    fmt_mib,
    fmt_rate,
    generate_log,
    load,
    log_bytes,
    median,
    print_header,
    profile,
    run_measured,
    section,
    uwf_exe,
    verdict,
)

TARGET_RATE = 300_000
TARGET_RSS_KIB = 1024 * 1024
PAGE = 10_000
_NAMESPACE = uuid.UUID("6f1c1d3e-8a55-4c1e-9a8e-2f3b1a0c9d11")


# -- eventsourcing baseline ------------------------------------------------------

def _lines(root: Path) -> Iterator[bytes]:
    for segment in sorted((root / "events").glob("*.jsonl")):
        with open(segment, "rb") as handle:
            for line in handle:
                yield line.rstrip(b"\n")


class _Head(msgspec.Struct):
    """The few fields the loader needs from a uwf line."""

    type: str
    subject: str


class _Data(msgspec.Struct):
    name: str = ""
    hash: str = ""


class _Line(msgspec.Struct):
    """What the baseline's fold decodes from each notification's state."""

    seq: int
    ts: str
    type: str
    data: _Data


_head_decoder = msgspec.json.Decoder(_Head)


def es_load(db: Path, root: Path, events: int) -> float:
    """Store the uwf log's events in eventsourcing's SQLite recorder; seconds taken."""
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    marker = db.parent / f"{db.name}.json"
    wanted = {"events": events, "source": str(root)}
    if db.exists() and marker.exists() and json.loads(marker.read_text("utf-8")) == wanted:
        return 0.0
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    marker.unlink(missing_ok=True)
    start = time.perf_counter()
    datastore = SQLiteDatastore(db_name=str(db))
    recorder = SQLiteApplicationRecorder(datastore)
    recorder.create_table()
    versions: dict[str, int] = {}
    batch: list[Any] = []
    count = 0
    for raw in _lines(root):
        head = _head_decoder.decode(raw)
        version = versions.get(head.subject, 0) + 1
        versions[head.subject] = version
        batch.append(StoredEvent(
            originator_id=uuid.uuid5(_NAMESPACE, head.subject),
            originator_version=version,
            topic=f"uwf:{head.type}",
            state=raw,
        ))
        if len(batch) == PAGE:
            recorder.insert_events(batch)
            count += len(batch)
            batch = []
    if batch:
        recorder.insert_events(batch)
        count += len(batch)
    datastore.close()
    if count != events:
        sys.exit(f"bench: loaded {count} events into eventsourcing, wanted {events}")
    marker.write_text(json.dumps(wanted), "utf-8")
    return time.perf_counter() - start


def es_read(db: Path, fold: bool) -> dict[str, Any]:
    """Child-process side: read every notification back (and fold them, if asked)."""
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    decode = msgspec.json.Decoder(_Line).decode
    start = time.perf_counter()
    datastore = SQLiteDatastore(db_name=str(db))
    recorder = SQLiteApplicationRecorder(datastore)
    count = 0
    position = 1
    states: dict[str, tuple[str, str, int, int]] = {}
    while True:
        page = recorder.select_notifications(position, PAGE)
        if not page:
            break
        count += len(page)
        position = page[-1].id + 1
        if fold:
            for notification in page:
                event = decode(notification.state)
                if event.type == "workflow.registered":
                    name = event.data.name
                    old = states.get(name)
                    versions = 1 if old is None else old[3] + (old[0] != event.data.hash)
                    states[name] = (event.data.hash, event.ts, event.seq, versions)
    datastore.close()
    return {"count": count, "seconds": time.perf_counter() - start, "names": len(states)}


# -- uwf -------------------------------------------------------------------------

def uwf_rebuild(root: Path) -> tuple[RunResult, dict[str, Any]]:
    result = run_measured([uwf_exe(), "--store", str(root), "registry", "rebuild"], own_rss=True)
    check(result, "uwf registry rebuild")
    payload: dict[str, Any] = json.loads(result.out)
    return result, payload


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--events", type=int, default=1_000_000, help="log size (default 1M)")
    parser.add_argument("--names", type=int, default=1000, help="workflow names (default 1000)")
    parser.add_argument("--runs", type=int, help="timed runs of each (default 5; 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="200,000 events")
    add_common_args(parser)
    parser.add_argument("--fresh", action="store_true", help="regenerate the log even if present")
    parser.add_argument("--profile", action="store_true",
                        help="also profile one in-process rebuild with cProfile")
    parser.add_argument("--es-read", metavar="DB", help=argparse.SUPPRESS)
    parser.add_argument("--fold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.es_read:
        print(json.dumps(es_read(Path(args.es_read), args.fold)))
        return 0
    if args.quick:
        args.events = 200_000
    if args.runs is None:
        args.runs = 1 if args.quick else 5

    base = data_dir(args.dir)
    print_header(f"rebuild: `uwf registry rebuild` over {args.events:,} events", base)
    root = base / f"log-{args.events}"
    made = generate_log(root, args.events, args.names, fresh=args.fresh)
    size = log_bytes(root)
    segments = len(list((root / "events").glob("*.jsonl")))
    how = "reused" if made.reused else f"generated in {made.seconds:.1f} s"
    print(f"log: {root}  {args.events:,} events, {size / 2**20:.0f} MiB in {segments} segments, "
          f"{args.names} workflow names ({how})")

    db = base / f"es-{args.events}.sqlite3"
    loaded = es_load(db, root, args.events)
    print(f"eventsourcing: {db}  "
          + (f"loaded in {loaded:.1f} s" if loaded else "reused")
          + f", {db.stat().st_size / 2**20:.0f} MiB")

    begin(args.wait_quiet)
    uwf_runs: list[RunResult] = []
    es_runs: list[RunResult] = []
    es_inner: list[float] = []
    fold_runs: list[RunResult] = []
    fold_inner: list[float] = []
    es_argv = [sys.executable, __file__, "--es-read", str(db)]
    for index in range(args.runs):
        result, payload = uwf_rebuild(root)
        if payload.get("checkpoint") != args.events:
            sys.exit(f"bench: rebuild reached {payload.get('checkpoint')}, not {args.events}")
        uwf_runs.append(result)
        for argv_, runs, inner in ((es_argv, es_runs, es_inner),
                                   ([*es_argv, "--fold"], fold_runs, fold_inner)):
            es = run_measured(argv_, own_rss=True)
            check(es, "eventsourcing read")
            figures = json.loads(es.out)
            if figures["count"] != args.events:
                sys.exit(f"bench: eventsourcing read {figures['count']} events")
            runs.append(es)
            inner.append(float(figures["seconds"]))
        print(f"  run {index + 1}: uwf {result.wall:.2f} s (CPU {result.cpu:.2f} s), "
              f"{fmt_mib(result.maxrss_kib)};  "
              f"eventsourcing read {es_runs[-1].wall:.2f} s, "
              f"read+fold {fold_runs[-1].wall:.2f} s")

    n = args.events
    uwf_wall = median([r.wall for r in uwf_runs])
    uwf_rss = max(r.maxrss_kib for r in uwf_runs)
    es_wall = median([r.wall for r in es_runs])
    fold_wall = median([r.wall for r in fold_runs])
    uwf_rate = n / uwf_wall
    section(f"result (medians of {args.runs} runs; RSS is the peak over the runs; "
            f"end: {load()})")
    uwf_cpu = median([r.cpu for r in uwf_runs])
    print(f"uwf registry rebuild (CLI, end to end)     {uwf_wall:7.2f} s  "
          f"{fmt_rate(uwf_rate):>12}  peak RSS {fmt_mib(uwf_rss)}  "
          f"(CPU {uwf_cpu:.2f} s: {fmt_rate(n / uwf_cpu)} per CPU-second)")
    print(f"eventsourcing read all (process)           {es_wall:7.2f} s  "
          f"{fmt_rate(n / es_wall):>12}  peak RSS {fmt_mib(max(r.maxrss_kib for r in es_runs))}"
          f"  (in-process {median(es_inner):.2f} s)")
    print(f"eventsourcing read + decode + fold         {fold_wall:7.2f} s  "
          f"{fmt_rate(n / fold_wall):>12}  peak RSS "
          f"{fmt_mib(max(r.maxrss_kib for r in fold_runs))}  "
          f"(in-process {median(fold_inner):.2f} s)")
    print(f"ratio uwf rebuild / eventsourcing read     {es_wall / uwf_wall:7.2f} x  "
          f"(by CPU time {median([r.cpu for r in es_runs]) / uwf_cpu:.2f} x)")
    print(f"ratio uwf rebuild / es read+fold           {fold_wall / uwf_wall:7.2f} x  "
          f"(by CPU time {median([r.cpu for r in fold_runs]) / uwf_cpu:.2f} x; "
          "above 1 means uwf is faster)")
    print(f"target >= {TARGET_RATE:,} events/s: {verdict(uwf_rate >= TARGET_RATE)}")
    print(f"target peak RSS < 1 GiB:      {verdict(uwf_rss < TARGET_RSS_KIB)}")

    if args.profile:
        from uwf.store import Store

        section("profile: one in-process rebuild")
        store = Store.open(root)
        profile(store.journal.rebuild)
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
