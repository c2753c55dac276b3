"""A long-running process's durable command starts its fsync as its line is written
(Linux AIO, uwf/engine/aiosync.py) and answers only once it is done (issue 30: the
views' fold overlaps the disk's wait). Counted and killed with strace on real
processes; a command line (one or two appends) keeps `fsync` (tests/e2e/test_fsyncs.py)."""

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
from uwf.engine.aiosync import AsyncSync
from uwf.engine.filelog import OPENSSL_AFTER

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
    calls = "write,fcntl,fsync,fdatasync,io_submit,io_getevents"
    injected = [] if inject is None else ["-e", inject]
    return subprocess.run([strace_binary(), "-f", "-y", "-qq", "-e", f"trace={calls}",
                           *injected, "-o", "/dev/stderr", sys.executable, "-c", WRITES,
                           *args], env=cli.env, capture_output=True, text=True,
                          check=False, timeout=120)


def test_each_command_s_fsync_starts_after_its_write_and_ends_before_it_answers(
        cli: Cli) -> None:
    hash_, segment = _workflow(cli)
    single = OPENSSL_AFTER + 20
    done = _traced(cli, hash_, str(single), "2", "10")
    assert done.returncode == 0, done.stderr[-2000:]
    # Each thread's calls on the segment, and its waits (io_getevents names no file).
    by_thread: dict[str, list[str]] = {}
    for match in re.finditer(r"^(\d+) +(write|fcntl|fsync|fdatasync|io_submit|io_getevents)"
                             r"\((.*)$", done.stderr, re.M):
        tid, call, rest = match.groups()
        if call == "io_getevents" or f"<{segment}>" in rest:
            if call == "io_submit":
                assert "IOCB_CMD_FSYNC" in rest, rest
            if call == "fcntl":  # os.dup: F_DUPFD_CLOEXEC
                call = "dup" if "F_DUPFD" in rest else rest
            by_thread.setdefault(tid, []).append(call)
    main, *threads = by_thread.values()
    assert len(threads) == 2, by_thread.keys()
    # The first OPENSSL_AFTER commands of the process fsync as a command line does (a
    # copy of the descriptor, fsynced once the lock is let go); then each fsync is
    # submitted just after the write, on the descriptor kept (the flush holds the file),
    # and waited for before the next command: one flush a command.
    first = main.index("io_submit")
    assert main[:first] == ["write", "dup", "fsync"] * OPENSSL_AFTER + ["write"], main[:first]
    assert main[first:] == ["io_submit", "io_getevents", "write"] * (
        single - OPENSSL_AFTER - 1) + ["io_submit", "io_getevents"], main[first:]
    for calls in threads:  # each thread waits for its own flush, in a context of its own
        assert calls == ["write", "io_submit", "io_getevents"] * 10, calls
    acked = {line.split()[1] for line in done.stdout.splitlines()}
    assert len(acked) == single + 20
    assert_verify_ok(cli)
    names = {entry["name"] for entry in json.loads(cli.run("workflow", "list", "--json").out)}
    assert acked <= names


@pytest.mark.parametrize(("call", "when"), [("io_getevents", 3), ("io_submit", 7)])
def test_a_kill_while_a_started_fsync_is_in_flight_loses_nothing_acknowledged(
        cli: Cli, call: str, when: int) -> None:
    """SIGKILL as the process waits for (or submits) a started fsync: the commands it
    answered are in the log, the log verifies, and the next command succeeds."""
    hash_, _segment = _workflow(cli)
    done = _traced(cli, hash_, str(OPENSSL_AFTER + 40), "0", "0",
                   inject=f"inject={call}:signal=KILL:when={when}")
    assert done.returncode in (-9, 137), done.stderr[-2000:]
    acked = {line.split()[1] for line in done.stdout.splitlines()}
    assert len(acked) == OPENSSL_AFTER + when - 1  # killed before the next one answered
    assert_verify_ok(cli)
    names = {entry["name"] for entry in json.loads(cli.run("workflow", "list", "--json").out)}
    assert acked <= names
    assert cli.run("sched", "policy", "set", "--max-concurrent", "2").code == 0
    assert_verify_ok(cli)


def test_a_started_fsync_is_waited_for_and_a_refused_one_is_the_caller_s(
        tmp_path: Path) -> None:
    flushes = AsyncSync()
    try:
        fd = os.open(tmp_path / "file", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, b"line\n")
            first = flushes.start(fd)
            assert first is not None  # Linux on x86-64 or aarch64 (CI's)
            os.write(fd, b"line\n")
            second = flushes.start(fd)
            assert second is not None
            assert second != first
            flushes.wait(second)  # the first one's event, left unwaited, is passed over
            third = flushes.start(fd)
            assert third is not None
            flushes.wait(third)
        finally:
            os.close(fd)
        read, write = os.pipe()  # no fsync there: refused at submission, not started
        try:
            assert flushes.start(write) is None
            assert flushes.off
            with pytest.raises(OSError, match="Invalid argument"):
                os.fsync(write)  # what the caller does then: the file's own answer
        finally:
            os.close(read)
            os.close(write)
    finally:
        flushes.close()
