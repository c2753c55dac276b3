"""The step's staging folder (uwf/threads/staging.py), in this process: what the parent
writes, what `uwf agent context|submit` and the kit read from it, and what is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.threadkit import make_kit
from uwf.engine.clock import fixed_clock
from uwf.errors import Corrupt, NotFound, UsageError
from uwf.store import Store
from uwf.threads import staging
from uwf.threads.agent import agent_context


def staged_thread(cli: Cli, tmp_path: Path, steps: int = 3
                  ) -> tuple[str, staging.Staging, Store]:
    """A thread stepped `steps` times with uwf-mock, and a staging folder of its next
    step (developer or reviewer) with its whole history."""
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    for _ in range(steps):
        kit.ok("thread", "step", thread)
    store = Store.open(cli.home)
    role = kit.show(thread)["currentRole"]
    context = agent_context(store, thread, role, "all", settings=store.settings)
    made = staging.stage(context, store.cas, store.clock, {"TMPDIR": str(tmp_path)})
    # In this user's folder of the command's TMPDIR, from its settings.
    assert made.folder.parent == tmp_path / f"uwf-steps-{os.getuid()}"
    return thread, made, store


def test_the_context_is_cut_to_the_history_asked_for(cli: Cli, tmp_path: Path) -> None:
    thread, made, _ = staged_thread(cli, tmp_path)
    folder = made.folder
    env = {**cli.env, staging.STEP_DIR: str(folder)}
    staged = staging.open_staged(env, fixed_clock(0), None)
    assert staged is not None
    role = staged.context["role"]["name"]
    whole = staging.staged_context(staged, thread, role)
    assert len(whole["history"]) == whole["steps"] == 3
    assert whole["historyTruncated"] is False
    last = staging.staged_context(staged, thread, role, 1)
    assert last["history"] == whole["history"][-1:]
    assert last["historyTruncated"] is True
    assert staging.staged_context(staged, thread, role, 0)["history"] == []
    # The command line reads the same folder and opens no store.
    cli.env[staging.STEP_DIR] = str(folder)
    cli.env["UWF_HOME"] = str(tmp_path / "no-store-here")
    done = cli.run("agent", "context", thread, role, "--history", "2")
    assert done.code == 0, done.err
    assert json.loads(done.out)["history"] == whole["history"][-2:]
    assert not (tmp_path / "no-store-here").exists()


def test_a_submitted_step_is_brought_into_the_store(cli: Cli, tmp_path: Path) -> None:
    thread, made, store = staged_thread(cli, tmp_path, steps=1)
    folder = made.folder
    staged = staging.open_staged({staging.STEP_DIR: str(folder)}, fixed_clock(7), None)
    assert staged is not None
    step = staging.staged_submit(staged, thread, "developer", {"status": "done",
                                 "files": ["a.py"]}, "notes", agent="t",
                                 started_at_ms=None, completed_at_ms=7)
    assert not store.cas.has(step)
    staging.bring_in(folder, store.cas, step)
    node = store.cas.get(step).payload
    assert store.cas.get(node["output"]).payload == {"status": "done", "files": ["a.py"]}
    assert store.cas.get(node["detail"]).payload == "notes"
    assert node["prev"] == agent_context(store, thread, "developer", settings=store.settings).head
    staging.remove(made)
    assert not folder.exists()


def test_a_folder_that_holds_no_step_is_one_line(cli: Cli, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="holds no step"):
        staging.open_staged({staging.STEP_DIR: str(tmp_path)}, fixed_clock(0), None)
    (tmp_path / staging.CONTEXT_FILE).write_text("[1, 2")
    with pytest.raises(Corrupt, match="cannot be read"):
        staging.open_staged({staging.STEP_DIR: str(tmp_path)}, fixed_clock(0), None)
    cli.env[staging.STEP_DIR] = str(tmp_path / "gone")
    done = cli.run("agent", "submit", "01J7K9M2XNPQR5VWBCDF8G3H4T", "planner", "--output", "-",
                   stdin="{}")
    assert done.code == 1
    assert done.err.count("\n") == 1
    assert "holds no step" in done.err


def test_a_negative_history_is_refused(cli: Cli, tmp_path: Path) -> None:
    thread, made, _ = staged_thread(cli, tmp_path, steps=0)
    staged = staging.open_staged({staging.STEP_DIR: str(made.folder)}, fixed_clock(0), None)
    assert staged is not None
    with pytest.raises(UsageError):
        staging.staged_context(staged, thread, "planner", -1)


def test_a_node_file_over_the_limit_is_not_read(cli: Cli, tmp_path: Path) -> None:
    _, made, store = staged_thread(cli, tmp_path, steps=0)
    folder = made.folder
    name = "0" * 13
    (folder / "cas" / "00").mkdir(parents=True, exist_ok=True)
    with open(folder / "cas" / "00" / f"{name}.json", "wb") as out:
        out.truncate(staging.MAX_FILE_BYTES + 1)  # sparse: no disk spent
    with pytest.raises(Corrupt, match="over"):
        staging.bring_in(folder, store.cas, name)


def test_a_tmpdir_that_is_no_folder_stages_in_the_systems_temp(cli: Cli,
                                                               tmp_path: Path) -> None:
    import tempfile

    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    store = Store.open(cli.home)
    context = agent_context(store, thread, kit.show(thread)["currentRole"], "all",
                            settings=store.settings)
    made = staging.stage(context, store.cas, store.clock,
                         {"TMPDIR": str(tmp_path / "absent")})
    try:
        assert made.folder.parent.parent == Path(tempfile.gettempdir())
        assert (made.folder / staging.CONTEXT_FILE).is_file()
    finally:
        staging.remove(made)


_KILLED_MID_STEP = """
import os, signal, sys
from uwf.store import Store
from uwf.threads import staging
from uwf.threads.agent import agent_context
home, thread, role, tmp = sys.argv[1:]
store = Store.open(home)
context = agent_context(store, thread, role, "all", settings=store.settings)
made = staging.stage(context, store.cas, store.clock, {"TMPDIR": tmp})
print(made.folder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_steps_folder_goes_when_the_next_step_is_staged(cli: Cli,
                                                                  tmp_path: Path) -> None:
    """A step killed (SIGKILL: its `remove` never runs) leaves its folder; the next
    stage in that temp folder removes it, and keeps a live step's and one being made."""
    import subprocess
    import sys
    import time

    _, alive, store = staged_thread(cli, tmp_path, steps=0)
    thread = json.loads(cli.run("thread", "list", "--json").out)[0]["thread"]
    role = json.loads(cli.run("thread", "show", thread).out)["currentRole"]
    child = subprocess.run([sys.executable, "-c", _KILLED_MID_STEP, str(cli.home), thread,
                            role, str(tmp_path)], check=False, capture_output=True,
                           text=True, timeout=60, env=cli.env)
    assert child.returncode == -9, child.stderr
    killed = Path(child.stdout.strip())
    assert (killed / staging.CONTEXT_FILE).is_file()  # left behind
    parent = killed.parent
    being_made = parent / f"{staging.PREFIX}making"
    being_made.mkdir()  # no OWNER yet, and young
    forgotten = parent / f"{staging.PREFIX}forgotten"
    forgotten.mkdir()  # no OWNER, and older than the grace
    day = staging.UNOWNED_GRACE_MS
    old = time.time() - day / 1000 - 60
    os.utime(forgotten, (old, old))
    context = agent_context(store, thread, role, "all", settings=store.settings)
    # A store's clock may be fixed anywhere (--now): a folder's age is the wall's.
    made = staging.stage(context, store.cas, fixed_clock(store.clock() + 10 * day),
                         {"TMPDIR": str(tmp_path)})
    try:
        assert not killed.exists()
        assert not forgotten.exists()
        assert alive.folder.is_dir()
        assert being_made.is_dir()
        assert sorted(parent.iterdir()) == sorted([alive.folder, being_made, made.folder])
    finally:
        staging.remove(made)
        staging.remove(alive)
    assert staging.sweep(parent) == 0  # both removed by their owners
    assert sorted(parent.iterdir()) == [being_made]


def test_a_folder_of_folders_not_this_users_own_is_not_used(cli: Cli,
                                                            tmp_path: Path) -> None:
    """The name taken by a folder open to others (or a link, or another user's): the
    step stages in the temp folder itself, and nothing there is swept."""
    _, first, store = staged_thread(cli, tmp_path, steps=0)
    parent = first.folder.parent
    staging.remove(first)
    parent.chmod(0o777)
    try:
        thread = json.loads(cli.run("thread", "list", "--json").out)[0]["thread"]
        role = json.loads(cli.run("thread", "show", thread).out)["currentRole"]
        made = staging.stage(agent_context(store, thread, role, "all",
                                           settings=store.settings), store.cas,
                             store.clock, {"TMPDIR": str(tmp_path)})
        try:
            assert made.folder.parent == tmp_path
            assert made.folder.name.startswith("uwf-step-")
            assert (made.folder / staging.CONTEXT_FILE).is_file()
        finally:
            staging.remove(made)
        assert not made.folder.exists()
    finally:
        parent.chmod(0o700)
