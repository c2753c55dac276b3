"""A golden transcript of every `uwf` and `json-cas` command: argv, exit code, stdout
and stderr, byte for byte, kept in tests/golden/cli.txt.

One scripted session runs each declared command in-process (`main(argv)`) on a
scratch store, on a terminal (the human panel) and with `--json`, plus at least one
error per command group. Agents are real `uwf-mock` subprocesses. The clock is fixed
(`UWF_NOW`, a second later for each command) and ULIDs draw their random part from a
counter, so ids, times and hashes repeat from run to run; what still varies is masked
where it is printed (the scratch folder, the demo's folder and duration, a new anchor
key's fingerprint).

After a change that is meant to change what a command prints, regenerate the file:

    UPDATE_GOLDEN=1 python -m pytest tests/e2e/test_golden_cli.py

and read the diff of tests/golden/cli.txt. A new command fails
`test_every_command_has_a_transcript` until the script below runs it.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import itertools
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import ulid
import yaml

from tests.conftest import BIN, EXAMPLE
from uwf import __version__
from uwf.cli import jsoncas
from uwf.cli import main as uwf_cli
from uwf.engine import ulids
from uwf.invoker.spec import Group

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "cli.txt"
Main = Callable[[Sequence[str] | None], int]
PROGRAMS: dict[str, tuple[Main, Group]] = {
    "uwf": (uwf_cli.main, uwf_cli.COMMANDS),
    "json-cas": (jsoncas.main, jsoncas.COMMANDS),
}
# The options every command takes (uwf.invoker.context.GLOBAL_OPTIONS); those with a value.
GLOBAL_FLAGS = {"--json"}
GLOBAL_VALUED = {"--store", "--format", "--now"}
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ABSENT_ULID = "01J7K9M2XNPQR5VWBCDF8G3H4T"  # well-formed, never created here
ABSENT_HASH = "EYHPV6X8XHTCS"  # the empty payload's hash: no such node here

MOCK_SCRIPT = EXAMPLE.parent / "mock-solve-issue.yaml"
# `quick`: the planner asks a question, which ends the thread in one step.
QUICK_SCRIPT = {"planner": [{"status": "unclear", "question": "Which login form?"}]}


class Terminal(io.StringIO):
    """stdout as a terminal: commands print their human panel."""

    def isatty(self) -> bool:
        return True


Masks = Sequence[tuple[str, str]]  # (regex, replacement), for what varies from run to run


@dataclass(frozen=True)
class Entry:
    """One command of the transcript and what it did."""

    prog: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # variables set for this command alone
    terminal: bool
    now: str
    code: int
    out: str
    err: str

    def render(self) -> str:
        where = "terminal" if self.terminal else "piped"
        command = [f"{name}={value}" for name, value in self.env] + [self.prog, *self.argv]
        lines = [f"$ {shlex.join(command)}", f"# {where}, now {self.now}, exit {self.code}"]
        lines += _quoted("|", self.out)
        lines += _quoted("!", self.err)
        return "\n".join(lines) + "\n"


def _quoted(mark: str, text: str) -> list[str]:
    """`text` a line at a time behind `mark` (stdout `|`, stderr `!`); a last line with
    no newline is said so, so the file keeps every byte."""
    if not text:
        return []
    ends = text.endswith("\n")
    lines = [f"{mark} {line}" if line else mark
             for line in (text[:-1] if ends else text).split("\n")]
    if not ends:
        lines.append(f"{mark}% no newline at end")
    return lines


@dataclass
class Session:
    """The scripted session: runs commands, keeps the transcript, masks what varies.

    With `strict` (when the golden file is written) a command that does not exit as the
    script expects stops the script; otherwise the difference shows in the diff."""

    root: Path
    monkeypatch: pytest.MonkeyPatch
    strict: bool
    now: datetime = START
    entries: list[Entry] = field(default_factory=list)

    def run(self, prog: str, *argv: str, terminal: bool = True, masks: Masks = (),
            env: dict[str, str] | None = None) -> Entry:
        """`prog argv` in-process a second after the last command, its stdout a terminal
        or a pipe."""
        self.now += timedelta(seconds=1)
        now = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        main, _ = PROGRAMS[prog]
        out: io.StringIO = Terminal() if terminal else io.StringIO()
        err = io.StringIO()
        with self.monkeypatch.context() as patch:
            patch.setenv("UWF_NOW", now)
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            # stdin is empty: a command that reads it reads nothing (`uwf mcp` ends at once).
            patch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8"))
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(list(argv))
                except SystemExit as exc:  # main(argv) returns; recorded all the same
                    code = exc.code if isinstance(exc.code, int) else 1
        entry = Entry(prog, tuple(self.mask(arg, masks) for arg in argv),
                      tuple((env or {}).items()), terminal, now, code,
                      self.mask(out.getvalue(), masks), self.mask(err.getvalue(), masks))
        self.entries.append(entry)
        return entry

    def ok(self, prog: str, *argv: str, terminal: bool = True, masks: Masks = ()) -> Entry:
        """A command that succeeds."""
        return self.expect(self.run(prog, *argv, terminal=terminal, masks=masks), 0)

    def json(self, prog: str, *argv: str, masks: Masks = ()) -> Any:
        """A command that succeeds, with `--json`: its output parsed (a bare hash or id,
        or streamed lines, as text)."""
        entry = self.ok(prog, *argv, "--json", masks=masks)
        try:
            return json.loads(entry.out)
        except json.JSONDecodeError:
            return entry.out.strip()

    def both(self, prog: str, *argv: str, masks: Masks = ()) -> Any:
        """A read: the human panel, then `--json` (parsed)."""
        self.ok(prog, *argv, masks=masks)
        return self.json(prog, *argv, masks=masks)

    def fails(self, prog: str, *argv: str, code: int, env: dict[str, str] | None = None
              ) -> Entry:
        """A command that fails with `code` and an error line on stderr."""
        entry = self.expect(self.run(prog, *argv, env=env), code)
        if self.strict:
            assert entry.err, f"no error line:\n{entry.render()}"
        return entry

    def expect(self, entry: Entry, code: int) -> Entry:
        if self.strict:
            assert entry.code == code, f"expected exit {code}:\n{entry.render()}"
        return entry

    def mask(self, text: str, masks: Masks) -> str:
        for folder in sorted({str(self.root.resolve()), str(self.root)}, key=len,
                             reverse=True):
            text = text.replace(folder, "<TMP>")
        for pattern, replacement in masks:
            text = re.sub(pattern, replacement, text)
        return text

    def file(self, name: str) -> str:
        """The absolute path of an input file (or folder) of the script."""
        return str(self.root / "files" / name)

    def text(self) -> str:
        return "\n".join(entry.render() for entry in self.entries)


def panel_block(entry: Entry, key: str) -> list[str]:
    """The lines indented under `key` in a panel (a nested object or table), unindented."""
    lines = entry.out.splitlines()
    if key not in lines:
        raise AssertionError(f"no {key} block in\n{entry.render()}")
    block = list(itertools.takewhile(lambda line: line.startswith("  "),
                                     lines[lines.index(key) + 1:]))
    return [line[2:] for line in block]


def panel_rows(entry: Entry, key: str) -> list[dict[str, str]]:
    """The table under `key` in a panel, a row at a time by column (its header, as
    written: upper case)."""
    header, *rows = panel_block(entry, key)
    return [dict(zip(header.split(), row.split(), strict=True)) for row in rows]


def panel_value(entry: Entry, key: str) -> str:
    """The value of `key` in a `key  value` panel."""
    indent = len(key) - len(key.lstrip())  # "  id": a key of a nested block
    for line in entry.out.splitlines():
        name, _, value = line[indent:].partition(" ")
        if line[:indent] == key[:indent] and name == key.strip():
            return value.strip()
    raise AssertionError(f"no {key} in\n{entry.render()}")


# -- the scratch store, its config and the fixed clock ----------------------------------

def _prepare(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Input files, a config with two uwf-mock agents, a fixed anchor key, and an
    environment that holds nothing of the caller's."""
    for name in list(os.environ):
        if name.startswith("UWF_") or name.endswith(("_KEY", "_TOKEN", "_SECRET",
                                                     "_PASSWORD")):
            monkeypatch.delenv(name)  # settings and secrets (masked when printed)
    files = root / "files"
    (files / "anchors").mkdir(parents=True)
    config = root / "config" / "uwf"
    config.mkdir(parents=True)
    (root / "tmp").mkdir()
    monkeypatch.setenv("HOME", str(root / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("UWF_HOME", str(root / "store"))
    monkeypatch.setenv("UWF_DURABILITY", "none")
    monkeypatch.setenv("PATH", os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps help to it
    monkeypatch.setenv("NO_COLOR", "1")  # the demo's colours
    monkeypatch.setenv("TMPDIR", str(root / "tmp"))  # the demo's scratch folder
    monkeypatch.setattr(tempfile, "tempdir", str(root / "tmp"))
    # The repo of every thread and entry is the working folder's git top level; it is
    # written into the log, and so into every chain digest, run fingerprint and anchor
    # after it. `/` is the same path on every machine (with or without a `.git`), so
    # they are too; every file a command reads is named by its (masked) absolute path.
    monkeypatch.chdir("/")
    # The random part of every ULID from a counter: ids, and the hashes of what holds
    # them, are the same on every run (python-ulid's documented hook).
    # uwf mints its own (uwf.engine.ulids); python-ulid's hook too, for any left to it.
    counter = itertools.count(1)
    monkeypatch.setattr(ulids, "randomness", lambda: next(counter).to_bytes(10, "big"))
    monkeypatch.setattr(ulid, "default_generator", ulid.ULIDGenerator(
        randomness=lambda _ms: next(counter).to_bytes(10, "big")))

    shutil.copy(MOCK_SCRIPT, config / "mock-solve-issue.yaml")
    (config / "quick.yaml").write_text(yaml.safe_dump(QUICK_SCRIPT), "utf-8")
    (config / "config.yaml").write_text(yaml.safe_dump({
        "agents": {"mock": {"command": "uwf-mock", "args": ["mock-solve-issue.yaml"]},
                   "quick": {"command": "uwf-mock", "args": ["quick.yaml"]}},
        "defaultAgent": "quick",
    }), "utf-8")
    _write_anchor_key(config / "anchor-key.pem")

    shutil.copy(EXAMPLE, files / "solve-issue.yaml")
    (files / "note.json").write_text('"hello"\n', "utf-8")
    (files / "not-json.json").write_text("{nope\n", "utf-8")
    (files / "plan.json").write_text('{"status": "ready", "plan": "By hand"}\n', "utf-8")
    (files / "bad-plan.json").write_text('{"status": "maybe"}\n', "utf-8")
    (files / "detail.txt").write_text("planned by hand\n", "utf-8")
    (files / "batch.jsonl").write_text(
        '{"workflow": "solve-issue", "prompt": "Batch one", "session": "s2"}\n'
        '{"workflow": "solve-issue", "prompt": "Batch two", "session": "s2"}\n', "utf-8")


def _write_anchor_key(path: Path) -> None:
    """An Ed25519 key from a fixed seed: its signatures are the same on every run."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


# -- the script ------------------------------------------------------------------------

def script(s: Session) -> None:
    """Every command, in an order where each has something to act on."""
    _json_cas(s)
    _workflows(s)
    runs = _threads(s)
    _queue(s)
    _worker(s)
    _archive(s)
    _registry(s)
    _log(s)
    _demo(s)
    _mcp(s)
    _global(s)
    _json_cas_end(s)
    _retention(s, runs)
    _over_mqtt(s)
    _store_copy(s)
    _dashboard(s)
    _snapshot(s)
    _conventions(s, runs)
    # Added after the rest, so the times and ids before it stay as they were.
    s.both("uwf", "queue", "counts", "--minutes", "600")
    _ask(s)
    _doctor(s)
    _writer(s)


def _ask(s: Session) -> None:
    """A human in the loop: the approver asks, a wrong answer is refused, the answer
    taken, the run goes on (added last: what came before stays as it was)."""
    examples = EXAMPLE.parent
    shutil.copy(examples / "approve-deploy.yaml", s.root / "files" / "approve-deploy.yaml")
    shutil.copy(examples / "mock-approve-deploy.yaml",
                s.root / "config" / "uwf" / "mock-approve-deploy.yaml")  # beside the config
    asker = "uwf-mock mock-approve-deploy.yaml"
    s.json("uwf", "workflow", "put", s.file("approve-deploy.yaml"))
    thread = s.json("uwf", "thread", "start", "approve-deploy", "-p", "Ship 2.1.0")["thread"]
    other = s.json("uwf", "thread", "start", "approve-deploy", "-p", "Ship 2.1.1")["thread"]
    s.ok("uwf", "thread", "run", thread, "--agent", asker)
    s.json("uwf", "thread", "run", other, "--agent", asker)
    s.both("uwf", "thread", "list", "--waiting")
    s.fails("uwf", "thread", "answer", thread, "--answer", '{"approved": "yes"}', code=1)
    s.ok("uwf", "thread", "answer", thread, "--answer", '{"approved": true}', "--by", "ann")
    s.json("uwf", "thread", "answer", other, "--answer", '{"approved": false}')
    s.fails("uwf", "thread", "answer", thread, "--answer", '{"approved": true}', code=1)
    s.json("uwf", "thread", "run", thread, "--agent", asker)


def _doctor(s: Session) -> None:
    """The machine's parts vary: Python's version and path, the disk's figures, where the
    agents' commands are installed."""
    varies = [(r"Python [0-9.]+ \([^)]*\)", "Python <VERSION> (<PYTHON>)"),
              (r"[0-9.]+ [KMGT]?i?B free of [0-9.]+ [KMGT]?i?B under",
               "<FREE> free of <SIZE> under"),
              (r"-> \S*/uwf-mock", "-> <BIN>/uwf-mock")]
    s.both("uwf", "doctor", masks=varies)
    s.fails("uwf", "doctor", "--database", "mysql://x@y/z", code=2)


def _conventions(s: Session, runs: list[str]) -> None:
    """--version, completion, and ids in any case or by a unique prefix (docs/cli.md)."""
    version = [(re.escape(__version__) + r"\n\Z", "<version>\n")]
    s.ok("uwf", "--version", masks=version)
    s.ok("json-cas", "--version", masks=version)
    # The script is argcomplete's (tests/e2e/test_cli_conventions.py drives it in bash).
    script = [(r"(?s)\A(#compdef|function) .+\Z", "<argcomplete's completion script>\n")]
    s.ok("uwf", "completion", "bash", masks=script)
    s.json("uwf", "completion", "fish", masks=script)
    s.fails("uwf", "completion", "tcsh", code=2)
    s.ok("uwf", "run", "show", runs[0].lower())
    s.fails("uwf", "thread", "show", runs[0][:2].lower(), code=2)


def _snapshot(s: Session) -> None:
    """Last, so the commands before print as they did: a snapshot kept, then a rebuild
    that restores it. The log's digest varies by then (the MQTT and dashboard sections
    before write what they are told), so it is masked."""
    digest = [(r"\b[0-9a-f]{32}\b", "<DIGEST>")]
    s.both("uwf", "registry", "snapshot", masks=digest)
    s.both("uwf", "registry", "rebuild")


def _json_cas(s: Session) -> None:
    note = s.both("json-cas", "put", "--type", "Text", s.file("note.json"))
    s.both("json-cas", "hash", "--type", "Text", s.file("note.json"))
    s.both("json-cas", "get", note)
    s.both("json-cas", "has", note)
    s.both("json-cas", "verify", note)
    s.both("json-cas", "walk", note)
    s.both("json-cas", "schema", "list")
    s.both("json-cas", "gc", "--dry-run")
    s.fails("json-cas", "put", "--type", "Text", s.file("not-json.json"), code=2)
    s.fails("json-cas", "put", "--type", "Nope", s.file("note.json"), code=1)
    s.fails("json-cas", "get", "../../etc/passwd", code=2)
    s.fails("json-cas", "get", ABSENT_HASH, code=1)
    s.fails("json-cas", "has", ABSENT_HASH, code=1)
    s.fails("json-cas", "hash", s.file("note.json"), code=2)
    s.fails("json-cas", "verify", code=2)
    s.fails("json-cas", "walk", ABSENT_HASH, code=1)
    s.fails("json-cas", "schema", "list", "--bogus", code=2)
    s.fails("json-cas", "gc", code=2)


def _workflows(s: Session) -> None:
    s.ok("uwf", "workflow", "put", s.file("solve-issue.yaml"))
    s.json("uwf", "workflow", "put", s.file("solve-issue.yaml"))
    s.both("uwf", "workflow", "show", "solve-issue")
    s.both("uwf", "workflow", "list")
    s.ok("uwf", "workflow", "list", terminal=False)  # piped: JSON without --json
    s.fails("uwf", "workflow", "put", s.file("missing.yaml"), code=1)
    s.fails("uwf", "workflow", "show", "nope", code=1)


def _threads(s: Session) -> list[str]:
    """The thread and agent commands, then the run registry's; the runs made."""
    prompt = "Fix the login bug in #42"
    first = panel_value(s.ok("uwf", "thread", "start", "solve-issue", "-p", prompt), "thread")
    second = s.json("uwf", "thread", "start", "solve-issue", "-p", "Tidy the README")["thread"]
    s.ok("uwf", "thread", "step", first, "--agent", "mock")
    s.json("uwf", "thread", "step", first, "--agent", "mock")
    s.ok("uwf", "thread", "run", first, "--agent", "mock")
    s.json("uwf", "thread", "run", second)
    s.both("uwf", "thread", "show", first)
    s.both("uwf", "thread", "list", "--all")
    s.both("uwf", "thread", "log", first)
    steps = [json.loads(line) for line in s.entries[-1].out.splitlines()]
    planned = steps[0]["hash"]
    fork = panel_value(s.ok("uwf", "thread", "fork", first, "--at", planned), "thread")
    other = s.json("uwf", "thread", "fork", first, "--at", planned)["thread"]
    s.both("uwf", "thread", "list")
    s.ok("uwf", "thread", "kill", fork)
    s.json("uwf", "thread", "kill", other, "--reason", "superseded")
    s.fails("uwf", "thread", "show", ABSENT_ULID, code=1)
    s.fails("uwf", "thread", "show", "nope", code=2)
    s.fails("uwf", "thread", "step", first, code=1)

    by_hand = s.json("uwf", "thread", "start", "solve-issue", "-p", "Plan by hand")["thread"]
    s.both("uwf", "agent", "context", by_hand, "planner")
    s.ok("uwf", "agent", "submit", by_hand, "planner", "--output", s.file("plan.json"),
         "--detail", s.file("detail.txt"))
    s.json("uwf", "agent", "submit", by_hand, "planner", "--output", s.file("plan.json"))
    s.fails("uwf", "agent", "submit", by_hand, "planner", "--output", s.file("bad-plan.json"),
            code=1)
    s.fails("uwf", "agent", "context", by_hand, "nobody", code=1)

    s.both("uwf", "run", "search", "--text", "login")
    s.both("uwf", "run", "list")
    s.both("uwf", "run", "counts")
    s.both("uwf", "run", "show", first)
    s.both("uwf", "history")
    s.both("uwf", "run", "resume", by_hand)
    s.ok("uwf", "run", "resume", by_hand, "--once")
    driven = s.json("uwf", "thread", "start", "solve-issue", "-p", "Drive me")["thread"]
    s.json("uwf", "run", "resume", driven, "--drive")
    s.ok("uwf", "run", "rerun", first, "--incremental")
    s.json("uwf", "run", "rerun", second, "--drive", "--reason", "again")
    s.fails("uwf", "run", "show", ABSENT_ULID, code=1)
    s.fails("uwf", "history", "--limit", "-1", code=2)
    return [second, first]


def _queue(s: Session) -> None:
    s.both("uwf", "sched", "policy", "show")
    s.ok("uwf", "sched", "policy", "set", "--max-concurrent", "2")
    s.json("uwf", "sched", "policy", "set", "--max-attempts", "2")
    add = ("uwf", "queue", "add", "--workflow", "solve-issue", "--session", "s1")
    first = panel_value(s.ok(*add, "-p", "Queued one"), "  id")
    second = s.json(*add, "-p", "Queued two", "--note", "second")["entry"]["id"]
    third = s.ok(*add, "-p", "Queued three", "--quiet").out.strip()
    s.ok("uwf", "queue", "add", "--batch", s.file("batch.jsonl"))
    fourth, fifth = s.json("uwf", "queue", "add", "--batch", s.file("batch.jsonl"))["ids"]
    s.both("uwf", "queue", "list", "--session", "s1")
    s.both("uwf", "queue", "show", first)
    s.both("uwf", "sched", "plan")

    lease = panel_rows(s.ok("uwf", "sched", "lease", "--limit", "1", "--session", "s1"),
                       "leases")[0]["LEASEID"]
    other = s.json("uwf", "sched", "lease", "--limit", "1", "--session", "s1")["leases"][0]
    s.ok("uwf", "sched", "renew", first, "--lease", lease)
    s.json("uwf", "sched", "renew", second, "--lease", other["leaseId"])
    s.ok("uwf", "sched", "complete", first, "--lease", lease)
    s.json("uwf", "sched", "release", second, "--lease", other["leaseId"], "--failed",
           "--reason", "tests fail")
    s.fails("uwf", "sched", "complete", first, "--lease", lease, code=1)
    s.both("uwf", "queue", "logs", second)
    s.both("uwf", "queue", "logs", "--list")

    picked = s.ok("uwf", "queue", "pick", "--session", "s1").out.strip()
    held = s.json("uwf", "queue", "show", picked)["lease"]["id"]
    s.ok("uwf", "sched", "release", picked, "--lease", held, "--failed")
    again = s.json("uwf", "queue", "pick", "--session", "s1")
    held = s.json("uwf", "queue", "show", again)["lease"]["id"]
    s.json("uwf", "sched", "complete", again, "--lease", held)
    s.fails("uwf", "queue", "pick", "--session", "nobody", code=3)

    s.ok("uwf", "queue", "status", fourth, "--set", "parked")
    s.json("uwf", "queue", "status", fifth, "--set", "parked")
    s.ok("uwf", "sched", "reset", fourth)
    s.json("uwf", "sched", "reset", fifth)
    s.ok("uwf", "sched", "lease", "--session", "s2")
    s.now += timedelta(minutes=10)  # past leaseTtlMs
    s.ok("uwf", "sched", "reclaim")
    s.json("uwf", "sched", "reclaim")
    s.both("uwf", "queue", "list", "--status", "ready")
    s.ok("uwf", "queue", "drain", "--limit", "1")
    s.json("uwf", "queue", "drain", "--repo", "/")
    s.ok("uwf", "queue", "cancel", second)
    doomed = s.ok(*add, "-p", "Cancel me", "--quiet").out.strip()
    s.json("uwf", "queue", "cancel", doomed, "--reason", "no longer needed")
    s.ok("uwf", "queue", "status", third, "--set", "ready")
    s.json("uwf", "queue", "status", third, "--set", "completed")
    s.fails("uwf", "queue", "show", ABSENT_ULID, code=1)
    s.fails("uwf", "queue", "add", "-p", "no workflow", code=2)
    s.fails("uwf", "queue", "status", third, "--set", "leased", code=1)
    s.fails("uwf", "sched", "policy", "show", "--max-attempts", "3", code=2)
    s.fails("uwf", "sched", "release", first, "--lease", "nope", code=2)


def _retention(s: Session, runs: list[str]) -> None:
    """`run archive` last, then `log verify` once more. On b2f291d `log verify` counts a
    `run.archived` of a run whose thread has ended as a problem (exit 1, the problems on
    stdout), so the other log commands run before any archive; the last entry records
    what it says, with no expectation of its own, so that fixing it only changes the
    golden file."""
    s.ok("uwf", "run", "archive", runs[0], "--reason", "done with it")
    s.json("uwf", "run", "archive", runs[0], "--unarchive")
    s.now += timedelta(days=2)
    s.ok("uwf", "run", "archive", "--older-than-days", "1", "--state", "completed")
    s.json("uwf", "run", "archive", "--older-than-days", "1")
    s.fails("uwf", "run", "archive", code=2)
    s.fails("uwf", "run", "archive", runs[0], "--state", "completed", code=2)
    s.run("uwf", "log", "verify")


def _worker(s: Session) -> None:
    add = ("uwf", "queue", "add", "--workflow", "solve-issue", "--session", "w", "--agent",
           "quick", "--quiet")
    s.ok(*add, "-p", "For the worker")
    # How long the entry took ({seconds:7.1f}s), in the worker's line on a terminal.
    s.ok("uwf", "worker", "--once", "--session", "w", masks=[(r"(?m)[ 0-9]{5}\.[0-9]s$",
                                                                "  <SEC>s")])
    s.ok(*add, "-p", "For the worker, again")
    s.json("uwf", "worker", "--once", "--session", "w")
    s.fails("uwf", "worker", "--once", "--session", "w", code=3)
    s.fails("uwf", "worker", "--anchor-every", "5", code=2)


def _archive(s: Session) -> None:
    s.ok("uwf", "archive", "sync", s.file("archive"))
    s.ok("uwf", "thread", "start", "solve-issue", "-p", "One more", "--json")
    s.json("uwf", "archive", "sync", s.file("archive"))
    s.both("uwf", "archive", "verify", s.file("archive"))
    s.fails("uwf", "archive", "verify", s.file("nowhere"), code=1)
    s.fails("uwf", "archive", "sync", "", code=2)


def _registry(s: Session) -> None:
    s.both("uwf", "registry", "show")
    s.both("uwf", "registry", "refresh")
    s.both("uwf", "registry", "rebuild")
    s.both("uwf", "registry", "verify")
    s.fails("uwf", "registry", "show", "--scope", "nope", code=2)


def _log(s: Session) -> None:
    s.both("uwf", "log", "tail", "-n", "3")
    s.ok("uwf", "log", "tail", "-n", "3", terminal=False)  # piped: the stored lines
    s.ok("uwf", "log", "tail", "--type", "thread.", "--subject", "thread/", "-n", "2")
    s.both("uwf", "log", "verify")
    s.both("uwf", "log", "anchor")
    s.ok("uwf", "log", "anchor", "--out", s.file("anchors/a1.json"))
    s.both("uwf", "log", "verify", "--anchor", s.file("anchors/a1.json"))
    # A new key is random: its fingerprint (the public key, in hex) is masked.
    fingerprint = [(r"[0-9a-f]{64}", "<FINGERPRINT>")]
    new_key = ("uwf", "log", "anchor", "--new-key", "--key")
    s.ok(*new_key, s.file("keys/new.pem"), masks=fingerprint)
    s.json(*new_key, s.file("keys/other.pem"), masks=fingerprint)
    s.fails("uwf", "log", "anchor", "--new-key", "--key", s.file("keys/new.pem"), code=1)
    s.fails("uwf", "log", "verify", "--key", s.file("keys/new.pem"), code=2)


def _demo(s: Session) -> None:
    # The demo's own scratch folder has a random name, and it is the repo of the demo's
    # thread, so the digest of what `thread show` printed varies with it; and the demo
    # says how long it took.
    varies = [(r"uwf-demo-[A-Za-z0-9_]{8}", "uwf-demo-<RANDOM>"),
              (r"sha256 [0-9a-f]{16}", "sha256 <DIGEST>"),
              (r'"seconds": [0-9.]+', '"seconds": <SECONDS>'),
              (r"in [0-9.]+ s\b", "in <SECONDS> s")]
    s.ok("uwf", "demo", masks=varies)
    s.json("uwf", "demo", masks=varies)
    s.fails("uwf", "demo", "--bogus", code=2)


def _over_mqtt(s: Session) -> None:
    """A job over MQTT and the bridge, against a real broker: last, as its port (random)
    is in what they record. The port and the bridge's state file (named from it) are
    masked, the job's token comes from a fixed function."""
    from tests.brokerkit import Broker

    folder = s.root / "broker"
    folder.mkdir()
    broker = Broker(folder)
    broker.start()
    port = [(rf"\b{broker.port}\b", "<PORT>"), (r"mqtt-[0-9a-f]+\.json", "mqtt-<DIGEST>.json")]
    s.monkeypatch.setattr("secrets.token_urlsafe", lambda nbytes=None: "T" * 43)
    try:
        added = s.json("uwf", "queue", "add", "--workflow", "solve-issue", "-p", "Over MQTT",
                       "--broker", broker.url, masks=port)  # text: the masked port is no JSON
        job = re.findall(r'"id": "(\w+)"', added)[0]
        s.ok("uwf", "queue", "subscribe", job, "--wait", "0.2", masks=port)
        s.ok("uwf", "queue", "publish", job, "--event", '{"type": "progress", "pct": 40}',
             masks=port)
        s.json("uwf", "queue", "publish", job, "--event", '{"type": "progress", "pct": 80}',
               masks=port)
        s.ok("uwf", "queue", "subscribe", job, "--wait", "1", masks=port)
        s.json("uwf", "queue", "publish", job, "--event", '{"type": "status", "status": '
               '"completed"}', masks=port)
        s.ok("uwf", "queue", "subscribe", job, "--wait", "1", "--json", masks=port)
        s.fails("uwf", "queue", "publish", job, "--event", "{nope", code=2)
        s.ok("uwf", "bridge", "mqtt", "--broker", broker.url, "--once", masks=port)
        s.json("uwf", "bridge", "mqtt", "--broker", broker.url, "--once", masks=port)
        s.fails("uwf", "bridge", "mqtt", "--broker", "http://nowhere", "--once", code=2)
    finally:
        broker.stop()


def _store_copy(s: Session) -> None:
    """Last, so that the entries before it stay as they were."""
    s.ok("uwf", "store", "copy", str(s.root / "store"), str(s.root / "copy"))
    s.json("uwf", "store", "copy", str(s.root / "copy"), str(s.root / "again"))
    s.fails("uwf", "store", "copy", str(s.root / "store"), str(s.root / "copy"), code=1)
    s.fails("uwf", "store", "copy", s.file("nowhere"), str(s.root / "elsewhere"), code=1)


def _mcp(s: Session) -> None:
    # Over stdio the server ends when its client does: here stdin is empty at once. Its
    # sessions are in tests/e2e/test_mcp*.py.
    s.ok("uwf", "mcp")
    s.json("uwf", "mcp")
    s.fails("uwf", "mcp", "--http", "0.0.0.0:8765", code=2)


def _dashboard(s: Session) -> None:
    """Last, as its port (any free one) is in what it prints. It serves until stopped:
    here `--check` binds and exits; its pages are in tests/e2e/test_dashboard*.py."""
    port = [(r"127\.0\.0\.1:\d+", "127.0.0.1:<PORT>")]
    s.ok("uwf", "dashboard", "--port", "0", "--check", masks=port)
    s.json("uwf", "dashboard", "--port", "0", "--check", masks=port)
    s.fails("uwf", "dashboard", "--host", "0.0.0.0", "--check", code=2)


def _writer(s: Session) -> None:
    """It serves until stopped: here `--check` binds its socket and exits. It decides by
    the wall clock (UWF_NOW empty), and refuses a fixed one; its calls are in
    tests/e2e/test_writer.py."""
    wall = {"UWF_NOW": ""}
    s.expect(s.run("uwf", "writer", "--check", env=wall), 0)
    s.expect(s.run("uwf", "writer", "--check", "--json", terminal=False, env=wall), 0)
    s.fails("uwf", "writer", code=2)


def _global(s: Session) -> None:
    s.fails("uwf", code=2)
    s.fails("uwf", "--now", "yesterday", "workflow", "list", code=2)
    s.fails("uwf", "workflow", "frob", code=2)
    s.fails("uwf", "workflow", "list", env={"UWF_DURABILITY": "maybe"}, code=2)
    s.fails("json-cas", code=2)
    # The global options' other spellings: --format json, --store (as UWF_HOME here).
    s.ok("uwf", "workflow", "list", "--format", "json")
    s.ok("json-cas", "--store", str(s.root / "store"), "schema", "list")


def _json_cas_end(s: Session) -> None:
    s.both("json-cas", "verify", "--all")
    s.both("json-cas", "gc", "--dry-run", "--grace", "0")
    s.ok("json-cas", "gc", "--yes", "--grace", "0")
    s.json("json-cas", "gc", "--yes", "--grace", "0")


# -- the tests -------------------------------------------------------------------------

UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    _prepare(tmp_path, monkeypatch)
    return Session(tmp_path, monkeypatch, strict=UPDATE)


def test_transcript_matches_golden(session: Session) -> None:
    """Every command prints what tests/golden/cli.txt says, byte for byte."""
    if UPDATE:
        script(session)
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(session.text(), "utf-8", newline="")
        return
    stopped: BaseException | None = None
    try:
        script(session)
    except Exception as exc:  # a command went another way: show the diff up to there
        stopped = exc
    got = session.text()
    want = GOLDEN.read_text("utf-8") if GOLDEN.exists() else ""
    if got == want:
        return
    diff = "".join(difflib.unified_diff(
        want.splitlines(keepends=True), got.splitlines(keepends=True),
        "tests/golden/cli.txt", "this run", n=4))
    why = f"\nthe script stopped: {stopped!r}" if stopped is not None else ""
    pytest.fail("the CLI's output differs from tests/golden/cli.txt (if the change is "
                "meant, regenerate it: UPDATE_GOLDEN=1 python -m pytest "
                f"tests/e2e/test_golden_cli.py){why}\n{diff}", pytrace=False)


# -- coverage: every declared command is in the transcript ------------------------------

@dataclass(frozen=True)
class Recorded:
    """An entry of the golden file, as the coverage check reads it."""

    prog: str
    path: tuple[str, ...]  # the declared command it ran; () for none (no command given)
    as_json: bool
    terminal: bool
    code: int
    said: bool  # an error line on stderr


def recorded(text: str) -> list[Recorded]:
    """Every entry of a transcript: its `$` line, its `#` line, and whether a `!` (stderr)
    line follows."""
    found = []
    for match in re.finditer(r"^\$ (.*)\n# (.*), exit (\d+)\n(?:[|].*\n)*(!?)", text,
                             flags=re.MULTILINE):
        words = shlex.split(match[1])
        while "=" in words[0]:  # VAR=value before the program
            words.pop(0)
        prog, argv = words[0], words[1:]
        found.append(Recorded(prog, declared_path(prog, argv), "--json" in argv,
                              match[2].startswith("terminal"), int(match[3]),
                              bool(match[4])))
    return found


def declared_path(prog: str, argv: Sequence[str]) -> tuple[str, ...]:
    """The longest declared command path `argv` starts with, global options aside."""
    words: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in GLOBAL_VALUED:
            skip = True
        elif word not in GLOBAL_FLAGS and not word.startswith(tuple(f"{flag}=" for flag in
                                                                    GLOBAL_VALUED)):
            words.append(word)
    paths = {command.path for command in PROGRAMS[prog][1]}
    for length in range(len(words), 0, -1):
        if tuple(words[:length]) in paths:
            return tuple(words[:length])
    return ()


def test_every_command_has_a_transcript() -> None:
    """Each declared command of `uwf` and `json-cas` is in the golden file on a terminal
    and with --json, both succeeding, and each command group has an error (an exit code
    and a line on stderr). A new command fails here until `script` runs it."""
    assert GOLDEN.exists(), "no golden file: UPDATE_GOLDEN=1 python -m pytest " \
                            "tests/e2e/test_golden_cli.py"
    entries = recorded(GOLDEN.read_text("utf-8"))
    missing = []
    for prog, (_, group) in PROGRAMS.items():
        for command in group:
            ran = [e for e in entries if (e.prog, e.path) == (prog, command.path)
                   and e.code == 0]
            name = " ".join((prog, *command.path))
            if not any(e.terminal and not e.as_json for e in ran):
                missing.append(f"{name}: on a terminal")
            if not any(e.as_json for e in ran):
                missing.append(f"{name}: with --json")
        for first in {command.path[0] for command in group}:
            if not any(e.prog == prog and e.path[:1] == (first,) and e.code != 0 and e.said
                       for e in entries):
                missing.append(f"{prog} {first}: an error (exit code and stderr line)")
    assert not missing, ("tests/golden/cli.txt lacks (add them to `script`, then "
                         "UPDATE_GOLDEN=1):\n" + "\n".join(missing))
