"""The README is a transcript: its commands run and print what it shows.

Every ```console block of README.md is replayed in order, in one bash session
on a scratch store, from the repository root, with stdout and stderr on a
pseudo-terminal as a reader's would be (so commands print panels, and JSON
when piped). Each command's output must be the README's, line for line, once
what varies from run to run is masked: ULIDs, RFC 3339 timestamps, epoch
milliseconds, the scratch store's path, and the hashes of StepNodes (a StepNode
records when its step ran). Every other hash is compared exactly. A masked
value is bound to the README's on first sight and must stay bound to it, and
a command that quotes one (`T=01M8...`) runs with the real value.

The "Set up" line runs too, from after its `pip install`, on a scratch store.
"""

from __future__ import annotations

import difflib
import fcntl
import functools
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import BIN, ROOT, Cli
from uwf.cas.builtins import builtin_hash

README = ROOT / "README.md"
INSTALL = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev]' && "
CONSOLE_BLOCK = re.compile(r"^```console\n(.*?)^```", re.DOTALL | re.MULTILINE)
# After each command the session prints RS, the exit status, RS, $UWF_HOME, RS.
REPORT = "printf '\\036%s\\036%s\\036\\n' \"$?\" \"$UWF_HOME\""
MARKER = re.compile(rb"\x1e(\d+)\x1e([^\x1e]*)\x1e\r?\n")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CROCKFORD = "[0-9A-HJKMNP-TV-Z]"
# Values that vary between runs. Order matters: the first alternative that
# matches at a position wins, and an epoch-ms number is also 13 Crockford digits.
VARYING = {
    "time": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)",
    "ulid": rf"\b{CROCKFORD}{{26}}\b",
    "ms": r"\b1\d{12}\b",
    "hash": rf"\b{CROCKFORD}{{13}}\b",
}
# The README's scratch store: `export UWF_HOME=$(mktemp -d)` as shown on Linux.
README_STORE = r"/tmp/tmp\.[0-9A-Za-z]+"
COMMAND_TIMEOUT_S = 120


# -- the README ------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One `$ command` of a console block and the lines the README shows after it."""

    command: str
    expected: list[str]
    where: str  # "README.md:LINE", for messages


def console_steps(text: str) -> list[Step]:
    steps: list[Step] = []
    for block in CONSOLE_BLOCK.finditer(text):
        first_line = text.count("\n", 0, block.start(1)) + 1
        current: Step | None = None
        for number, line in enumerate(block[1].splitlines(), first_line):
            if line.startswith("$ "):
                current = Step(line[2:], [], f"README.md:{number}")
                steps.append(current)
            elif current is not None:
                current.expected.append(line)
            else:
                raise AssertionError(f"README.md:{number}: output before any command")
    return steps


def setup_line(text: str) -> str:
    """The one command of the "Set up" section that installs and runs a thread."""
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("python3 -m venv")]
    assert len(lines) == 1, "README.md: the Set up section has no single install line"
    return lines[0]


# -- matching output against the README ------------------------------------------

@dataclass
class Bindings:
    """Varying values seen so far: the README's and the real one, one to one."""

    real: dict[str, str] = field(default_factory=dict)
    shown: dict[str, str] = field(default_factory=dict)

    def bind(self, readme: str, actual: str) -> bool:
        if self.real.setdefault(readme, actual) != actual:
            return False
        return self.shown.setdefault(actual, readme) == readme

    def substitute(self, command: str) -> str:
        """The command with the README's ULIDs, hashes and store path made real."""
        def real(match: re.Match[str]) -> str:
            token = match[0]
            if match.lastgroup in ("ulid", "store") and token not in self.real:
                raise AssertionError(f"`{command}` quotes {token}, which no output showed")
            return self.real.get(token, token)

        return tokenizer(README_STORE).sub(real, command)


@functools.cache
def tokenizer(store: str) -> re.Pattern[str]:
    parts = [f"(?P<store>{store})", *(f"(?P<{kind}>{rx})" for kind, rx in VARYING.items())]
    return re.compile("|".join(parts))


def tokens(line: str, store: str) -> list[tuple[str, str]]:
    """The line as (kind, text) pieces; kind "" is literal text."""
    pieces: list[tuple[str, str]] = []
    at = 0
    for match in tokenizer(store).finditer(line):
        pieces.append(("", line[at:match.start()]))
        pieces.append((match.lastgroup or "", match[0]))
        at = match.end()
    pieces.append(("", line[at:]))
    return pieces


def masked(line: str, store: str) -> str:
    """The line for a diff: what varies as <kind>, hashes as they are."""
    return "".join(f"<{kind}>" if kind not in ("", "hash") else text
                   for kind, text in tokens(line, store))


def line_problem(expected: str, actual: str, store: str, bindings: Bindings,
                 is_step_node: Callable[[str], bool]) -> str | None:
    """Why `actual` is not the README's `expected` line, or None when it is."""
    shown, real = tokens(expected, README_STORE), tokens(actual, re.escape(store))
    if [kind for kind, _ in shown] != [kind for kind, _ in real]:
        return "the text differs"
    for (kind, readme), (_, got) in zip(shown, real, strict=True):
        if kind == "" and readme != got:
            return "the text differs"
        if kind == "hash" and readme != got and not is_step_node(got):
            return f"hash {got} is not the README's {readme} (only StepNodes vary)"
        if kind in ("ulid", "hash", "store") and not bindings.bind(readme, got):
            return f"{got} stands where the README shows {readme}, bound elsewhere"
    return None


def output_problem(expected: list[str], actual: list[str], store: str, bindings: Bindings,
                   is_step_node: Callable[[str], bool]) -> str | None:
    """A diff of masked lines, and the first reason, when the output is not the README's."""
    problems = [line_problem(e, a, store, bindings, is_step_node)
                for e, a in zip(expected, actual, strict=False)]
    if len(expected) == len(actual) and not any(problems):
        return None
    reason = next((p for p in problems if p), "the number of lines differs")
    diff = difflib.unified_diff([masked(line, README_STORE) for line in expected],
                                [masked(line, re.escape(store)) for line in actual],
                                "README.md", "output", lineterm="")
    return reason + "\n" + "\n".join(diff)


def screen_lines(raw: str) -> list[str]:
    """What a terminal shows: CRLF as LF, a carriage return rewriting its line."""
    text = ANSI.sub("", raw).replace("\r\n", "\n").removesuffix("\n")
    return [line.rsplit("\r", 1)[-1].rstrip() for line in text.split("\n")] if text else []


# -- one bash session on a pseudo-terminal ---------------------------------------

@dataclass(frozen=True)
class Ran:
    status: int
    home: str
    lines: list[str]


class Session:
    """bash reading commands from a pipe, writing to a pseudo-terminal."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self._master, terminal = pty.openpty()
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
        self._bash = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=terminal,
            stderr=terminal, cwd=cwd, env=env, start_new_session=True,
        )
        os.close(terminal)
        self._pending = b""

    def run(self, command: str) -> Ran:
        # Braces keep assignments and exports in this shell; stdin is not the script.
        script = f"{{\n{command}\n}} </dev/null\n{REPORT}\n"
        assert self._bash.stdin is not None
        self._bash.stdin.write(script.encode())
        self._bash.stdin.flush()
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while (found := MARKER.search(self._pending)) is None:
            left = deadline - time.monotonic()
            assert left > 0, f"`{command}` did not finish in {COMMAND_TIMEOUT_S}s"
            if select.select([self._master], [], [], left)[0]:
                self._pending += os.read(self._master, 65536)
        output = self._pending[:found.start()].decode("utf-8", "replace")
        self._pending = self._pending[found.end():]
        return Ran(int(found[1]), found[2].decode(), screen_lines(output))

    def close(self) -> None:
        assert self._bash.stdin is not None
        self._bash.stdin.close()  # end of script: bash exits
        try:
            self._bash.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a command still running: end its group
            os.killpg(self._bash.pid, signal.SIGKILL)
            self._bash.wait()
        os.close(self._master)


@pytest.fixture
def session_env(tmp_path: Path) -> dict[str, str]:
    """A reader's shell: the venv on PATH, no config, temporary files in tmp_path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("UWF_", "XDG_")) and k not in ("BASH_ENV", "ENV")}
    for folder in ("tmp", "config", "state"):
        (tmp_path / folder).mkdir()
    env.update(PATH=os.pathsep.join([str(BIN), env.get("PATH", "")]),
               TMPDIR=str(tmp_path / "tmp"), XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_STATE_HOME=str(tmp_path / "state"), TERM="dumb")
    return env


def step_node_check(env: dict[str, str]) -> Callable[[str, str], bool]:
    @functools.cache
    def is_step_node(store: str, hash_: str) -> bool:
        done = Cli(Path(store), env).cas("--store", store, "--json", "get", hash_)
        return done.code == 0 and json.loads(done.out)["type"] == builtin_hash("StepNode")

    return is_step_node


@pytest.fixture
def session(session_env: dict[str, str]) -> Iterator[Session]:
    shell = Session(session_env, ROOT)
    try:
        yield shell
    finally:
        shell.close()


# -- the tests -------------------------------------------------------------------

def test_readme_transcripts_are_real(session: Session, session_env: dict[str, str],
                                     tmp_path: Path) -> None:
    steps = console_steps(README.read_text("utf-8"))
    assert len(steps) >= 20, "README.md lost its tour"
    bindings = Bindings()
    is_step_node = step_node_check(session_env)
    for step in steps:
        ran = session.run(bindings.substitute(step.command))
        shown = "\n".join(ran.lines)
        assert ran.status == 0, f"{step.where}: `{step.command}` exited {ran.status}:\n{shown}"
        assert ran.home.startswith(str(tmp_path)), f"{step.where}: the tour left its scratch store"
        problem = output_problem(step.expected, ran.lines, ran.home, bindings,
                                 functools.partial(is_step_node, ran.home))
        assert problem is None, f"{step.where}: `{step.command}` drifted from README.md: {problem}"


def test_setup_line_runs_a_thread_to_its_end(session_env: dict[str, str],
                                             tmp_path: Path) -> None:
    line = setup_line(README.read_text("utf-8"))
    assert line.startswith(INSTALL), f"the Set up line must start with {INSTALL!r}"
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", line[len(INSTALL):]],
                          cwd=ROOT, env=session_env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    decoder, text, documents = json.JSONDecoder(), done.stdout.strip(), []
    while text:
        document, end = decoder.raw_decode(text)
        documents.append(document)
        text = text[end:].strip()
    assert documents[-1]["done"] is True, done.stdout
    assert documents[-1]["steps"] == 5
    stores = list((tmp_path / "tmp").glob("tmp.*/events"))
    assert len(stores) == 1, "the Set up line must use one scratch store"


def test_example_config_works_from_any_directory(session_env: dict[str, str],
                                                 tmp_path: Path) -> None:
    """Its mock script is named relative to the config, not to where uwf runs."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(session_env, UWF_HOME=str(tmp_path / "store"),
               UWF_CONFIG=str(ROOT / "examples" / "config.yaml"), UWF_DURABILITY="none")

    def uwf(*args: str) -> dict[str, object]:
        done = Cli(tmp_path / "store", env).call("uwf", args, b"", timeout=120,
                                                  cwd=elsewhere)
        assert done.code == 0, done.err
        result: dict[str, object] = json.loads(done.out)
        return result

    uwf("workflow", "put", str(ROOT / "examples" / "solve-issue.yaml"))
    thread = str(uwf("thread", "start", "solve-issue", "-p", "Fix the login bug")["thread"])
    assert uwf("thread", "run", thread)["done"] is True


def test_a_drifted_line_fails() -> None:
    """The matcher itself: what varies passes, anything else fails."""
    shown = ["thread    01M8AC27W7AJDTCXCNJFP9S2QM",
             "     1  2026-11-25T22:08:45.879Z  x  {\"deadlineMs\":1795648161383}",
             "head      B34NZG60M3PDN", "workflow  70D2DHWNFR6T8", "store  /tmp/tmp.Rk3m0QZc1T"]
    real = ["thread    01M8ZZZZZZZZZZZZZZZZZZZZZZ",
            "     1  2027-01-02T03:04:05.006Z  x  {\"deadlineMs\":1800000000000}",
            "head      0123456789ABC", "workflow  70D2DHWNFR6T8", "store  /x/y"]

    def step_nodes(hash_: str) -> bool:
        return hash_ == "0123456789ABC"

    assert output_problem(shown, real, "/x/y", Bindings(), step_nodes) is None
    drifted = [*real[:3], "workflow  70D2DHWNFR6T9", real[4]]
    assert "not the README's" in str(output_problem(shown, drifted, "/x/y", Bindings(),
                                                    step_nodes))
    worded = [*real[:4], "store: /x/y"]
    assert "text differs" in str(output_problem(shown, worded, "/x/y", Bindings(), step_nodes))
    assert output_problem(shown, real[:4], "/x/y", Bindings(), step_nodes) is not None
    one_to_one = Bindings()
    assert one_to_one.bind("01M8AC27W7AJDTCXCNJFP9S2QM", "01M8ZZZZZZZZZZZZZZZZZZZZZZ")
    assert not one_to_one.bind("01M8AC27W7AJDTCXCNJFP9S2QN", "01M8ZZZZZZZZZZZZZZZZZZZZZZ")
    assert one_to_one.substitute("T=01M8AC27W7AJDTCXCNJFP9S2QM") == "T=01M8ZZZZZZZZZZZZZZZZZZZZZZ"
