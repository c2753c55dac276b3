"""Archive syncs stopped part way while runs end (issue 32, item 8's last case): after one
clean sync, `.uwf-archive.json` holds an `inodes` and a `files` entry for every run that
has not ended and none for a run that has (docs/archive.md: "a run that ended is never
appended to again and is dropped from it"), and `archive verify` passes.

Two ways of stopping a sync: a real `uwf archive sync DIR` process sent SIGKILL at many
points, chosen by a seeded schedule of what it must have written first (a graph.json,
a summary.json, some bytes: its progress seen from outside, no timing in the result);
and, in this process, a sync stopped before each of its writes in turn (the folder's
`append` and `replace`, every durable step of docs/archive.md's order), so every point
between two writes is taken once, deterministically.

The checkpoint held at every point. What did not: a sync stopped after a summary.json
and before index.json left the index without that summary for good (the next sync
found the summary there, wrote none, and so did not rebuild the index); `archive
verify` said "index.json does not match runs/*/summary.json". Both tests failed on it.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BIN, EXAMPLE, Cli
from uwf.archive import service as archive
from uwf.archive.folder import Folder
from uwf.archive.verify import verify
from uwf.errors import UwfError
from uwf.store import Store
from uwf.threads.service import kill_thread, list_threads, start_thread
from uwf.workflows.service import put_workflow

CHECKPOINT = ".uwf-archive.json"


class Stopped(BaseException):
    """The sync stopped here, as a SIGKILL would stop it: nothing after runs, no handler
    catches it (a BaseException, as KeyboardInterrupt)."""


def open_and_ended(store: Store) -> tuple[set[str], set[str]]:
    """The runs (threads) of the log that have not ended, and those that have."""
    rows = list_threads(store, include_ended=True)
    opened = {row.thread for row in rows if row.status not in ("ended", "killed")}
    return opened, {row.thread for row in rows} - opened


def checkpoint(folder: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((folder / CHECKPOINT).read_text("utf-8"))
    return found


def assert_as_documented(store: Store, folder: Path) -> None:
    """The checkpoint after a clean sync: an entry for each open run, none for an ended
    one; and the archive verifies."""
    opened, ended = open_and_ended(store)
    saved = checkpoint(folder)
    assert saved["seq"] == store.log.head().seq
    for key in ("inodes", "files"):
        kept = set(saved.get(key, {}))
        assert kept & ended == set(), f"{key} keeps runs that ended: {sorted(kept & ended)}"
        assert kept == opened, key
    result = verify(store, folder)
    assert result.ok, result.problems


# -- in this process: a sync stopped at each of its writes ---------------------------------

WRITES = ("append", "replace")  # write_once writes through replace


def stopping_at(monkeypatch: pytest.MonkeyPatch, at: int | None, *,
                half: bool = False) -> list[str]:
    """The archive folder's writes counted (their names, in order); the `at`-th (from 0)
    raises Stopped before it writes anything, or with `half`, an append after writing
    the first half of its bytes (a write the kernel ended at a page boundary when the
    process was killed). None: count only."""
    seen: list[str] = []
    for name in WRITES:
        original = getattr(Folder, name)

        def counted(self: Folder, *args: Any, _original: Any = original, _name: str = name,
                    **kwargs: Any) -> Any:
            if at is not None and len(seen) == at:
                if half and _name == "append":
                    child, data, *rest = args
                    _original(self, child, data[:len(data) // 2], *rest, **kwargs)
                raise Stopped(_name)
            seen.append(f"{_name} {args[0]}")
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Folder, name, counted)
    return seen


def grow(store: Store, repo: Path, rng: random.Random, opened: list[str]) -> None:
    """Runs end and start: a few of the open runs killed, a few new ones started."""
    for thread in rng.sample(opened, k=min(3, len(opened))):
        kill_thread(store.journal, thread, "done with it")
        opened.remove(thread)
    for number in range(3):
        opened.append(start_thread(store, "solve-issue", f"work {number}", str(repo),
                                   settings=store.settings).thread)


def test_a_sync_stopped_at_each_write_leaves_only_open_runs_after_a_clean_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """For each write point N of a sync that ends three runs and starts three: a store
    and an archive made anew and synced, the runs changed, a sync stopped before its
    N-th write, then a clean sync, then the checkpoint checked."""
    monkeypatch.setenv("UWF_DURABILITY", "none")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def attempt(at: int | None, where: Path, half: bool = False) -> list[str]:
        store = Store.open(where / "store")
        try:
            put_workflow(store, EXAMPLE)
            rng = random.Random(32)
            opened = [start_thread(store, "solve-issue", f"run {n}", str(tmp_path),
                                   settings=store.settings).thread
                      for n in range(6)]
            folder = where / "archive"
            archive.sync(store, folder)
            grow(store, tmp_path, rng, opened)
            with monkeypatch.context() as patch:
                seen = stopping_at(patch, at, half=half)
                try:
                    archive.sync(store, folder)
                except Stopped:
                    assert at is not None
                else:
                    assert at is None or at >= len(seen), "the sync was never stopped"
            archive.sync(store, folder)
            assert_as_documented(store, folder)
            return seen
        finally:
            store.close()

    writes = attempt(None, tmp_path / "whole")
    # graph.json and transitions.jsonl of each new run, transitions.jsonl and summary.json
    # of each ended one, index.json, the checkpoint.
    assert len(writes) == 3 * 2 + 3 * 2 + 2, writes
    assert writes[-1] == f"replace {CHECKPOINT}"
    failed = {}
    points = [(at, False) for at in range(len(writes))]
    points += [(at, True) for at, write in enumerate(writes) if write.startswith("append")]
    for at, half in points:
        try:
            attempt(at, tmp_path / f"stopped-{at}-{half}", half)
        except AssertionError as exc:
            failed[f"stopped {'in' if half else 'before'} {writes[at]} (write {at})"] = \
                str(exc).splitlines()[0]
        except UwfError as exc:
            failed[f"stopped {'in' if half else 'before'} {writes[at]} (write {at})"] = \
                exc.line()
    assert failed == {}


def test_a_partial_line_after_a_runs_end_is_refused(cli: Cli, tmp_path: Path) -> None:
    """No sync appends after `run_end`: a partial line there is not a stopped append's,
    and is refused, never cut."""
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    started = cli.run("thread", "start", "solve-issue", "-p", "x", "--json")
    run = json.loads(started.out)["thread"]
    assert cli.run("thread", "kill", run, "--reason", "done").code == 0
    folder = tmp_path / "archive"
    assert cli.run("archive", "sync", str(folder)).code == 0
    transitions = folder / "runs" / run / "transitions.jsonl"
    with transitions.open("ab") as handle:
        handle.write(b'{"event":"transition"')
    damaged = transitions.read_bytes()
    result = cli.run("archive", "sync", str(folder), "--run", run)
    assert result.code == 1
    assert result.err == (f"uwf: error: runs/{run}/transitions.jsonl ends in a partial line; "
                          "run `uwf archive verify DIR`\n")
    assert transitions.read_bytes() == damaged


# -- real processes, killed ------------------------------------------------------------------

def progress(folder: Path) -> dict[str, int]:
    """How far syncs have got, seen from outside: the archive's graph.json and
    summary.json files, and the bytes of all its files (an append grows one). A file
    renamed or gone while it is looked at (a temporary one) is left out."""
    found = {"graphs": 0, "summaries": 0, "bytes": 0}
    for path in folder.rglob("*") if folder.exists() else ():
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        found["graphs"] += path.name == "graph.json"
        found["summaries"] += path.name == "summary.json"
        found["bytes"] += size
    return found


def killed_sync(cli: Cli, folder: Path, what: str, count: int) -> str:
    """`uwf archive sync DIR` as a process, sent SIGKILL as soon as it has added `count`
    of `what` (graph.json files, summary.json files, bytes) to the archive, or when it
    ends by itself first; how it ended."""
    start = progress(folder)[what]
    process = subprocess.Popen([str(BIN / "uwf"), "archive", "sync", str(folder)],
                               env=cli.env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        while process.poll() is None and progress(folder)[what] - start < count:
            time.sleep(0.001)  # watching only: the check at the end holds however it ends
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.stderr is not None
    error = process.stderr.read().decode()
    process.stderr.close()
    assert process.returncode in (0, -signal.SIGKILL), error
    return "killed" if process.returncode == -signal.SIGKILL else "finished"


@pytest.mark.timeout(600)
def test_syncs_killed_at_random_while_runs_end(cli: Cli, tmp_path: Path) -> None:
    cli.env["UWF_DURABILITY"] = "fsync"  # each write a durable step, as in use
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    rng = random.Random(3432)
    folder = tmp_path / "archive"
    store = Store.open(cli.home)
    try:
        opened = [start_thread(store, "solve-issue", f"run {n}", str(tmp_path),
                               settings=store.settings).thread
                  for n in range(20)]
        ended = []
        for _ in range(16):
            grow(store, tmp_path, rng, opened)
            # While it starts, or after its first graph or summary, or some bytes in.
            what, count = rng.choice((("bytes", 0), ("graphs", 1), ("graphs", 2),
                                      ("summaries", 1), ("summaries", 2), ("bytes", 600),
                                      ("bytes", 2000)))
            ended.append(killed_sync(cli, folder, what, count))
            if rng.random() < 0.5:  # else the next round's sync starts where it was cut
                assert cli.run("archive", "sync", str(folder)).code == 0
                assert_as_documented(store, folder)
        assert cli.run("archive", "sync", str(folder)).code == 0
        assert_as_documented(store, folder)
        assert "killed" in ended
    finally:
        store.close()
    shutil.rmtree(folder)
