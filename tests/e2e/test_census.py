"""The process census (tests/census/sitecustomize.py, `python -m tests.cpukit --procs`):
each Python process started with it writes one line as it exits, naming its program and
the test whose environment it had; the report counts them by program and by test file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.cpukit import census, program


def test_each_python_process_writes_its_line_as_it_exits(tmp_path: Path) -> None:
    log = tmp_path / "procs"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "census"),
           "PROC_CENSUS": str(log), "PYTEST_CURRENT_TEST": "tests/e2e/x.py::t (call)"}
    # A parent that starts a child: two lines, the child's parent the parent's pid.
    code = ("import os, subprocess, sys; print(os.getpid(), flush=True); "
            "subprocess.run([sys.executable, '-c', 'pass'], check=True)")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True, timeout=60)
    lines = [line.split("\t") for line in log.read_text("utf-8").splitlines()]
    assert len(lines) == 2, lines
    child, parent = lines  # the child exits first
    assert parent[0] == done.stdout.strip() == child[1]
    assert [row[3] for row in lines] == ["-c", "-c"]
    assert [row[4] for row in lines] == ["tests/e2e/x.py::t"] * 2
    assert all(float(row[2]) > 0 for row in lines)
    without = subprocess.run([sys.executable, "-c", "pass"],
                             env={**env, "PROC_CENSUS": ""}, check=True, timeout=60)
    assert without.returncode == 0
    assert len(log.read_text("utf-8").splitlines()) == 2  # no line without PROC_CENSUS


def test_the_report_counts_processes_by_program_and_by_test_file(tmp_path: Path) -> None:
    assert program("uwf thread step") == "uwf thread"
    assert program("uwf --json thread") == "uwf"
    assert program("-c import sys") == "python -c"
    assert program("uwf-mock script.yaml 01ABC") == "uwf-mock"
    log = tmp_path / "procs"
    log.write_text("1\t0\t5.0000\t-c\t\n"
                   "2\t1\t0.1000\tuwf-mock s.yaml T\ttests/e2e/a.py::t1\n"
                   "3\t1\t0.2000\tuwf-mock s.yaml T\ttests/e2e/a.py::t2\n"
                   "4\t1\t0.4000\tuwf workflow put\ttests/e2e/b.py::t\n", "utf-8")
    lines = census(str(log)).splitlines()
    assert lines[0] == "4 Python processes, 5.7 CPU-s of their own (the workers' included)"
    assert "      1     5.0   5000.0  python -c" in lines
    assert "      2     0.3    150.0  uwf-mock" in lines
    assert "      1     0.4    400.0  uwf workflow" in lines
    files = lines[lines.index("  count   CPU-s  test file (processes it started, workers "
                              "aside)") + 1:]
    assert files == ["      1     0.4  tests/e2e/b.py", "      2     0.3  tests/e2e/a.py"]
