"""A long-running process's durable command sends its pages to the disk as its line is
written (`sync_file_range`, uwf/engine/writeback.py), and still answers only after its
fsync (issue 30: the views' fold overlaps the disk's write). Counted and killed with
strace on real processes; a command line (one or two appends) only fsyncs
(tests/e2e/test_fsyncs.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, Cli
from tests.e2e.test_crash import assert_verify_ok
from tests.e2e.test_fsyncs import strace_binary
from uwf.engine.filelog import OPENSSL_AFTER
from uwf.engine.writeback import Writeback

# `SINGLE` commands in the main thread, then `THREADS` threads of `EACH` commands each;
# one line "acked NAME" on stdout as each command returns.
WRITES = r'''
import sys, threading
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome
from uwf.store import Store
from uwf.workflows.events import WorkflowRegistered

hash_, single, threads, each = sys.argv[1], *map(int, sys.argv[2:5])
store = Store.open()
store.read()
printed = threading.Lock()


def command(name):
    store.journal.write(lambda views: Outcome(
        [NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_, None))]))
    with printed:
        print("acked", name, flush=True)


for index in range(single):
    command(f"s-{index}")
workers = [threading.Thread(target=lambda n=n: [command(f"t{n}-{i}") for i in range(each)])
           for n in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
store.close()
'''


def _workflow(cli: Cli) -> tuple[str, str]:
    cli.env["UWF_DURABILITY"] = "fsync"
    put = cli.run("workflow", "put", str(EXAMPLE), "--json")
    assert put.code == 0, put.err
    return json.loads(put.out)["workflow"], str(next((cli.home / "events").iterdir()))


def _traced(cli: Cli, *args: str, inject: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    calls = "write,fcntl,fsync,fdatasync,sync_file_range"
    injected = [] if inject is None else ["-e", inject]
    return subprocess.run([strace_binary(), "-f", "-y", "-qq", "-e", f"trace={calls}",
                           *injected, "-o", "/dev/stderr", sys.executable, "-c", WRITES,
                           *args], env=cli.env, capture_output=True, text=True,
                          check=False, timeout=120)


def test_each_command_s_pages_are_sent_after_its_write_and_fsynced_before_it_answers(
        cli: Cli) -> None:
    hash_, segment = _workflow(cli)
    single = OPENSSL_AFTER + 20
    done = _traced(cli, hash_, str(single), "2", "10")
    assert done.returncode == 0, done.stderr[-2000:]
    # Each thread's calls on the segment.
    by_thread: dict[str, list[str]] = {}
    for match in re.finditer(r"^(\d+) +(write|fcntl|fsync|fdatasync|sync_file_range)"
                             r"\((.*)$", done.stderr, re.M):
        tid, call, rest = match.groups()
        if f"<{segment}>" in rest:
            if call == "sync_file_range":
                assert "SYNC_FILE_RANGE_WRITE" in rest, rest
            if call == "fcntl":  # os.dup: F_DUPFD_CLOEXEC
                call = "dup" if "F_DUPFD" in rest else rest
            by_thread.setdefault(tid, []).append(call)
    main, *threads = by_thread.values()
    assert len(threads) == 2, by_thread.keys()
    # The first OPENSSL_AFTER commands of the process do as a command line does (a copy
    # of the descriptor, fsynced once the lock is let go); then each one's pages are
    # sent just after its write, and it is fsynced as before: one fsync a command.
    early = main.index("sync_file_range") - 2
    assert main[:early] == ["write", "dup", "fsync"] * OPENSSL_AFTER, main[:early]
    assert main[early:] == ["write", "dup", "sync_file_range", "fsync"] * (
        single - OPENSSL_AFTER), main[early:]
    for calls in threads:
        assert calls == ["write", "dup", "sync_file_range", "fsync"] * 10, calls
    acked = {line.split()[1] for line in done.stdout.splitlines()}
    assert len(acked) == single + 20
    assert_verify_ok(cli)
    names = {entry["name"] for entry in json.loads(cli.run("workflow", "list", "--json").out)}
    assert acked <= names


@pytest.mark.parametrize("when", [1, 7])
def test_a_kill_as_the_pages_are_sent_loses_nothing_acknowledged(cli: Cli, when: int
                                                                ) -> None:
    """SIGKILL as the process sends a command's pages (its line written, not fsynced):
    the commands it answered are in the log, the log verifies, and the next command
    succeeds."""
    hash_, _segment = _workflow(cli)
    done = _traced(cli, hash_, str(OPENSSL_AFTER + 40), "0", "0",
                   inject=f"inject=sync_file_range:signal=KILL:when={when}")
    assert done.returncode in (-9, 137), done.stderr[-2000:]
    acked = {line.split()[1] for line in done.stdout.splitlines()}
    assert len(acked) == OPENSSL_AFTER + when - 1  # killed before that one answered
    assert_verify_ok(cli)
    names = {entry["name"] for entry in json.loads(cli.run("workflow", "list", "--json").out)}
    assert acked <= names
    assert cli.run("sched", "policy", "set", "--max-concurrent", "2").code == 0
    assert_verify_ok(cli)


def test_pages_sent_from_a_file_and_refused_by_a_pipe(tmp_path: Path) -> None:
    writeback = Writeback()
    assert not writeback.off  # Linux (CI's)
    fd = os.open(tmp_path / "file", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, b"line\n")
        writeback.start(fd)
        assert not writeback.off
        os.fsync(fd)
    finally:
        os.close(fd)
    read, write = os.pipe()  # no pages to send: refused, and not asked again
    try:
        writeback.start(write)
        assert writeback.off
        writeback.start(write)
    finally:
        os.close(read)
        os.close(write)
