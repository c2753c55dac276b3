"""CAS put and get+verify per second, beside raw temp-file+rename and read of the same bytes.

    python bench/cas.py [--quick] [--n N] [--block B] [--budget S]
                        [--durability fsync|none|both] [--dir DIR] [--wait-quiet S]

uwf: `Cas(FileBlobs(dir, durable)).put(type, payload)` of new nodes, two
workloads: Text nodes (a ~200-character string) and small JSON objects of a
schema put first (an agent's step output: status, files, summary, count).
put = validate against the schema, hash (deterministic CBOR + XXH64), exists
check, temp file, [fsync,] rename[, fsync dir]. Then `get(hash)` and
`verify(hash)` (read, parse, recompute the hash, re-validate) of every node;
get is timed on a new `Cas` per block, so it is a first get (the in-process
cache of decoded nodes is empty, as in a fresh `uwf` or `json-cas` process).
Baseline, same directory, same bytes: write a temp file with os.open/os.write,
[fsync,] os.rename[, fsync dir] - the same durability as uwf in that mode -
and `open(path, "rb").read()`. The fan-out folders exist before timing on both
sides. Short blocks (100 nodes) alternate uwf and raw, rotating the order, so
both see the same disk and CPU weather on a shared machine; figures are medians
of per-block rates, ratios medians of per-block ratios (with quartiles).
No target in the issue: the ratios are reported.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import (
    add_common_args,
    begin,
    data_dir,
    fmt_rate,
    interleave,
    load,
    median,
    print_header,
    ratios,
    section,
    spread,
)

from uwf.cas.backends import FileBlobs, node_path
from uwf.cas.builtins import builtin_hash
from uwf.cas.hashing import node_hash
from uwf.cas.store import Cas, encode_node
from uwf.engine.clock import system_clock

OUTPUT_SCHEMA: dict[str, Any] = {
    "title": "BenchStepOutput",
    "type": "object",
    "required": ["status", "files"],
    "properties": {
        "status": {"enum": ["done", "blocked", "failed"]},
        "files": {"type": "array", "items": {"type": "string"}},
        "summary": {"type": "string"},
        "count": {"type": "integer"},  # json-cas's subset has no `minimum`
    },
    "additionalProperties": False,
}

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def text_payload(index: int) -> str:
    return (f"Step {index}: read the issue, planned the change, edited the parser and "
            f"its tests, ran the suite (all green), and wrote this summary for the "
            f"reviewer. Nothing else changed. Reference number {index:08d}.")


def object_payload(index: int) -> dict[str, Any]:
    return {
        "status": "done",
        "files": [f"src/module_{index % 97}.py", f"tests/test_module_{index % 97}.py"],
        "summary": f"Implemented change {index}; tests pass.",
        "count": index,
    }


@dataclass
class Workload:
    name: str
    type_hash: str
    payload: Callable[[int], Any]


def make_fanout(root: Path) -> None:
    for first in ALPHABET[:16]:
        for second in ALPHABET:
            (root / f"{first}{second}").mkdir(parents=True, exist_ok=True)


def raw_write(root: Path, items: Sequence[tuple[str, bytes]], durable: bool) -> float:
    """Temp file in the node's folder, [fsync,] rename[, fsync dir]: the same protocol."""
    begin = time.perf_counter()
    for hash_, data in items:
        folder = os.path.join(root, hash_[:2])
        temp = os.path.join(folder, f".tmp-{hash_}.json")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, os.path.join(folder, f"{hash_}.json"))
        if durable:
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    return len(items) / (time.perf_counter() - begin)


def raw_read(root: Path, hashes: Sequence[str]) -> float:
    begin = time.perf_counter()
    for hash_ in hashes:
        with open(os.path.join(root, hash_[:2], f"{hash_}.json"), "rb") as handle:
            handle.read()
    return len(hashes) / (time.perf_counter() - begin)


def rate(call: Callable[[Any], object], items: Sequence[Any]) -> float:
    begin = time.perf_counter()
    for item in items:
        call(item)
    return len(items) / (time.perf_counter() - begin)


def run_mode(base: Path, durable: bool, n: int, block: int, budget: float) -> None:
    mode = "fsync" if durable else "none"
    work = base / f"cas-{mode}"
    uwf_root, raw_root = work / "cas", work / "raw"
    make_fanout(uwf_root)
    make_fanout(raw_root)
    cas = Cas(FileBlobs(uwf_root, durable, wall=system_clock), clock=system_clock)
    cas.ensure_builtins()
    schema_hash = cas.put_schema(OUTPUT_SCHEMA)
    workloads = [Workload("Text node", builtin_hash("Text"), text_payload),
                 Workload("JSON object", schema_hash, object_payload)]
    blocks = max(1, n // block)
    section(f"durability {mode}: {blocks} alternating blocks x {block} new nodes per side "
            "and workload")
    counter = 0
    for workload in workloads:
        counter = measure(cas, workload, raw_root, uwf_root, durable=durable, blocks=blocks,
                          block=block, counter=counter, budget=budget)


def measure(cas: Cas, workload: Workload, raw_root: Path, uwf_root: Path, *, durable: bool,
            blocks: int, block: int, counter: int, budget: float) -> int:
    """Time one workload's puts, gets and verifies against raw; return the next counter."""
    for index in range(200):  # caches the validator, warms the code
        cas.put(workload.type_hash, workload.payload(counter + index))
    counter += 200
    put = functools.partial(cas.put, workload.type_hash)
    # Payloads, and the bytes uwf stores for them, made before any timing.
    payloads = [workload.payload(counter + index) for index in range(blocks * block)]
    counter += len(payloads)
    ts = system_clock()
    items = [(node_hash(workload.type_hash, p), encode_node(workload.type_hash, p, ts))
             for p in payloads]
    hashes = [hash_ for hash_, _ in items]
    cursor = {"uwf": 0, "raw": 0, "get": 0, "verify": 0, "read": 0}

    def take(side: str, pool: Sequence[Any]) -> Sequence[Any]:
        start = cursor[side]
        cursor[side] = start + block
        return pool[start:start + block]

    os.sync()  # untimed: earlier phases' dirty pages (and rmtree) written back first
    written = interleave({
        "uwf": lambda: rate(put, take("uwf", payloads)),
        "raw": lambda: raw_write(raw_root, take("raw", items), durable),
    }, blocks, budget)
    hashes = hashes[:cursor["uwf"]]  # only what both sides wrote
    blocks = len(hashes) // block
    os.sync()
    read = interleave({
        # A new Cas per block: its decoded-node cache is empty, as in a new process.
        "get": lambda: rate(Cas(FileBlobs(uwf_root, durable, wall=system_clock),
                                clock=system_clock).get, take("get", hashes)),
        "verify": lambda: rate(cas.verify, take("verify", hashes)),
        "read": lambda: raw_read(raw_root, take("read", hashes)),
    }, blocks)
    for hash_ in hashes[:: max(1, len(hashes) // 20)]:
        problems = cas.verify(hash_)
        if problems or Path(node_path(str(uwf_root), hash_)).read_bytes() == b"":
            sys.exit(f"bench: node {hash_} does not verify: {problems}")
    size = median([float(len(data)) for _, data in items])
    print(f"{workload.name} (node file {size:.0f} bytes; {len(written['uwf'])} put blocks "
          f"per side)")
    rows = [("put", written["uwf"], "raw temp+rename", written["raw"]),
            ("get", read["get"], "raw read", read["read"]),
            ("verify (get+hash+validate)", read["verify"], "raw read", read["read"])]
    for label, ours, base_label, theirs in rows:
        print(f"  {label:<27}{fmt_rate(median(ours)):>11}   {base_label:<16}"
              f"{fmt_rate(median(theirs)):>11}   ratio {spread(ratios(ours, theirs))}")
    return counter


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--n", type=int, default=10_000,
                        help="new nodes per side and workload (default 10,000)")
    parser.add_argument("--block", type=int, default=100,
                        help="nodes per alternating block (default 100)")
    parser.add_argument("--durability", choices=["fsync", "none", "both"], default="both")
    parser.add_argument("--quick", action="store_true", help="1,000 nodes per side")
    parser.add_argument("--budget", type=float, default=40.0, metavar="S",
                        help="per workload, stop adding put blocks after S seconds "
                        "(default 40; 0: no limit)")
    parser.add_argument("--keep", action="store_true", help="keep the nodes written")
    parser.add_argument("--settle", type=float, default=30.0, metavar="S",
                        help="after removing a previous run's nodes, wait S seconds (default 30)")
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.n = 1000
    base = data_dir(args.dir)
    print_header("cas: put and get+verify of CAS nodes", base)
    stale = [base / "cas-fsync", base / "cas-none"]
    if any(path.exists() for path in stale):
        # Deleting tens of thousands of files slows file creation on this disk for
        # a while afterwards (ext4 with online discard): do it now, then settle.
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)
        os.sync()
        time.sleep(args.settle)
        print(f"removed the previous run's nodes, then waited {args.settle:g} s")
    begin(args.wait_quiet)
    modes = {"fsync": [True], "none": [False], "both": [True, False]}[args.durability]
    for durable in modes:
        run_mode(base, durable, args.n, args.block, args.budget)
    print(f"\nend: {load()}")
    if not args.keep:
        for path in stale:  # after timing, so the next phase or run starts clean
            shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
