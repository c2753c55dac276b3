"""One fsync per command (issue 21): the log's append is a command's durability point;
the views, replayable from the log, are never fsynced. Counted with strace on real
`uwf` processes, every fsync and fdatasync of the process and its children."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import BIN, EXAMPLE, Cli

SYNC = re.compile(r"\b(fsync|fdatasync)\((\d+)<([^>]*)>\)")


def synced(cli: Cli, *args: str) -> list[str]:
    """The files a `uwf ARGS` process fsynced, in order."""
    strace = shutil.which("strace")
    if strace is None:
        if os.environ.get("CI") == "true":
            pytest.fail("strace is not installed; .ci/run installs it with apt")
        pytest.skip("strace is not installed")
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
