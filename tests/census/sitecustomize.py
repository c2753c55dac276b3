"""The suite's process census (docs/benchmarks.md, "the test phase's CPU"): with this
folder on PYTHONPATH and PROC_CENSUS set to a file, every Python process the run
starts (the pytest workers, each `uwf`, agent and script a test starts, and theirs)
appends one line to that file as it exits: its pid, its parent's, its own CPU-s (user +
sys), its program and first arguments, and the test that started it (PYTEST_CURRENT_TEST,
when its environment came from the test's). A process killed by a signal writes none.
The variable's name does not start with `UWF_`: `cli_on` leaves those out of a test's
environment.

    PYTHONPATH=tests/census PROC_CENSUS=/tmp/procs python -m pytest -n 2
    python -m tests.cpukit --procs /tmp/procs

It imports only `os` until the process exits (the census must not change what it
counts), then `resource` and `sys`. Without PROC_CENSUS it does nothing.
"""

from __future__ import annotations

import os

_FILE = os.environ.get("PROC_CENSUS")


def _write(path: str) -> None:
    import resource
    import sys

    usage = resource.getrusage(resource.RUSAGE_SELF)
    program = " ".join([os.path.basename(sys.argv[0]) if sys.argv else "", *sys.argv[1:3]])
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    fields = (str(os.getpid()), str(os.getppid()), f"{usage.ru_utime + usage.ru_stime:.4f}",
              program[:200], test)
    line = "\t".join(field.replace("\t", " ").replace("\n", " ") for field in fields)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8", "replace"))  # one write: lines never mix
    finally:
        os.close(fd)


if _FILE:
    import atexit

    atexit.register(_write, _FILE)
