"""One fsync per command (issue 21): the log's append is a command's durability point;
the views, replayable from the log, are never fsynced. Counted with strace on real
`uwf` processes, every fsync and fdatasync of the process and its children."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BIN, EXAMPLE, ROOT, Cli

SYNC = re.compile(r"\b(fsync|fdatasync)\((\d+)<([^>]*)>\)")


def strace_binary() -> str:
    """strace, which CI installs: these tests fail without it there, and are skipped
    elsewhere."""
    found = shutil.which("strace")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("strace is not installed; .ci/run installs it with apt")
        pytest.skip("strace is not installed")
    return found


def synced(cli: Cli, *args: str) -> list[str]:
    """The files a `uwf ARGS` process fsynced, in order."""
    strace = strace_binary()
    done = subprocess.run([strace, "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync", "-o",
                           "/dev/stderr", str(BIN / "uwf"), *args], env=cli.env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    return [match.group(3) for match in SYNC.finditer(done.stderr)]


def test_a_command_fsyncs_its_log_append_and_nothing_else(cli: Cli) -> None:
    cli.env["UWF_DURABILITY"] = "fsync"
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    assert cli.run("sched", "policy", "set", "--max-concurrent", "4").code == 0
    assert cli.run("queue", "add", "--workflow", "solve-issue", "-p", "first").code == 0
    segment = next((cli.home / "events").iterdir())
    for args in (("queue", "add", "--workflow", "solve-issue", "-p", "second"),
                 ("sched", "lease"),
                 ("sched", "policy", "set", "--max-concurrent", "5")):
        assert synced(cli, *args) == [str(segment)], args
    for args in (("queue", "list"), ("registry", "show"), ("log", "verify")):
        assert synced(cli, *args) == [], args  # reads fsync nothing


def test_a_step_fsyncs_once_its_result_covering_its_start_and_nodes(cli: Cli) -> None:
    """Issue 30: a step's start is written and not fsynced; its result is written with
    its new nodes (records) in one write, and that write's fsync is the step's only
    one, in every process of the step (uwf-mock writes to an unsynced staging folder)."""
    cli.env["UWF_DURABILITY"] = "fsync"
    cli.env["UWF_CONFIG"] = str(ROOT / "examples" / "config.yaml")
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    started = cli.run("thread", "start", "solve-issue", "-p", "Fix it", "--json")
    thread = json.loads(started.out)["thread"]
    segment = str(next((cli.home / "events").iterdir()))
    assert synced(cli, "thread", "step", thread) == [segment]  # all processes
    calls = traced(cli, "thread", "step", thread)  # the second step, the developer's
    writes = [i for i, (call, path) in enumerate(calls) if call == "write" and path == segment]
    syncs = [i for i, (call, _) in enumerate(calls) if call in ("fsync", "fdatasync")]
    assert len(writes) == 2, calls  # the start, then the result with its nodes
    assert [calls[i][1] for i in syncs] == [segment], calls
    assert writes[0] < writes[1] < syncs[0], calls
    lines = [json.loads(line) for line in Path(segment).read_bytes().splitlines()]
    last = lines[-lines[-1]["batch"][1]:]  # the result's batch
    kinds = [line["type"] for line in last]
    assert kinds[0] == "cas.node"
    assert "thread.stepped" in kinds
    stepped = next(line for line in last if line["type"] == "thread.stepped")
    assert stepped["data"]["head"] in {line["data"]["hash"] for line in last
                                       if line["type"] == "cas.node"}


def traced(cli: Cli, *args: str) -> list[tuple[str, str]]:
    """(call, file) for each flock, write, fsync and fdatasync of a `uwf ARGS` process
    on the store's lock file and segments, in the order they returned."""
    strace = strace_binary()
    done = subprocess.run([strace, "-f", "-y", "-qq", "-e",
                           "trace=flock,write,fsync,fdatasync", "-o", "/dev/stderr",
                           str(BIN / "uwf"), *args], env=cli.env, capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = re.finditer(r"\b(flock|write|fsync|fdatasync)\((\d+)<([^>]*)>(, LOCK_(\w+))?",
                        done.stderr)
    home = str(cli.home)
    return [(match.group(1) + (f":{match.group(5)}" if match.group(5) else ""),
             match.group(3)) for match in calls if match.group(3).startswith(home)]


def test_the_lock_is_let_go_before_the_fsync(cli: Cli) -> None:
    """A short critical section (issue 21): the append is written under the writers'
    lock, the lock is let go, then the append is fsynced before the command answers,
    so the next writer appends while this one waits for the disk."""
    cli.env["UWF_DURABILITY"] = "fsync"
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    assert cli.run("sched", "policy", "set", "--max-concurrent", "4").code == 0
    segment = str(next((cli.home / "events").iterdir()))
    lock = str(cli.home / "lock")
    calls = traced(cli, "queue", "add", "--workflow", "solve-issue", "-p", "first")
    wrote = calls.index(("write", segment))
    locked = max(n for n, call in enumerate(calls[:wrote]) if call[1] == lock)
    assert calls[locked][0].startswith("flock:EX"), calls
    after = calls[wrote + 1:]
    assert after.index(("flock:UN", lock)) < after.index(("fsync", segment)), calls
    assert [call for call in after if call[1] == segment] == [("fsync", segment)], calls


def test_a_new_segment_starts_after_the_last_one_is_durable(cli: Cli) -> None:
    """With every segment full, each write starts a new one: the one before it is
    fsynced first (inside the section), so a machine's crash never keeps a later
    segment while losing the tail of an earlier one."""
    cli.env.update(UWF_DURABILITY="fsync", UWF_SEGMENT_BYTES="1")
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    before = sorted(str(path) for path in (cli.home / "events").iterdir())
    calls = traced(cli, "sched", "policy", "set", "--max-concurrent", "4")
    new = sorted(str(path) for path in (cli.home / "events").iterdir())
    assert len(new) == len(before) + 1
    last, made = before[-1], new[-1]
    assert calls.index(("fsync", last)) < calls.index(("write", made)), calls
    assert calls.index(("flock:UN", str(cli.home / "lock"))) < calls.index(
        ("fsync", made)), calls


THREADED = r'''
import sys, threading
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome
from uwf.store import Store
from uwf.workflows.events import WorkflowRegistered

hash_, threads, each = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = Store.open()
store.read()
start = threading.Barrier(threads)


def writer(number):
    start.wait()
    for index in range(each):
        name = f"t{number}-{index}"
        store.journal.write(lambda views: Outcome(
            [NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_, None))]))


workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
'''


def test_threads_of_one_process_each_fsync_after_their_write(cli: Cli) -> None:
    """Group commit in one process (issue 21): threads writing at once take the
    section in turn and fsync outside it, so one thread's fsync overlaps the next
    one's append; each thread still returns only after an fsync of its own write."""
    strace = strace_binary()
    cli.env["UWF_DURABILITY"] = "fsync"
    put = cli.run("workflow", "put", str(EXAMPLE), "--json")
    assert put.code == 0, put.err
    hash_ = json.loads(put.out)["workflow"]
    segment = str(next((cli.home / "events").iterdir()))
    done = subprocess.run([strace, "-f", "-y", "-qq", "-e", "trace=write,fsync", "-o",
                           "/dev/stderr", sys.executable, "-c", THREADED, hash_, "4", "10"],
                          env=cli.env, capture_output=True, text=True, check=False,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    by_thread: dict[str, list[str]] = {}
    for match in re.finditer(r"^(\d+) +(write|fsync)\(\d+<([^>]*)>", done.stderr, re.M):
        if match.group(3) == segment:
            by_thread.setdefault(match.group(1), []).append(match.group(2))
    assert len(by_thread) == 4, by_thread
    for calls in by_thread.values():
        assert calls == ["write", "fsync"] * 10, calls
    verify = cli.run("log", "verify", "--json")
    assert verify.code == 0, verify.err
    listed = json.loads(cli.run("workflow", "list", "--json").out)
    names = {entry["name"] for entry in listed}
    assert {f"t{n}-{i}" for n in range(4) for i in range(10)} <= names


def test_the_archive_makes_the_lines_it_copies_durable_first(cli: Cli, tmp_path: Path
                                                           ) -> None:
    """A writer lets its lock go before its fsync, so a reader may see lines not yet
    durable: `uwf archive sync` fsyncs the log (`EventLog.sync`) before it writes the
    lines into a run's files, so an archive never keeps an event a crash takes back."""
    strace = strace_binary()
    cli.env["UWF_DURABILITY"] = "fsync"
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    assert cli.run("thread", "start", "solve-issue", "-p", "Fix the login bug").code == 0
    segment = str(next((cli.home / "events").iterdir()))
    archive = tmp_path / "archive"
    done = subprocess.run([strace, "-f", "-y", "-qq", "-e", "trace=write,fsync", "-o",
                           "/dev/stderr", str(BIN / "uwf"), "archive", "sync", str(archive)],
                          env=cli.env, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    calls = [(match.group(1), match.group(2)) for match in
             re.finditer(r"\b(write|fsync)\(\d+<([^>]*)>", done.stderr)]
    runs = [n for n, (call, path) in enumerate(calls)
            if call == "write" and path.startswith(str(archive / "runs"))]
    assert runs, calls
    assert ("fsync", segment) in calls[:runs[0]], calls


def made_and_synced(cli: Cli, *args: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The folders a `uwf ARGS` process made, and its fsyncs and writes (call, path) in
    the order they returned."""
    strace = strace_binary()
    done = subprocess.run([strace, "-f", "-y", "-qq", "-e", "trace=mkdir,mkdirat,fsync,write",
                           "-o", "/dev/stderr", str(BIN / "uwf"), *args], env=cli.env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    made = [match.group(3) if match.group(3) else
            (match.group(2) if match.group(2).startswith("/")
             else os.path.join(match.group(1), match.group(2)))
            for match in re.finditer(
                r'\bmkdir(?:at\(\d+<([^>]*)>, "([^"]*)"|\("([^"]*)")[^\n]*= 0$',
                done.stderr, re.MULTILINE)]
    calls = [(match.group(1), match.group(2)) for match in
             re.finditer(r"\b(write|fsync)\(\d+<([^>]*)>", done.stderr)]
    return made, calls


def check_folders_durable(made: list[str], calls: list[tuple[str, str]]) -> None:
    """Each folder made has its parent fsynced before anything inside it is."""
    assert made
    for folder in made:
        inside = [n for n, (call, path) in enumerate(calls)
                  if call == "fsync" and path.startswith(folder + "/")]
        parent = ("fsync", os.path.dirname(folder))
        assert parent in calls, (folder, calls)
        assert not inside or calls.index(parent) < inside[0], (folder, calls)


def test_new_folders_are_durable_before_what_they_hold(cli: Cli, tmp_path: Path) -> None:
    """A node or a segment in a folder made by the same command survives a crash only
    with the folder's name: the parent of every folder a command makes (the store's,
    `events/`, `cas/` and its fan-out folders, the archive's) is fsynced before anything
    in the new folder is."""
    cli.home = tmp_path / "fresh" / "store"
    cli.env.update(UWF_DURABILITY="fsync", UWF_HOME=str(cli.home))
    made, calls = made_and_synced(cli, "workflow", "put", str(EXAMPLE))
    home = str(cli.home)
    assert {home, f"{home}/events", f"{home}/cas"} <= set(made), made
    assert any(folder.startswith(f"{home}/cas/") for folder in made), made
    check_folders_durable([folder for folder in made if folder.startswith(home)], calls)
    assert cli.run("thread", "start", "solve-issue", "-p", "Fix the login bug").code == 0
    archive = tmp_path / "archive"
    made, calls = made_and_synced(cli, "archive", "sync", str(archive))
    assert str(archive) in made
    assert any(folder.startswith(f"{archive}/") for folder in made)
    check_folders_durable([folder for folder in made if folder.startswith(str(archive))],
                          calls)
