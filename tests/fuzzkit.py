"""What every fuzz target (tests/e2e/test_fuzz_*.py) shares: budgets, a sandboxed store,
`uwf` / `json-cas` run in-process or as the real binaries, the verdict on one
command, and the tally of inputs tried that the terminal summary prints.

A command's verdict is one of two, or the example fails:
- accepted: exit 0 (stderr empty, or `warning:` lines);
- refused: exit 1, 2 or 3 (3 only where the SPEC has "nothing to pick or lease")
  with exactly one `<prog>: error: <what>` line on stderr, or a verify command's
  `{"ok": false, ...}` payload on stdout and nothing on stderr.
A traceback, an "internal error", an exception escaping `main`, any other exit
code, more or fewer stderr lines, or a command still running after its time
limit is a crash. Budgets: `fuzz_settings(ci)` (docs/fuzzing.md).

The summary counts per target: inputs tried, commands accepted and refused,
crashes, inputs after which the log or the CAS changed when it must not have,
other failed checks (a wrong answer), and inputs set aside because they hit a
failure a strict xfail already pins (`known`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, reject, settings

from tests.clikit import Called, call
from tests.conftest import snapshot

# -- budgets -----------------------------------------------------------------------------

# The profiles are registered in tests/conftest.py: `ci` (the default, max_examples 100)
# runs each target's CI budget; `--hypothesis-profile=long` (max_examples 1000) ten times
# as many; UWF_FUZZ_EXAMPLES=N runs N per in-process target and N/10 per real-binary one.
PROFILE_BASE = 100


def examples(ci: int, *, binary: bool = False) -> int:
    """How many inputs a target tries: its CI budget, scaled by the profile or set by
    UWF_FUZZ_EXAMPLES."""
    if raw := os.environ.get("UWF_FUZZ_EXAMPLES"):
        wanted = int(raw)
        return max(1, wanted // 10 if binary else wanted)
    current = settings.default
    scale = max(1, (current.max_examples if current else PROFILE_BASE) // PROFILE_BASE)
    return ci * scale


def fuzz_settings(ci: int, *, binary: bool = False) -> settings:
    """A target's settings: its budget, no deadline (a command takes ~10 ms in-process,
    ~150 ms as a process, more on a loaded machine), and the health checks that only
    say inputs are large or slow to make (they are, on purpose) turned off."""
    return settings(
        max_examples=examples(ci, binary=binary),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.large_base_example, HealthCheck.filter_too_much,
                               HealthCheck.function_scoped_fixture],
    )


# -- the tally: inputs tried per target, reported in the terminal summary -----------------

_COUNTS: dict[str, Counter[str]] = {}
PROPERTY = "uwf-fuzz"


class Crash(AssertionError):
    """A traceback, an internal error, a hang, a bad exit code or not one line."""


class DataChanged(AssertionError):
    """The log or the CAS changed under a refused (or read-only) command, or a write
    broke the log."""


@dataclass(frozen=True)
class Known:
    """A failure pinned by a strict-xfail reproducer and not fixed yet (its fix belongs
    to code this suite may not change): fuzzing sets such an input aside, so it can go
    on looking for others, and counts it under `known`."""

    fragments: tuple[str, ...]  # all found in the failure's message
    reproducer: str  # the xfail test that pins it


_KNOWN: dict[str, list[Known]] = {}
_TRYING: list[str] = []  # the target of the input being tried, if any


def known(targets: Sequence[str], reproducer: str, *fragments: str) -> None:
    """Declare a pinned failure of `targets`: see `Known`."""
    for target in targets:
        _KNOWN.setdefault(target, []).append(Known(fragments, reproducer))


def _pinned(target: str, failure: BaseException) -> bool:
    text = str(failure)
    return any(all(fragment in text for fragment in pinned.fragments)
               for pinned in _KNOWN.get(target, []))


class Pinned(Exception):
    """Raised by a target for an input whose failure a strict xfail pins, when the
    input (not the error's words) says which: counted as `known`, set aside."""


@contextlib.contextmanager
def trying(target: str) -> Iterator[None]:
    """Count one input of `target`, and whether it crashed or changed data."""
    counts = _COUNTS.setdefault(target, Counter())
    counts["inputs"] += 1
    _TRYING.append(target)
    try:
        yield
    except Pinned:
        counts["known"] += 1
        reject()
    except (Crash, DataChanged) as exc:
        if _pinned(target, exc):
            counts["known"] += 1
            reject()
        counts["dataChanged" if isinstance(exc, DataChanged) else "crashes"] += 1
        raise
    except BaseException as exc:
        if type(exc).__module__.startswith("hypothesis"):
            counts["inputs"] -= 1  # hypothesis abandoned the input (assume, overrun)
        else:
            counts["otherFailures"] += 1  # a target's own check (a wrong answer)
        raise
    finally:
        _TRYING.pop()


def count(target: str, verdict: str) -> None:
    """Note one command's verdict (accepted / refused) under `target`, while an input
    is being tried (the plain regression tests are not counted)."""
    if _TRYING:
        _COUNTS.setdefault(target, Counter())[verdict] += 1


def take_counts() -> dict[str, dict[str, int]]:
    """The counts since the last call (one test's), emptied."""
    taken = {target: dict(counts) for target, counts in _COUNTS.items()}
    _COUNTS.clear()
    return taken


def attach_counts(report: pytest.TestReport) -> None:
    """Carry a test's counts in its report (xdist sends user_properties to the
    controller, which prints the summary)."""
    for target, counts in take_counts().items():
        report.user_properties.append((PROPERTY, {target: counts}))


def totals(reports: Sequence[Any]) -> dict[str, Counter[str]]:
    found: dict[str, Counter[str]] = {}
    for report in reports:
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY and isinstance(value, dict):
                for target, counts in value.items():
                    found.setdefault(target, Counter()).update(counts)
    return found


COLUMNS = ("inputs", "accepted", "refused", "crashes", "dataChanged", "otherFailures",
           "known")


def summary(terminal: Any) -> None:
    """The terminal summary's table of inputs tried per target (and UWF_FUZZ_REPORT)."""
    reports = [report for reports in terminal.stats.values() for report in reports
               if getattr(report, "when", None) == "call"]
    found = totals(reports)
    if not found:
        return
    terminal.write_sep("-", "uwf fuzz: inputs tried per target")
    width = max(len(target) for target in found)
    terminal.write_line(f"{'target':<{width}}  " + "  ".join(f"{c:>8}" for c in COLUMNS))
    for target in sorted(found):
        counts = found[target]
        terminal.write_line(f"{target:<{width}}  " + "  ".join(
            f"{counts.get(c, 0):>{max(8, len(c))}}" for c in COLUMNS))
    if path := os.environ.get("UWF_FUZZ_REPORT"):
        Path(path).write_text(json.dumps({t: {c: found[t].get(c, 0) for c in COLUMNS}
                                          for t in sorted(found)}, indent=2) + "\n")


# -- a sandboxed store -------------------------------------------------------------------

@dataclass
class Sandbox:
    """A folder for one input: the store, the config folder, HOME, the working folder,
    and an empty PATH folder (so no agent named by a generated word can run)."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "store"

    @property
    def config_dir(self) -> Path:
        return self.root / "config" / "uwf"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @classmethod
    def create(cls, root: Path, *, path: str | None = None) -> Sandbox:
        sandbox = cls(root)
        (root / "bin").mkdir(parents=True, exist_ok=True)
        sandbox.work.mkdir(exist_ok=True)
        keep = {name: value for name, value in os.environ.items()
                if name in ("LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "PYTHONHASHSEED")}
        sandbox.env = {**keep, "UWF_HOME": str(sandbox.home),
                       "XDG_CONFIG_HOME": str(root / "config"),
                       "XDG_STATE_HOME": str(root / "state"),
                       "HOME": str(root), "UWF_DURABILITY": "none",
                       "PATH": path if path is not None else str(root / "bin")}
        return sandbox

    def copy(self, root: Path) -> Sandbox:
        """A fresh copy of this sandbox's files at `root`, its paths rewritten."""
        shutil.copytree(self.root, root, symlinks=True)
        env = {name: value.replace(str(self.root), str(root)) for name, value in
               self.env.items()}
        return Sandbox(root, env)

    def snapshot(self) -> dict[str, bytes]:
        return snapshot(self.home)

    def write_config(self, text: str | bytes) -> Path:
        path = self.config_dir / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return path

    def write_env_file(self, data: bytes) -> Path:
        path = self.config_dir / ".env"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path


@contextlib.contextmanager
def fresh(template: Sandbox) -> Iterator[Sandbox]:
    """A copy of `template` for one input, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="fuzz-", dir=template.root.parent))
    try:
        yield template.copy(base / "s")
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- running a command -------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    prog: str
    argv: tuple[str, ...]
    code: int
    out: str
    err: str
    seconds: float
    raised: str | None = None  # an exception that escaped main, with its traceback
    hung: bool = False

    def describe(self) -> str:
        return (f"{self.prog} {list(self.argv)!r}: exit {self.code} in {self.seconds:.2f}s\n"
                f"stdout: {self.out[-2000:]!r}\nstderr: {self.err[-4000:]!r}"
                + (f"\nraised:\n{self.raised}" if self.raised else "")
                + ("\nstill running at its time limit" if self.hung else ""))


def run_in_process(sandbox: Sandbox, prog: str, *argv: str, stdin: bytes = b"",
                   limit: float = 30.0) -> Outcome:
    """`main(argv)` of `prog` in this process (tests/clikit.py), in the sandbox's
    environment and folder, with stdin, stdout and stderr its own."""
    return _outcome(prog, argv, lambda: call(prog, argv, sandbox.env, stdin=stdin,
                                             limit=limit, cwd=sandbox.work))


def run_binary(sandbox: Sandbox, prog: str, *argv: str, stdin: bytes = b"",
               limit: float = 60.0) -> Outcome:
    """The real console script `prog` as a process, in the sandbox."""
    return _outcome(prog, argv, lambda: call(prog, argv, sandbox.env, stdin=stdin,
                                             limit=limit, cwd=sandbox.work, process=True))


def _outcome(prog: str, argv: tuple[str, ...], run: Callable[[], Called]) -> Outcome:
    started = time.monotonic()
    called = run()
    return Outcome(prog, argv, called.code, _text(called.out), _text(called.err),
                   time.monotonic() - started, called.raised, called.hung)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


Runner = Callable[..., Outcome]


# -- the verdict -------------------------------------------------------------------------

def verdict(outcome: Outcome, target: str, *, nothing: bool = False) -> str:
    """"accepted" or "refused" (counted under `target`), or raise Crash. `nothing`: the
    command may exit 3 (nothing to pick or lease)."""
    problem = _crash(outcome, nothing)
    if problem is not None:
        raise Crash(f"{problem}\n{outcome.describe()}")
    kind = "accepted" if outcome.code == 0 else "refused"
    count(target, kind)
    return kind


def _crash(outcome: Outcome, nothing: bool) -> str | None:
    if outcome.hung:
        return "a hang"
    if outcome.raised is not None:
        return "an exception escaped main"
    if "Traceback" in outcome.err or "internal error" in outcome.err:
        return "a traceback or an internal error"
    lines = outcome.err.splitlines()
    if outcome.code == 0:
        if any(not line.startswith("warning: ") for line in lines):
            return "exit 0 with something on stderr that is not a warning"
        return None
    if not outcome.argv and outcome.code == 2 and outcome.err.startswith("usage: "):
        return None  # no command at all: the help, as `git` does
    allowed = (1, 2, 3) if nothing else (1, 2)
    if outcome.code not in allowed:
        return f"exit {outcome.code} is not one of {allowed}"
    if not lines and outcome.code == 1 and _not_ok(outcome.out):
        return None  # a verify command's payload says what is wrong
    if len(lines) != 1 or not lines[0].strip():
        return f"{len(lines)} lines on stderr, not one"
    if not lines[0].startswith(f"{outcome.prog}: error: "):
        return f"the error does not start with {outcome.prog}: error:"
    if lines[0].endswith("--help`") and outcome.code != 2:
        return "a usage error whose exit code is not 2"
    return None


def _not_ok(out: str) -> bool:
    try:
        payload = json.loads(out)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("ok") is False


def unchanged(before: Mapping[str, bytes], sandbox: Sandbox, outcome: Outcome) -> None:
    """The log and the CAS are byte for byte as they were."""
    after = sandbox.snapshot()
    if after != before:
        added = sorted(set(after) - set(before))
        removed = sorted(set(before) - set(after))
        edited = sorted(k for k in set(after) & set(before) if after[k] != before[k])
        raise DataChanged(f"the store changed: added {added}, removed {removed}, edited "
                          f"{edited}\n{outcome.describe()}")


def log_verifies(sandbox: Sandbox, run: Runner = run_in_process) -> None:
    """`uwf log verify` passes."""
    checked = run(sandbox, "uwf", "--json", "log", "verify")
    if checked.code != 0 or checked.err:
        raise DataChanged(f"the log no longer verifies\n{checked.describe()}")


def accepted_or_unchanged(sandbox: Sandbox, target: str, before: Mapping[str, bytes],
                          outcome: Outcome, *, nothing: bool = False,
                          run: Runner = run_in_process, verified: bool = True) -> str:
    """The verdict; a refused command changed nothing, an accepted one left a log that
    verifies (when it `verified` before)."""
    kind = verdict(outcome, target, nothing=nothing)
    if kind == "refused":
        unchanged(before, sandbox, outcome)
    elif verified and sandbox.snapshot() != before:
        log_verifies(sandbox, run)
    return kind


def payload(outcome: Outcome) -> Any:
    return json.loads(outcome.out)
