"""A writer keeps its segment open, and its last line's checkpoint, across its writes
(issue 30: uwf/engine/segments.py, uwf/engine/filelog.py): what another process did to
the log in between is always seen, and the next write chains to it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BIN, EXAMPLE, Cli
from uwf.store import Store
from uwf.threads.service import get_thread, start_thread
from uwf.workflows.service import put_workflow


@pytest.fixture
def env_cli(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    for name, value in cli.env.items():
        monkeypatch.setenv(name, value)
    return cli


def uwf(cli: Cli, *args: str) -> str:
    done = subprocess.run([str(BIN / "uwf"), *args], env=cli.env, capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def log_lines(home: Path) -> list[dict[str, object]]:
    lines: list[dict[str, object]] = []
    for segment in sorted((home / "events").glob("*.jsonl")):
        lines += [json.loads(raw) for raw in segment.read_bytes().splitlines()]
    return lines


def test_another_process_appends_between_two_writes(env_cli: Cli) -> None:
    store = Store.open(env_cli.home)
    put_workflow(store, EXAMPLE)
    start_thread(store, "solve-issue", "one", settings=store.settings)
    other = json.loads(uwf(env_cli, "thread", "start", "solve-issue", "-p", "two",
                           "--json"))["thread"]
    mine = start_thread(store, "solve-issue", "three", settings=store.settings).thread
    store.close()
    uwf(env_cli, "log", "verify")
    lines = log_lines(env_cli.home)
    # This process's third write follows the other process's line, chained to it.
    subjects = [line["subject"] for line in lines]
    assert subjects.index(f"thread/{mine}") > subjects.index(f"thread/{other}")
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    again = Store.open(env_cli.home)
    assert get_thread(again.read(), other).thread == other
    again.close()


def test_a_segment_replaced_by_a_copy_is_written_as_the_new_file(env_cli: Cli) -> None:
    store = Store.open(env_cli.home)
    put_workflow(store, EXAMPLE)
    start_thread(store, "solve-issue", "one", settings=store.settings)
    (segment,) = (env_cli.home / "events").glob("*.jsonl")
    # Another hand puts the same bytes back as a new file (a restore, a copy): same
    # size, another inode. The kept descriptor writes to the old file, now unlinked.
    copy = segment.with_suffix(".copy")
    shutil.copyfile(segment, copy)
    os.replace(copy, segment)
    mine = start_thread(store, "solve-issue", "two", settings=store.settings).thread
    store.close()
    uwf(env_cli, "log", "verify")
    assert f"thread/{mine}" in [line["subject"] for line in log_lines(env_cli.home)]
