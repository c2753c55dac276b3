"""Every file a command is given is a regular file (or `-`, stdin), read within a limit
(docs/cli.md#files-a-command-reads).

A FIFO, a device (a link to /dev/zero), a folder or a file over its limit, given as
a batch, a workflow, a JSON input, an anchor, a key, the config file or its `.env`,
is refused at once with one line naming it, the exit code of its kind (2 for a file
named on the command line, 1 for the config and its `.env`), and the log and the CAS
as they were. Nothing here may hang: a command given a FIFO or a device (as a file or
as stdin) runs as a real process with a time limit and its address space capped, so an
endless read fails fast; the others run in this process (tests/clikit.py), with the
same time limit.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clikit import call
from tests.conftest import EXAMPLE, Result, refused, snapshot

KiB, MiB = 1 << 10, 1 << 20
TIMEOUT = 20  # seconds: every refusal here takes well under one
MEMORY_CAP = 1 << 30  # an address space a command never needs; an endless read hits it


def run(env: dict[str, str], *args: str, prog: str = "uwf", stdin: bytes | Path = b"",
        process: bool = False) -> Result:
    """A console script, stopped after TIMEOUT seconds (a failure): as a real process with
    its memory capped when `process` is set or stdin is a file (a device, a FIFO)."""
    capped = process or isinstance(stdin, Path)
    called = call(prog, args, env, stdin=stdin, limit=TIMEOUT,
                  memory_cap=MEMORY_CAP if capped else None)
    assert not called.hung, f"{prog} {' '.join(args)} still ran after {TIMEOUT} s"
    return Result(called.code, called.out.decode("utf-8", "replace"),
                  called.err.decode("utf-8", "replace"))


@dataclass(frozen=True)
class Store:
    """A store with the example workflow, a thread, an anchor key and an anchor."""

    home: Path
    env: dict[str, str]
    config_dir: Path
    thread: str
    key: Path
    anchor: Path
    good_output: Path

    def run(self, *args: str, env: dict[str, str] | None = None, prog: str = "uwf",
            stdin: bytes | Path = b"", process: bool = False) -> Result:
        return run({**self.env, **(env or {})}, *args, prog=prog, stdin=stdin,
                   process=process)

    def ok(self, *args: str) -> dict[str, object]:
        result = self.run("--json", *args)
        assert result.code == 0, result
        payload: dict[str, object] = json.loads(result.out)
        return payload


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("inputs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
    env.update(UWF_HOME=str(root / "store"), XDG_CONFIG_HOME=str(root / "config"),
               UWF_DURABILITY="none")
    made = Store(root / "store", env, root / "config", "", root / "keys" / "a.pem",
                 root / "anchors" / "a.json", root / "output.json")
    made.ok("workflow", "put", str(EXAMPLE))
    thread = str(made.ok("thread", "start", "solve-issue", "-p", "Fix it")["thread"])
    made.ok("log", "anchor", "--new-key", "--key", str(made.key))
    made.anchor.parent.mkdir()
    made.ok("log", "anchor", "--key", str(made.key), "--out", str(made.anchor))
    made.good_output.write_text('{"status": "ready", "plan": "p"}')
    return Store(made.home, env, made.config_dir, thread, made.key, made.anchor,
                 made.good_output)


# -- the kinds of bad file --------------------------------------------------------------

KINDS = ("fifo", "dev-zero", "directory", "over-limit")
ENDLESS = ("fifo", "dev-zero")  # a read that never ends: run as a capped process
SAYS = {"fifo": "is a FIFO, not a regular file",
        "dev-zero": "is a character device, not a regular file",
        "directory": "is a directory, not a regular file"}


def make_bad(kind: str, path: Path, limit: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        with path.open("wb") as handle:  # sparse: a byte over the limit costs nothing
            handle.truncate(limit + 1)


@dataclass(frozen=True)
class Case:
    """A command given a bad file at `place` (under a test's folder)."""

    argv: Callable[[Store, Path], list[str]]
    limit: int
    limit_words: str
    code: int = 2  # a file named on the command line: usage
    prog: str = "uwf"
    place: str = "input.yaml"
    env: Callable[[Path], dict[str, str]] | None = None


CASES = {
    "queue add --batch": Case(lambda s, p: ["queue", "add", "--batch", str(p)],
                              MiB, "line 1 is more than 1 MiB"),
    "workflow put": Case(lambda s, p: ["workflow", "put", str(p)], MiB, "more than 1 MiB"),
    "thread start FILE": Case(lambda s, p: ["thread", "start", str(p), "-p", "x"], MiB,
                              "more than 1 MiB"),
    "agent submit --output": Case(
        lambda s, p: ["agent", "submit", s.thread, "planner", "--output", str(p)],
        64 * MiB, "more than 64 MiB"),
    "agent submit --detail": Case(
        lambda s, p: ["agent", "submit", s.thread, "planner", "--output", str(s.good_output),
                      "--detail", str(p)], 64 * MiB, "more than 64 MiB"),
    "json-cas put": Case(lambda s, p: ["put", str(p)], 64 * MiB, "more than 64 MiB",
                         prog="json-cas"),
    "log verify --anchor": Case(
        lambda s, p: ["log", "verify", "--key", str(s.key), "--anchor", str(p)],
        64 * KiB, "more than 64 KiB"),
    "log verify --key": Case(
        lambda s, p: ["log", "verify", "--key", str(p), "--anchor", str(s.anchor)],
        64 * KiB, "more than 64 KiB"),
    "log anchor --key": Case(lambda s, p: ["log", "anchor", "--key", str(p)],
                             64 * KiB, "more than 64 KiB"),
    "worker --anchor-key": Case(
        lambda s, p: ["worker", "--once", "--anchors", str(p.parent / "anchors"),
                      "--anchor-key", str(p)], 64 * KiB, "more than 64 KiB"),
    # Files found by convention, not named on the command line: an invalid state (1).
    "config.yaml": Case(lambda s, p: ["agent", "context", s.thread, "planner"], MiB,
                        "more than 1 MiB", code=1,
                        env=lambda p: {"UWF_CONFIG": str(p)}),
    ".env": Case(lambda s, p: ["agent", "context", s.thread, "planner"], MiB,
                 "more than 1 MiB", code=1, place="config/uwf/.env",
                 env=lambda p: {"UWF_CONFIG": str(p.parent / "config.yaml")}),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", sorted(CASES))
def test_a_file_that_is_not_a_regular_file_or_too_big_is_refused_in_one_line(
        store: Store, tmp_path: Path, command: str, kind: str) -> None:
    case = CASES[command]
    bad = tmp_path / case.place
    make_bad(kind, bad, case.limit)
    before = snapshot(store.home)
    result = store.run(*case.argv(store, bad), env=case.env(bad) if case.env else None,
                       prog=case.prog, process=kind in ENDLESS)
    line = refused(result, case.code, str(bad), SAYS.get(kind, case.limit_words),
                   prog=case.prog)
    assert "; " in line, f"no next action: {line}"
    assert snapshot(store.home) == before


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("which", ["config.yaml", ".env"])
def test_a_bad_config_or_dotenv_never_stops_the_commands_that_do_not_use_it(
        store: Store, tmp_path: Path, which: str, kind: str) -> None:
    """Every command reads the config and its `.env` for the values to mask: one that is
    a FIFO hung them all, a link to /dev/zero ended each in MemoryError."""
    case = CASES[which]
    assert case.env is not None
    bad = tmp_path / case.place
    make_bad(kind, bad, case.limit)
    result = store.run("workflow", "list", env=case.env(bad), process=kind in ENDLESS)
    assert result.code == 0, result
    assert "solve-issue" in result.out


# -- queue add --batch -------------------------------------------------------------------

ENTRY = b'{"workflow": "solve-issue", "prompt": "Fix it"}'


@pytest.mark.timeout(120)
def test_a_batch_over_its_limit_is_refused_naming_the_limit(store: Store, tmp_path: Path
                                                            ) -> None:
    before = snapshot(store.home)
    # Each line is fine; the whole is a byte over 16 MiB (blank lines count too).
    path = tmp_path / "long.jsonl"
    blank = b" " * 1023 + b"\n"
    path.write_bytes(ENTRY + b"\n" + blank * (16 * 1024 - 1)
                     + b" " * (KiB - len(ENTRY) - 1) + b"\n")
    assert path.stat().st_size == 16 * MiB + 1
    refused(store.run("queue", "add", "--batch", str(path)), 2, str(path),
            "more than 16 MiB (16,777,216 bytes)", "docs/cli.md#limits")
    # The same on stdin: `-` is bounded too.
    refused(store.run("queue", "add", "--batch", "-", stdin=path), 2, "stdin",
            "more than 16 MiB")
    # stdin from /dev/zero: one endless line.
    refused(store.run("queue", "add", "--batch", "-", stdin=Path("/dev/zero")), 2,
            "stdin line 1 is more than 1 MiB")
    # A line a byte over 1 MiB, after good ones.
    path.write_bytes(ENTRY + b"\n" + b'{"note": "' + b"x" * MiB + b'"}\n')
    refused(store.run("queue", "add", "--batch", str(path)), 2,
            f"{path} line 2 is more than 1 MiB (1,048,576 bytes)")
    assert snapshot(store.home) == before


@pytest.mark.timeout(120)
def test_a_batch_of_more_than_100000_entries_is_refused_by_line(store: Store,
                                                                tmp_path: Path) -> None:
    """Every entry is held in memory until the one write: 350,000 tiny entries (16 MiB)
    took a gigabyte. The count is bounded too."""
    path = tmp_path / "many.jsonl"
    path.write_bytes((ENTRY + b"\n") * 100_001)
    before = snapshot(store.home)
    refused(store.run("queue", "add", "--batch", str(path)), 2,
            f"{path} line 100001: more than 100,000 entries in one batch",
            "split it into several batches")
    assert snapshot(store.home) == before


def test_a_batch_at_its_limits_is_added(store: Store, tmp_path: Path) -> None:
    prompt = b"p" * (MiB - len(b'{"workflow": "solve-issue", "prompt": ""}'))
    line = b'{"workflow": "solve-issue", "prompt": "' + prompt + b'"}'
    assert len(line) == MiB
    path = tmp_path / "edge.jsonl"
    path.write_bytes(line + b"\r\n" + ENTRY)  # CRLF, and no newline at the end
    added = store.ok("queue", "add", "--batch", str(path))
    assert added["count"] == 2


def test_a_batch_may_start_with_a_byte_order_mark(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + ENTRY + b"\n" + ENTRY + b"\n")
    added = store.ok("queue", "add", "--batch", str(path))
    assert added["count"] == 2
    on_stdin = store.run("--json", "queue", "add", "--batch", "-", stdin=path.read_bytes())
    assert on_stdin.code == 0, on_stdin
    # Only at the very start: anywhere else it is a stray character, refused by line.
    before = snapshot(store.home)
    path.write_bytes(ENTRY + b"\n\xef\xbb\xbf" + ENTRY + b"\n")
    refused(store.run("queue", "add", "--batch", str(path)), 2, "line 2")
    assert snapshot(store.home) == before


# -- anchors -------------------------------------------------------------------------------

def test_an_anchor_may_start_with_a_byte_order_mark(store: Store, tmp_path: Path) -> None:
    copy = tmp_path / "bom.json"
    copy.write_bytes(b"\xef\xbb\xbf" + store.anchor.read_bytes())
    result = store.run("--json", "log", "verify", "--key", str(store.key), "--anchor",
                       str(copy))
    assert result.code == 0, result
    assert json.loads(result.out)["ok"] is True


def test_a_regular_file_through_a_link_is_read(store: Store, tmp_path: Path) -> None:
    """Links are followed (a dotfiles folder links its config in): what is refused is
    what the link leads to, not the link."""
    key, anchor = tmp_path / "key.pem", tmp_path / "anchor.json"
    key.symlink_to(store.key)
    anchor.symlink_to(store.anchor)
    result = store.run("--json", "log", "verify", "--key", str(key), "--anchor", str(anchor))
    assert result.code == 0, result


def test_an_anchor_taken_on_a_torn_batch_names_the_last_complete_one(
        tmp_path: Path, store: Store) -> None:
    """A reader may see a batch of which only some lines were written (a writer killed
    mid-write): those lines are dropped by the next writer, so an anchor of one of them
    would later read as a contradiction."""
    home = tmp_path / "torn"
    env = {**store.env, "UWF_HOME": str(home)}
    run(env, "workflow", "put", str(EXAMPLE))  # seq 1-2
    batch = tmp_path / "two.jsonl"
    batch.write_bytes(ENTRY + b"\n" + ENTRY + b"\n")
    assert run(env, "queue", "add", "--batch", str(batch)).code == 0  # seq 3-4, one batch
    (segment,) = sorted((home / "events").glob("*.jsonl"))
    kept = segment.read_bytes().splitlines(keepends=True)
    assert [json.loads(raw)["batch"] for raw in kept[2:]] == [[1, 2], [2, 2]]
    segment.write_bytes(b"".join(kept[:3]))  # seq 3 of 4: the batch is torn
    shutil.rmtree(home / "views")
    anchor = tmp_path / "a.json"
    made = run(env, "--json", "log", "anchor", "--key", str(store.key), "--out", str(anchor))
    assert made.code == 0, made
    assert json.loads(made.out)["seq"] == 2, "the last complete batch ends at seq 2"
    # The next writer repairs the tail (seq 3 becomes log.repaired): the anchor holds.
    assert run(env, "workflow", "put", str(EXAMPLE)).code == 0
    assert b"log.repaired" in segment.read_bytes()
    verified = run(env, "--json", "log", "verify", "--key", str(store.key), "--anchor",
                   str(anchor))
    assert verified.code == 0, verified
    assert json.loads(verified.out)["ok"] is True


def test_the_worker_names_an_anchor_past_the_logs_end(store: Store, tmp_path: Path
                                                       ) -> None:
    """A file in --anchors DIR named with a seq past the log's end silently stopped the
    anchoring (no anchor was ever due again): the worker refuses to start, naming it."""
    folder = tmp_path / "anchors"
    folder.mkdir()
    odd = folder / f"{99_999_999_999:020d}.json"
    odd.write_text("{}")
    before = snapshot(store.home)
    line = refused(store.run("worker", "--once", "--anchors", str(folder), "--anchor-key",
                             str(store.key)), 1, str(odd), "past the log's end")
    assert "uwf log verify" in line
    assert snapshot(store.home) == before
