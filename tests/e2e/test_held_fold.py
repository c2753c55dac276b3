"""A step's start folds into the views with its result, in one commit (uwf/engine/held.py,
issue 30): what anyone else does between the two is seen, and chained to.

While an in-process agent runs (between the start's write and the result's), another
OS process appends to the log, or reads the thread; this process writes; the result is
then recorded after whatever landed, the log verifies, the views hold every event, and
they equal a replay's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BIN, EXAMPLE, Cli
from tests.viewkit import replays_alike
from uwf.config.configfile import Config, WorkflowConfig
from uwf.store import Store
from uwf.threads.results import StepContext
from uwf.threads.service import get_thread, start_thread
from uwf.threads.stepping import run_thread
from uwf.workflows.service import put_workflow

CONFIG = Config(WorkflowConfig(), None, None)
Meanwhile = Callable[[Store, str], None]


def step_with(tmp_path: Path, cli: Cli, meanwhile: Meanwhile) -> tuple[Store, str]:
    """A store with one thread that steps twice, `meanwhile` called inside the second
    step's agent (its start written, its result not)."""
    store = Store.open(cli.home)
    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    calls: list[int] = []

    def agent(ctx: StepContext) -> tuple[Any, str]:
        calls.append(1)
        if len(calls) == 2:
            meanwhile(store, thread)
        if ctx.role["name"] == "planner":
            return {"status": "ready", "plan": "check the password"}, "planned"
        return {"status": "done", "files": ["login.py"], "summary": "done"}, "coded"

    ran = run_thread(store, thread, in_process=agent, max_steps=2, config=CONFIG,
                     settings=store.settings)
    assert ran.steps == 2
    return store, thread


def other_process(cli: Cli, *args: str) -> str:
    done = subprocess.run([str(BIN / "uwf"), *args], env=cli.env, capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_whole(cli: Cli, store: Store, thread: str) -> None:
    """The log verifies; the thread's two steps are recorded; the views equal a replay's."""
    other_process(cli, "log", "verify")
    head = store.journal.log.head()
    assert set(store.journal.views.checkpoints().values()) == {head}  # nothing left behind
    state = get_thread(store.journal.reader(), thread)
    assert state.in_flight is None
    assert state.steps == 2
    store.close()
    replays_alike(cli.home)


@pytest.fixture
def env_cli(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name, value in cli.env.items():
        monkeypatch.setenv(name, value)
    return cli


def test_another_process_appends_between_the_start_and_the_result(
        tmp_path: Path, env_cli: Cli) -> None:
    made: list[str] = []

    def meanwhile(store: Store, thread: str) -> None:
        out = other_process(env_cli, "thread", "start", "solve-issue", "-p", "Another bug",
                            "--json")
        made.append(json.loads(out)["thread"])

    store, thread = step_with(tmp_path, env_cli, meanwhile)
    # The other process's thread is in the views this process's result committed (read
    # as they are, not caught up), and the result chained after its line (`log verify`).
    assert get_thread(store.journal.reader(), made[0]).state == "idle"
    assert_whole(env_cli, store, thread)


def test_another_process_reads_the_step_in_flight(tmp_path: Path, env_cli: Cli) -> None:
    shown: list[dict[str, Any]] = []

    def meanwhile(store: Store, thread: str) -> None:
        shown.append(json.loads(other_process(env_cli, "thread", "show", thread, "--json")))

    store, thread = step_with(tmp_path, env_cli, meanwhile)
    # `thread show` in another process caught the views up from the log: the step the
    # held fold had not committed is in flight there.
    assert shown[0]["inFlight"] is not None, shown[0]
    assert_whole(env_cli, store, thread)


def test_this_process_writes_between_the_start_and_the_result(
        tmp_path: Path, env_cli: Cli) -> None:
    made: list[str] = []

    def meanwhile(store: Store, thread: str) -> None:
        # A write that may query the views commits the held fold first: it sees the
        # step in flight.
        made.append(start_thread(store, "solve-issue", "Another bug",
                                 settings=store.settings).thread)
        assert get_thread(store.read(), thread).in_flight is not None

    store, thread = step_with(tmp_path, env_cli, meanwhile)
    assert get_thread(store.journal.reader(), made[0]).state == "idle"
    assert_whole(env_cli, store, thread)


# Another process that appends and leaves the views as they were (as a resident writer
# with its rows deferred does): its views' commits write nothing.
APPEND_ONLY = """
import sys
from uwf.store import Store
from uwf.threads.service import start_thread
store = Store.open(sys.argv[1])
store.journal.views.commit = lambda *args, **kwargs: True
print(start_thread(store, "solve-issue", "Another bug", settings=store.settings).thread)
store.close()
"""


def test_another_process_appends_leaving_the_views_behind(
        tmp_path: Path, env_cli: Cli) -> None:
    made: list[str] = []

    def meanwhile(store: Store, thread: str) -> None:
        done = subprocess.run([sys.executable, "-c", APPEND_ONLY, str(env_cli.home)],
                              env=env_cli.env, capture_output=True, text=True, check=False,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        made.append(done.stdout.strip())

    store, thread = step_with(tmp_path, env_cli, meanwhile)
    # The views were still where the held fold began, but the log had moved: the held
    # fold was let go and the views caught up from the log, the other thread with them.
    assert get_thread(store.journal.reader(), made[0]).state == "idle"
    assert_whole(env_cli, store, thread)
