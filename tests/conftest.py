"""Shared fixtures: a temporary store, and the console scripts run on it (in this
process by default, as real processes where the process is the point)."""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from tests.brokerkit import broker  # noqa: F401  (a real MQTT broker, for every test)
from tests.clikit import BIN as BIN  # noqa: PLC0414  (re-exported: tests import it from here)
from tests.clikit import call, text
from tests.pgkit import pg_server, pg_url  # noqa: F401  (a real PostgreSQL, for every test)

if TYPE_CHECKING:
    from tests.queuekit import Queue
    from tests.runkit import Fleet
    from uwf.store import Store

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "solve-issue.yaml"
# `pytest --cli-processes`: every Cli call a real process, as all were before in-process
# runs (a check that nothing differs; set once, when the run is configured).
EVERY_CALL_A_PROCESS: list[bool] = [False]


@dataclass
class Result:
    code: int
    out: str
    err: str


@dataclass
class Cli:
    """Runs `uwf` / `json-cas` against one store, with `env` as the whole environment:
    `main(argv)` in this process by default (tests/inprocess.py: same stdout, stderr and
    exit code, a fraction of the cost), a real process per call when `process` is set
    (the `proc_cli` fixture: crashes, signals, concurrency, what runs until stopped, the
    console scripts themselves). Any other console script (an agent) is always a process.
    No stdin given is an empty one, never a wait."""

    home: Path
    env: dict[str, str]
    process: bool = False

    def run(self, *args: str, stdin: str | None = None, prog: str = "uwf",
            timeout: float = 60) -> Result:
        return self.call(prog, args, (stdin or "").encode("utf-8"), timeout=timeout)

    def call(self, prog: str, args: Sequence[str], stdin: bytes, *, timeout: float = 60,
             env: dict[str, str] | None = None, errors: str = "strict",
             cwd: Path | None = None) -> Result:
        """`prog ARGS` with raw bytes on stdin, and `env` over this environment, in `cwd`
        (tests/clikit.py); output not UTF-8 is an error, unless `errors` says how to read
        it; a call still running after `timeout` seconds fails the test."""
        what = " ".join([prog, *args])
        called = call(prog, args, {**self.env, **(env or {})}, stdin=stdin, limit=timeout,
                      cwd=cwd, process=self.process or EVERY_CALL_A_PROCESS[0])
        if called.hung:
            pytest.fail(f"{what} still ran after {timeout:g}s (in-process, a command that "
                        "runs until stopped needs the proc_cli fixture)")
        return Result(called.code, text(called.out, errors), text(called.err, errors))

    def processes(self) -> Cli:
        """This store and environment (the same dict), with a real process per call."""
        return replace(self, process=True)

    def cas(self, *args: str, stdin: str | None = None) -> Result:
        return self.run(*args, stdin=stdin, prog="json-cas")

    def refuses(self, code: int | tuple[int, ...], *args: str, stdin: str | None = None,
                prog: str = "uwf", says: Sequence[str] = ()) -> str:
        """Run `prog ARGS` and check it is refused cleanly (`refused`) with the log and the
        CAS unchanged, byte for byte; its one error line."""
        before = snapshot(self.home)
        line = refused(self.run(*args, stdin=stdin, prog=prog), code, *says, prog=prog)
        assert snapshot(self.home) == before, f"a refused `{prog} {' '.join(args)}` " \
            "changed the store"
        return line

    def log_bytes(self) -> bytes:
        events = self.home / "events"
        if not events.exists():
            return b""
        return b"".join(p.read_bytes() for p in sorted(events.glob("*.jsonl")))


def refused(result: Result, code: int | tuple[int, ...], *fragments: str,
            prog: str | tuple[str, ...] = ("uwf", "json-cas")) -> str:
    """The one check of a refusal (docs: bad input is one line): exit `code` (or one of
    them), nothing on stdout, exactly one `<prog>: error: ` line on stderr holding every
    fragment, no traceback, no internal error; that line. `Cli.refuses` runs the command
    and checks the store unchanged too."""
    codes = (code,) if isinstance(code, int) else code
    assert result.code in codes, result
    assert result.out == "", result
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    prefixes = tuple(f"{name}: error: " for name in ((prog,) if isinstance(prog, str) else prog))
    assert lines[0].startswith(prefixes), lines[0]
    assert "Traceback" not in result.err, result.err
    assert "internal error" not in lines[0], lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def snapshot(home: Path) -> dict[str, bytes]:
    """Every file of the log and the CAS, by path: what a refused command must not touch."""
    found: dict[str, bytes] = {}
    for folder in ("events", "cas"):
        # os.walk, not Path.rglob: the fuzz targets take two snapshots an input, and
        # pathlib's objects cost more than reading the files (a symlinked folder is not
        # entered, a symlink to a file is read, as rglob and is_file do).
        files: dict[str, bytes] = {}
        for parent, _, names in os.walk(os.path.join(home, folder)):
            prefix = os.path.relpath(parent, home) + os.sep
            for name in names:
                path = os.path.join(parent, name)
                if os.path.isfile(path):
                    with open(path, "rb") as handle:
                        files[prefix + name] = handle.read()
        found.update(sorted(files.items()))
    return found


def run_bytes(cli: Cli, prog: str, *args: str, stdin: bytes = b"",
              env: dict[str, str] | None = None) -> Result:
    """A console script with raw bytes on stdin (Cli.run only sends text)."""
    return cli.call(prog, args, stdin, timeout=120, env=env, errors="replace")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Generator[Store, None, None]:
    """A store in tmp_path opened in-process (the Python API), with no UWF_HISTORY, no
    fixed time, an empty config directory and no fsync. A test file may define its own
    `store` fixture instead."""
    from uwf.store import Store

    for name in ("UWF_HISTORY", "UWF_CONFIG", "UWF_STEP_ID", "UWF_NOW"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("UWF_DURABILITY", "none")
    monkeypatch.setenv("UWF_HOME", str(tmp_path / "store"))
    opened = Store.open(tmp_path / "store")
    yield opened
    opened.close()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`uwf` in-process on a new store at tmp_path/s, with its environment set in this
    process too (for `Store.open` beside the CLI): no UWF_HISTORY, config or step id, no
    fsync, the clock fixed at 2030-01-01T00:00:00.000Z, an empty config directory. A test
    file may define its own `env` fixture instead."""
    for name in ("UWF_HISTORY", "UWF_CONFIG", "UWF_STEP_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("UWF_DURABILITY", "none")
    monkeypatch.setenv("UWF_NOW", "2030-01-01T00:00:00.000Z")
    monkeypatch.setenv("UWF_HOME", str(tmp_path / "s"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return Cli(tmp_path / "s", dict(os.environ))


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def cli(store_dir: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Cli:
    """`uwf` and `json-cas` on a new store: in-process, or real processes for a test
    (or a module, `pytestmark`) marked `cli_processes`."""
    marked = request.node.get_closest_marker("cli_processes") is not None
    return cli_on(store_dir, tmp_path / "config", process=marked)


def cli_on(home: Path, config: Path, *, process: bool = False) -> Cli:
    """What the `cli` fixture gives, on the store `home` with the config folder `config`
    (XDG_CONFIG_HOME): for a fixture of wider scope (a store built once, copied per test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
    env["UWF_HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(config)
    env["UWF_DURABILITY"] = "fsync"
    return Cli(home, env, process=process)


@pytest.fixture
def fleet(cli: Cli, tmp_path: Path) -> Fleet:
    """The run registry's store (tests/runkit.py): the `relay` and `solve-issue`
    workflows registered on the `cli` fixture's store."""
    from tests.runkit import make_fleet

    return make_fleet(cli, tmp_path)


@pytest.fixture
def q(cli: Cli) -> Queue:
    """The queue's commands on the `cli` fixture's store (tests/queuekit.py)."""
    from tests.queuekit import queue_on

    return queue_on(cli)


@pytest.fixture
def proc_cli(cli: Cli) -> Cli:
    """The `cli` fixture's store and environment (the same dict), each call a real
    process: for tests of what only a process has (crash, signals, concurrency, commands
    that run until stopped, the console scripts' own wiring)."""
    return cli.processes()


# -- the fuzz targets (tests/e2e/test_fuzz_*.py): budgets and the inputs each tried ----------

# `ci` (the default) runs each fuzz target's CI budget; `--hypothesis-profile=long` ten
# times that (tests/fuzzkit.py scales by max_examples / 100), and 1,000 examples for
# every other property test. No deadline: a command's time depends on the machine's load.
# `ci` is derandomized: CI tries the same inputs on every run, so a landing never depends
# on the luck of the draw; the long run explores, and what it finds becomes an @example.
settings.register_profile("ci", deadline=None, derandomize=True)
settings.register_profile("long", max_examples=1000, deadline=None)
settings.load_profile("ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cli-processes", action="store_true",
                     help="run every uwf / json-cas call of the Cli fixtures as a real "
                     "process (by default they run in-process)")


def pytest_configure(config: pytest.Config) -> None:
    EVERY_CALL_A_PROCESS[0] = bool(config.getoption("--cli-processes"))
    compile_uwf()
    config.addinivalue_line(
        "markers", "cli_processes: the `cli` fixture runs each call as a real process "
        "(crash, signals, concurrency across processes, the console scripts' own wiring)")


def compile_uwf() -> None:
    """uwf's bytecode written before any test starts a process: every `uwf`, agent and
    script a test starts then loads uwf as an installed uwf loads it (pip compiles a
    wheel's modules when it installs them; an editable install or a clean clone has no
    `.pyc`). Without it, a shell that exports PYTHONDONTWRITEBYTECODE=1 (as the ones
    here do) has each of the run's ~1,500 processes compile every uwf module it imports,
    again: ~60 % more instructions for a uwf-mock step (docs/benchmarks.md). Files whose
    bytecode is current are only looked at; the xdist workers and their controller may
    all call it (each `.pyc` is written to a temporary name and renamed into place)."""
    import compileall

    import uwf

    compileall.compile_dir(Path(uwf.__file__).parent, quiet=1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, Any, None]:
    """A fuzz test's counts ride in its report, so xdist brings them to the summary."""
    outcome = yield
    if call.when == "call":
        from tests import fuzzkit

        fuzzkit.attach_counts(outcome.get_result())


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests import fuzzkit

    fuzzkit.summary(terminalreporter)
