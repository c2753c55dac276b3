"""On a terminal, long commands show progress on stderr (done of total, rate, time left)
and `thread show` / `run show` draw the run's timeline; piped, nothing extra. The
commands run as real processes on a pseudo-terminal (docs/cli.md#on-a-terminal); the
progress library is loaded only when a bar is drawn."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, Cli
from tests.queuekit import Queue
from tests.threadkit import Kit, make_kit, mock_config

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
SHORT_SCRIPT = {"planner": [{"status": "ready", "plan": "Reject empty passwords"}],
                "developer": [{"status": "done", "files": ["auth/login.py"]}],
                "reviewer": [{"status": "approved"}]}
PATH_TAKEN = "path  planner → developer → reviewer ✗ → developer → reviewer ✓ → $END"


def on_terminal(env: dict[str, str], *args: str, timeout: float = 60,
                size: tuple[int, int] = (30, 120)) -> tuple[int, str]:
    """`uwf args` with stdin, stdout and stderr on a pseudo-terminal (`size`: rows and
    columns): its exit code and all it wrote, ANSI escapes stripped, carriage returns
    kept."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
    process = subprocess.Popen([str(BIN / "uwf"), *args], stdin=slave, stdout=slave,
                               stderr=slave, close_fds=True,
                               env={**env, "TERM": "xterm", "UWF_PROGRESS_DELAY": "0"})
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the slave side
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def piped(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "uwf"), *args], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def last_frame(text: str, label: str) -> str:
    """The last drawing of the bar labelled `label` (frames are separated by \\r)."""
    frames = [frame for frame in re.split(r"[\r\n]+", text) if frame.startswith(label)]
    assert frames, f"no {label!r} bar in {text!r}"
    return frames[-1]


@pytest.fixture
def kit(cli: Cli, tmp_path: Path) -> Kit:
    made = make_kit(cli, tmp_path)
    made.put_workflow()
    return made


def test_thread_run_shows_its_steps_and_show_draws_the_timeline(kit: Kit) -> None:
    env = kit.cli.env
    thread = kit.start()
    code, text = on_terminal(env, "thread", "run", thread, "--max-steps", "20")
    assert code == 0, text
    frame = last_frame(text, "steps taken")
    # tqdm redraws at most every 0.1 s: the last frame drawn may be before the 5th step.
    assert re.search(r"\b[1-5]/20\b", frame), frame
    assert "steps/s" in frame, frame
    assert re.search(r"status\s+ended", text), text  # the panel on stdout, after the bar

    for command in (("thread", "show", thread), ("run", "show", thread)):
        code, text = on_terminal(env, *command)
        assert code == 0, text
        lines = text.replace("\r", "").splitlines()
        assert "timeline" in lines, text
        roles = [line.split()[1] for line in lines if re.match(r"^\s+\d+\s", line)]
        assert roles == ["planner", "developer", "reviewer", "developer", "reviewer"], text
        assert PATH_TAKEN in lines, text
        assert re.search(r"reviewer\s+rejected\s+\d+\.\ds", text), text

    # Piped: JSON only, nothing on stderr, no timeline.
    other = kit.start(prompt="Second task")
    ran = piped(env, "thread", "run", other)
    assert (ran.returncode, ran.stderr) == (0, "")
    assert json.loads(ran.stdout)["done"] is True
    for command in (("thread", "show", thread), ("run", "show", thread)):
        shown = piped(env, *command)
        assert (shown.returncode, shown.stderr) == (0, "")
        assert "timeline" not in shown.stdout
        json.loads(shown.stdout)
    # --json on a terminal: the payload alone.
    code, text = on_terminal(env, "thread", "show", thread, "--json")
    assert code == 0, text
    assert "timeline" not in text
    assert json.loads(text)["status"] == "ended"


def test_run_resume_and_rerun_drive_show_their_steps_on_a_terminal(kit: Kit) -> None:
    env = kit.cli.env
    thread = kit.start()
    code, text = on_terminal(env, "run", "resume", thread, "--drive")
    assert code == 0, text
    assert "steps/s" in last_frame(text, "steps taken"), text
    code, text = on_terminal(env, "run", "rerun", thread, "--drive")
    assert code == 0, text
    assert "steps/s" in last_frame(text, "steps taken"), text
    # Piped, or without --drive: nothing on stderr.
    other = kit.start(prompt="Second task")
    for args in (("run", "resume", other, "--drive"), ("run", "resume", thread)):
        done = piped(env, *args)
        assert (done.returncode, done.stderr) == (0, ""), args
        json.loads(done.stdout)
    code, text = on_terminal(env, "run", "resume", other)
    assert code == 0, text
    assert "steps taken" not in text


def test_rebuild_verify_sync_and_copy_show_bars_only_on_a_terminal(kit: Kit,
                                                                  tmp_path: Path) -> None:
    env = kit.cli.env
    kit.ok("thread", "run", kit.start())
    events = len(kit.cli.log_bytes().splitlines())
    assert events > 10
    bars = {("registry", "rebuild"): "rebuilding views",
            ("log", "verify"): "verifying the log",
            ("archive", "sync", str(tmp_path / "archive")): "syncing the archive"}
    for command, label in bars.items():
        code, text = on_terminal(env, *command)
        assert code == 0, text
        frame = last_frame(text, label)
        assert "100%" in frame, frame
        assert f"{events}/{events}" in frame, frame
        assert "events/s" in frame, frame  # the rate; `<00:00` the time left
        assert re.search(r"\[\d\d:\d\d<\d\d:\d\d", frame), frame

    # Every phase has its bar, the verify's included (issue 32: no progress for the
    # last 21 s of a 100,000-event copy): the lines copied (each verified and folded as
    # it is written), then the views' rows compared; and on a terminal that reports no
    # size (0 rows and columns, a container's pseudo-terminal), bars all the same.
    for folder, size in (("copy", (30, 120)), ("copy-sizeless", (0, 0))):
        code, text = on_terminal(env, "store", "copy", str(kit.cli.home), str(tmp_path / folder),
                                 size=size)
        assert code == 0, text
        frame = last_frame(text, "copying, verifying and folding the log")
        assert f"{events}/{events}" in frame, (size, frame)
        frame = last_frame(text, "verifying its views")
        assert re.search(r" (\d+)/\1 \[", frame), (size, frame)
        assert "rows" in frame, (size, frame)

    for command in [*bars, ("archive", "sync", str(tmp_path / "archive2")),
                    ("store", "copy", str(kit.cli.home), str(tmp_path / "copy2"))]:
        done = piped(env, *command)
        assert (done.returncode, done.stderr) == (0, ""), command
        json.loads(done.stdout)


def test_the_worker_counts_entries_done_on_a_terminal(kit: Kit, tmp_path: Path) -> None:
    env = kit.cli.env
    kit.write_config(mock_config(kit.mock_script(SHORT_SCRIPT, "short.yaml")))
    queue = Queue(kit.cli)
    for prompt in ("Fix the login bug", "Fix the logout bug"):
        queue.add("--repo", str(tmp_path), "--session", "A", prompt=prompt)
    code, text = on_terminal(env, "worker", "--session", "A", "--once")
    assert code == 0, text
    assert "2 entries" in last_frame(text, "entries done"), text
    assert text.count("completed") == 2, text  # each entry's line, the bar cleared for it

    queue.add("--repo", str(tmp_path), "--session", "B", prompt="Fix the signup bug")
    done = piped(env, "worker", "--session", "B", "--once")
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["outcome"] == "completed"


@pytest.mark.parametrize("argv", [["--help"], ["workflow", "list"]])
def test_the_progress_library_is_not_imported_unless_a_bar_is_drawn(
        argv: list[str], tmp_path: Path) -> None:
    """A fresh interpreter runs `uwf argv` (stderr piped, so no bar): neither tqdm nor
    uwf.cli.progress is loaded."""
    probe = ("import contextlib, io, sys\nfrom uwf.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             f"    code = main({argv!r})\n"
             "print(code, 'tqdm' in sys.modules, 'uwf.cli.progress' in sys.modules)")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("UWF_")},
           "UWF_HOME": str(tmp_path / "store"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, check=True)
    assert done.stdout.split() == ["0", "False", "False"], done
