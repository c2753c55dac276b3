"""What one durable write costs the disk, by the kind of file it lands in.

    python bench/fsync_kinds.py [--n N] [--blocks B] [--dir DIR] [--wait-quiet S]

Four primitives, in short blocks that rotate their order so all see the same disk
weather, each N lines of uwf's size (300 bytes):
- append: `os.write` to an O_APPEND file that grows, then `fdatasync` (uwf's log);
- in place: `os.pwrite` over blocks written and synced beforehand, then
  `fdatasync` (the file's size never changes, so ext4 need not commit its journal);
- fallocated: the same over `posix_fallocate`d space (unwritten extents: each first
  write converts one, a metadata change);
- SQLite: one INSERT and COMMIT in WAL mode with synchronous=FULL (huey's
  SqliteStorage, the lease+complete benchmark's peer: its WAL is rewritten in place
  after each checkpoint).

It prints the median wall time and CPU of one durable write of each kind. The gap
between `append` and `in place` is what a log that grows pays the filesystem for
every fsync: the limit behind issue 30's lease+complete at P = 1 (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from common import add_common_args, begin, fresh_dir, load, median, print_header, section

LINE = b"x" * 299 + b"\n"
KINDS = ("append", "in place", "fallocated", "SQLite")


def _files(where: Path, kind: str, count: int) -> Callable[[], None]:
    """Prepare one block's file and return the function doing its `count` durable writes."""
    path = where / f"{kind.replace(' ', '-')}.bin"
    for stale in where.glob(path.name + "*"):
        stale.unlink()
    if kind == "SQLite":
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t (v BLOB)")

        def sqlite_writes() -> None:
            for _ in range(count):
                db.execute("BEGIN")
                db.execute("INSERT INTO t VALUES (?)", (LINE,))
                db.execute("COMMIT")
            db.close()
        return sqlite_writes
    flags = os.O_RDWR | os.O_CREAT | (os.O_APPEND if kind == "append" else 0)
    fd = os.open(path, flags, 0o644)
    if kind == "in place":
        os.write(fd, b"\0" * (len(LINE) * count + 4096))
        os.fsync(fd)
    elif kind == "fallocated":
        os.posix_fallocate(fd, 0, len(LINE) * count + 4096)
        os.fsync(fd)

    def file_writes() -> None:
        offset = 0
        for _ in range(count):
            if kind == "append":
                os.write(fd, LINE)
            else:
                os.pwrite(fd, LINE, offset)
                offset += len(LINE)
            os.fdatasync(fd)
        os.close(fd)
    return file_writes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="durable writes a block")
    parser.add_argument("--blocks", type=int, default=9, help="blocks of each kind")
    add_common_args(parser)
    args = parser.parse_args()
    begin(args.wait_quiet)
    where = fresh_dir(args.dir, "fsync-kinds")
    print_header("one durable write, by the kind of file", where)
    walls: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpus: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for block in range(args.blocks):
        for kind in KINDS[block % len(KINDS):] + KINDS[:block % len(KINDS)]:
            writes = _files(where, kind, args.n)
            wall, cpu = time.perf_counter(), time.process_time()
            writes()
            walls[kind].append((time.perf_counter() - wall) / args.n * 1e6)
            cpus[kind].append((time.process_time() - cpu) / args.n * 1e6)
    section(f"{args.blocks} blocks of {args.n} writes each, {load()}")
    append = median(walls["append"])
    print(f"{'kind':<11} {'wall us':>8} {'CPU us':>7} {'writes/s':>9} {'x append':>9}")
    for kind in KINDS:
        wall = median(walls[kind])
        print(f"{kind:<11} {wall:>8.1f} {median(cpus[kind]):>7.1f} {1e6 / wall:>9,.0f} "
              f"{append / wall:>9.2f}")


if __name__ == "__main__":
    main()
