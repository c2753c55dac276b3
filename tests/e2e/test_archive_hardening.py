"""Bad input to the per-run archive (`uwf archive sync|verify`, docs/archive.md) gets one
line on stderr and the spec's exit code, and nothing outside the archive folder is
touched: a transitions.jsonl that is a hard link to a file elsewhere (or was replaced
since the last sync), a temporary file left as a hard link, a folder name too long for
the system, an empty folder name (an unset shell variable), and a SIGTERM that comes
while `archive sync --follow` is still starting (exit 0, as documented)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import Cli, snapshot
from tests.runkit import Fleet, run_in
from tests.threadkit import one_line_error, popen_uwf


def sync(cli: Cli, folder: Path) -> dict[str, object]:
    result = cli.run("archive", "sync", str(folder))
    assert (result.code, result.err) == (0, ""), result
    payload: dict[str, object] = json.loads(result.out)
    return payload


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


# -- hard links and replaced files -----------------------------------------------------

def test_a_transitions_file_hard_linked_outside_is_never_appended_to(
        fleet: Fleet, tmp_path: Path) -> None:
    cli, folder = fleet.cli, tmp_path / "archive"
    run = fleet.start()
    sync(cli, folder)
    path = folder / "runs" / run / "transitions.jsonl"
    # The file is replaced by a hard link to a file outside, with the same bytes (so
    # the size check alone does not see it).
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(path.read_bytes())
    # The synced file is moved aside, not deleted: its inode stays taken, so the copy
    # made below can never be given the inode number the checkpoint recorded (ext4
    # hands a just-freed number out again).
    path.rename(tmp_path / "synced.jsonl")
    os.link(outside, path)
    kept = outside.read_bytes()
    assert fleet.step(run).code == 0
    before = files(folder)
    line = one_line_error(cli.run("archive", "sync", str(folder)), 1,
                          f"runs/{run}/transitions.jsonl has 2 links")
    assert "never writes through one" in line
    assert "copy of its own" in line
    assert outside.read_bytes() == kept
    assert files(folder) == before
    # verify names it too.
    result = cli.run("archive", "verify", str(folder))
    assert result.code == 1
    problems = json.loads(result.out)["problems"]
    assert any(p["file"] == f"runs/{run}/transitions.jsonl" and "2 links" in p["problem"]
               for p in problems), problems

    # A copy of its own (one link, a new inode) is refused too, as a replaced file,
    # until the checkpoint's record of it is dropped on purpose.
    path.unlink()
    shutil.copyfile(outside, path)
    line = one_line_error(cli.run("archive", "sync", str(folder)), 1,
                          f"runs/{run}/transitions.jsonl is not the file the archive last "
                          "synced", '"inodes" entry of .uwf-archive.json')
    assert files(folder)[f"runs/{run}/transitions.jsonl"] == kept
    checkpoint = json.loads((folder / ".uwf-archive.json").read_text())
    assert run in checkpoint["inodes"]
    del checkpoint["inodes"]
    (folder / ".uwf-archive.json").write_text(json.dumps(checkpoint))
    synced = sync(cli, folder)  # a checkpoint without inodes (an older uwf's) is read
    assert synced["appended"] == 3
    assert outside.read_bytes() == kept
    info = path.stat()
    again = json.loads((folder / ".uwf-archive.json").read_text())
    assert again["inodes"] == {run: [info.st_dev, info.st_ino]}
    assert cli.run("archive", "verify", str(folder)).code == 0


def test_a_transitions_file_replaced_between_syncs_is_refused(
        fleet: Fleet, tmp_path: Path) -> None:
    cli, folder = fleet.cli, tmp_path / "archive"
    run = fleet.start()
    sync(cli, folder)
    path = folder / "runs" / run / "transitions.jsonl"
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_bytes(path.read_bytes())
    os.replace(swapped, path)  # same bytes, one link, another inode
    assert fleet.step(run).code == 0
    before = files(folder)
    one_line_error(cli.run("archive", "sync", str(folder)), 1,
                   f"runs/{run}/transitions.jsonl is not the file the archive last synced "
                   "(its inode changed since the checkpoint)")
    assert files(folder) == before
    # Once the run has ended its file is never appended to again: the checkpoint
    # forgets it.
    assert fleet.step(run).code == 0
    assert fleet.step(run).code == 0
    checkpoint = json.loads((folder / ".uwf-archive.json").read_text())
    del checkpoint["inodes"]
    (folder / ".uwf-archive.json").write_text(json.dumps(checkpoint))
    assert sync(cli, folder)["ended"] == 1
    assert "inodes" not in json.loads((folder / ".uwf-archive.json").read_text())


def test_a_temporary_file_left_as_a_hard_link_is_never_written_through(
        fleet: Fleet, tmp_path: Path) -> None:
    cli, folder = fleet.cli, tmp_path / "archive"
    run = fleet.start()
    sync(cli, folder)
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    os.link(outside, folder / "runs" / run / ".summary.json.tmp")
    os.link(outside, folder / ".index.json.tmp")
    for _ in range(3):
        assert fleet.step(run).code == 0
    assert sync(cli, folder)["ended"] == 1
    assert outside.read_text() == "keep me\n"
    assert json.loads((folder / "runs" / run / "summary.json").read_text())["run_id"] == run
    assert cli.run("archive", "verify", str(folder)).code == 0


# -- folder names ------------------------------------------------------------------------

def test_a_folder_name_too_long_is_one_line_exit_2(fleet: Fleet, tmp_path: Path) -> None:
    cli = fleet.cli
    fleet.start()
    long_name = str(tmp_path / ("a" * 300))
    for command in ("sync", "verify"):
        line = cli.refuses(2, "archive", command, long_name)
        assert "File name too long" in line, line
        assert "give a shorter path" in line, line
    line = cli.refuses(2, "worker", "--once", "--archive", long_name)
    assert "File name too long" in line
    assert list(tmp_path.glob("aaa*")) == []


def test_an_empty_folder_name_is_refused_naming_the_option(fleet: Fleet, tmp_path: Path
                                                           ) -> None:
    cli = fleet.cli
    entry = fleet.ok("queue", "add", "--workflow", "relay", "-p", "Carry it")["entry"]["id"]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cases = {("archive", "sync", ""): "argument DIR: ''",
             ("archive", "sync", "", "--follow"): "argument DIR: ''",
             ("archive", "verify", ""): "argument DIR: ''",
             ("worker", "--once", "--archive", ""): "argument --archive: ''",
             ("worker", "--once", "--anchors", ""): "argument --anchors: ''"}
    for args, named in cases.items():
        before = snapshot(cli.home)
        result = run_in(cli, cwd, *args)
        line = one_line_error(result, 2, named, "unset shell variable")
        assert snapshot(cli.home) == before, args
        assert list(cwd.iterdir()) == [], (args, line)
    assert fleet.ok("queue", "show", entry)["status"] == "ready"  # nothing was leased


def test_an_empty_folder_name_is_refused_from_python(fleet: Fleet, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from uwf.archive import service as archive
    from uwf.archive import verify as archive_verify
    from uwf.errors import UsageError
    from uwf.store import Store

    monkeypatch.chdir(tmp_path)
    store = Store.open(fleet.cli.home)
    try:
        with pytest.raises(UsageError, match="empty name"):
            archive.sync(store, "")
        with pytest.raises(UsageError, match="empty name"):
            archive_verify.verify(store, "")
    finally:
        store.close()
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / ".uwf-archive.json").exists()


# -- SIGTERM while --follow starts --------------------------------------------------------

def handles_sigterm(pid: int) -> bool:
    """True once the process has a handler for SIGTERM (uwf installs its own first
    thing): from then on, SIGTERM is uwf's to handle."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


@pytest.mark.parametrize("delay", [0.0, 0.002, 0.01, 0.03, 0.08])
# `--follow` and its SIGTERM: a process (popen_uwf); the commands beside it in-process.
def test_sigterm_while_follow_starts_exits_0(fleet: Fleet, tmp_path: Path, delay: float
                                             ) -> None:
    cli, folder = fleet.cli, tmp_path / "archive"
    fleet.start()
    following = popen_uwf(cli, "archive", "sync", str(folder), "--follow")
    try:
        deadline = time.monotonic() + 60
        while not handles_sigterm(following.pid) and following.poll() is None:
            assert time.monotonic() < deadline, "uwf never installed its SIGTERM handler"
            time.sleep(0.0005)
        time.sleep(delay)
        following.send_signal(signal.SIGTERM)
        out, err = following.communicate(timeout=30)
    finally:
        if following.poll() is None:
            following.kill()
            following.communicate()
    assert (following.returncode, err) == (0, ""), (delay, following.returncode, err)
    for line in out.splitlines():  # whatever it synced before it stopped
        assert json.loads(line)["archive"] == str(folder)
    if folder.exists():
        assert cli.run("archive", "verify", str(folder)).code == 0



# A module the console script imports after its handler is installed (uwf.cli.entry
# imports msgspec right after; argparse, once this hook, is no longer loaded by a plain
# command line: uwf.cli.quickparse), shadowed on PYTHONPATH: it sends the process
# SIGTERM while it is imported, then is the real msgspec. So the signal lands, every run, while the
# commands' modules load (issue 32: 16 of 16 SIGTERMs in the first 0.2 s exited 143).
SIGTERM_WHILE_IMPORTED = """
import importlib, os, signal, sys
os.kill(os.getpid(), signal.SIGTERM)
sys.path.remove(os.path.dirname(os.path.abspath(__file__)))
del sys.modules["msgspec"]
sys.modules["msgspec"] = importlib.import_module("msgspec")
"""


@pytest.mark.parametrize(("args", "code"), [(("--follow",), 0), ((), 143)])
def test_sigterm_while_the_modules_load_waits_for_the_command(
        fleet: Fleet, tmp_path: Path, args: tuple[str, ...], code: int) -> None:
    """A SIGTERM that comes while the console script imports its modules is handled as
    one that comes later: `archive sync --follow` exits 0 (nothing synced, no error),
    a plain sync 143; never the default action's death by signal."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "msgspec.py").write_text(SIGTERM_WHILE_IMPORTED, "utf-8")
    folder = tmp_path / "archive"
    done = fleet.cli.processes().call("uwf", ["archive", "sync", str(folder), *args], b"",
                                      env={"PYTHONPATH": str(shadow)})
    assert (done.code, done.out, done.err) == (code, "", ""), done
    assert not folder.exists()


def test_a_sigterm_whose_exception_was_swallowed_still_stops_a_follow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by `.ci/run` (the test above, delay 0.08, under load): a SIGTERM that came
    while `archive sync --follow` imported a module raised Terminated inside the import
    lock's weakref callback, where Python ignores exceptions; the signal was spent and
    the follow ran on until killed. The console script's handler keeps what it received,
    and `until_signalled` stops at once on it."""
    import weakref

    from uwf.cli.common import until_signalled
    from uwf.cli.termination import Terminated, Termination, quiet_termination

    ignored: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda raised: ignored.append(raised.exc_type))
    handler = Termination()
    old = signal.signal(signal.SIGTERM, handler)
    try:
        class Held:
            pass

        held = Held()
        # The raise lands in a weakref callback, as in importlib's module-lock callback.
        ref = weakref.ref(held, lambda _: handler(signal.SIGTERM, None))
        del held
        assert ref() is None
        assert [kind.__name__ for kind in ignored] == ["Terminated"]  # ignored by Python
        with until_signalled() as stop:
            assert stop.is_set()
    finally:
        signal.signal(signal.SIGTERM, old)
    with until_signalled() as stop:  # a handler that received nothing stops nothing
        assert not stop.is_set()
    # And the console script prints no traceback for it ("Exception ignored in ...").
    printed: list[Any] = []
    quiet = quiet_termination(printed.append)
    quiet(SimpleNamespace(exc_value=Terminated(143)))
    quiet(SimpleNamespace(exc_value=ValueError("another")))
    assert [type(raised.exc_value).__name__ for raised in printed] == ["ValueError"]

# -- a file that no longer holds what the last sync left -------------------------------

@pytest.mark.parametrize("damage", ["cut", "edited"])
def test_sync_refuses_to_append_to_a_file_cut_or_edited_since(
        fleet: Fleet, tmp_path: Path, damage: str) -> None:
    """Issue 17 item 4: a transitions.jsonl cut at a line boundary (or edited in place,
    same size) got new lines appended on top of the damage; only a later verify saw it.
    The checkpoint keeps each open run's bytes, lines and digest, checked first."""
    cli, folder = fleet.cli, tmp_path / "archive"
    run = fleet.start()
    assert fleet.step(run).code == 0
    sync(cli, folder)
    path = folder / "runs" / run / "transitions.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 3
    if damage == "cut":
        path.write_bytes(b"".join(lines[:-1]))  # the last line gone, a clean line boundary
    else:  # the same bytes but one: a node's attempt, still a valid archive line
        edited = lines[-1].replace(b'"attempt":1', b'"attempt":7', 1)
        assert edited != lines[-1]
        path.write_bytes(b"".join(lines[:-1]) + edited)
    assert fleet.step(run).code == 0  # more events for the run
    before = files(folder)
    what = "was cut short" if damage == "cut" else "was edited"
    line = one_line_error(cli.run("archive", "sync", str(folder)), 1,
                          f"runs/{run}/transitions.jsonl {what} since the last sync")
    assert "nothing appended" in line
    assert "restore the file from a backup" in line
    assert files(folder) == before


def test_lines_a_crashed_sync_appended_past_the_checkpoint_are_accepted(
        fleet: Fleet, tmp_path: Path) -> None:
    """The file may hold more than the checkpoint says (a sync that appended and died
    before moving it): those lines are the log's, folded again, not damage."""
    cli, folder = fleet.cli, tmp_path / "archive"
    run = fleet.start()
    sync(cli, folder)
    checkpoint = (folder / ".uwf-archive.json").read_bytes()
    assert fleet.step(run).code == 0
    sync(cli, folder)
    grown = (folder / "runs" / run / "transitions.jsonl").read_bytes()
    (folder / ".uwf-archive.json").write_bytes(checkpoint)  # as if the sync died before it
    sync(cli, folder)
    assert (folder / "runs" / run / "transitions.jsonl").read_bytes() == grown
    assert cli.run("archive", "verify", str(folder)).code == 0
