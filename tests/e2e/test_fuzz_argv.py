"""Fuzzing the command line: every `uwf` and `json-cas` argument list, drawn from the
declared commands, their flags and real values of a seeded store, mixed with garbage
(unicode, huge and negative numbers, nan, empty strings, stray flags), exits 0 or
with one `<prog>: error:` line and the SPEC's exit code; a refused command leaves
the log and the CAS as they were; an accepted one leaves a log that verifies.

Most inputs run `main(argv)` in-process (~10 ms each); a few run the real console
scripts and must agree with the in-process run. Commands that run until
interrupted (`--follow`, `worker` without `--once`) are given `--once` or lose the
flag: they wait by design. PATH holds no programs, so a generated `--agent` word
runs nothing. docs/fuzzing.md lists the budgets and what they found.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests import fuzzkit
from tests.conftest import BIN, EXAMPLE
from tests.fuzzkit import Sandbox, fresh
from uwf.cli.jsoncas import COMMANDS as CAS_COMMANDS
from uwf.cli.main import COMMANDS as UWF_COMMANDS
from uwf.invoker.params import Param, params
from uwf.invoker.spec import Group

MOCK = EXAMPLE.parent / "mock-solve-issue.yaml"
TARGET = "argv"
BINARY_TARGET = "argv (real binary)"
# Commands whose refusal records what happened (a blocked or failed step, a released
# queue entry): the log grows, and must still verify.
RECORDING = {("thread", "step"), ("thread", "run"), ("run", "resume"), ("worker",)}
NOTHING = {("queue", "pick"), ("sched", "lease"), ("worker",)}  # may exit 3
# A prefix argparse expands to --follow: such commands run until interrupted.
FOLLOW = {"--fol", "--foll", "--follo", "--follow"}


# -- the seeded store ----------------------------------------------------------------

def _ok(sandbox: Sandbox, *argv: str, prog: str = "uwf", stdin: bytes = b"") -> str:
    done = fuzzkit.run_in_process(sandbox, prog, "--json", *argv, stdin=stdin)
    assert done.code == 0, done.describe()
    return done.out


def _json(sandbox: Sandbox, *argv: str) -> Any:
    return json.loads(_ok(sandbox, *argv))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    """A store with a workflow, a thread stepped once (by uwf-mock), a fresh thread, a
    queue entry, a policy and a Text node; its values feed the generated arguments."""
    sandbox = Sandbox.create(tmp_path_factory.mktemp("argv") / "template", path=str(BIN))
    _ok(sandbox, "workflow", "put", str(EXAMPLE))
    stepped = _json(sandbox, "thread", "start", "solve-issue", "-p", "Fix the bug")["thread"]
    _ok(sandbox, "thread", "step", stepped, "--agent", f"uwf-mock {MOCK}")
    fresh_thread = _json(sandbox, "thread", "start", "solve-issue", "-p", "Another")["thread"]
    entry = _json(sandbox, "queue", "add", "--workflow", "solve-issue", "--prompt", "Queued",
                  "--key", "k1")["entry"]["id"]
    _ok(sandbox, "sched", "policy", "set", "--maxConcurrent", "2")
    text = _ok(sandbox, "put", "--type", "Text", "-", prog="json-cas", stdin=b'"a note"').strip()
    head = _json(sandbox, "thread", "show", stepped)["head"]
    sandbox.env["PATH"] = str(sandbox.root / "bin")  # from here on, no program is found
    VALUES.extend([stepped, fresh_thread, entry, text, head, "solve-issue", "planner",
                   "developer", str(EXAMPLE), str(MOCK), "ready", "leased", "pending"])
    return sandbox


VALUES: list[str] = []  # ids and names of the seeded store (filled by `template`)


# -- generated argument lists ----------------------------------------------------------

def _garbage() -> st.SearchStrategy[str]:
    """Words no command expects; never an absolute path, `~` or `..` (so a generated
    --store or output folder stays inside the sandbox)."""
    return st.one_of(
        st.text(max_size=12),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
        st.sampled_from(["", " ", "-", "--", "-1", "0", "1e400", "nan", "inf", "-inf",
                         "\u00b2", "\u0661", "\x00", "9" * 30, "-" + "9" * 30, "1.5",
                         "0x10", "=", "--=", "\ud800"]),
    ).filter(lambda word: not word.startswith(("/", "~")) and ".." not in word)


def _number(kind: type) -> st.SearchStrategy[str]:
    sensible = st.integers(-3, 3).map(str) if kind is int else st.sampled_from(
        ["0.5", "1", "0", "-1", "30"])
    extreme = st.sampled_from(["-1", "0", str(2**63 - 1), str(2**63), str(2**64),
                               "-" + str(2**63), "1" * 400, "1e308", "1e400", "nan", "inf",
                               "-0", "0.0001", "31536001", "1_000"])
    return st.one_of(sensible, extreme, st.integers().map(str), _garbage())


def _value(param: Param, tidy: bool) -> st.SearchStrategy[str]:
    """A value for `param`: a plausible one when `tidy`, else anything."""
    if param.choices is not None:
        choices = st.sampled_from([str(c) for c in param.choices])
        return choices if tidy else st.one_of(choices, _garbage())
    if param.kind in (int, float):
        sensible = st.integers(0, 5).map(str)
        return sensible if tidy else _number(param.kind)
    known = st.sampled_from(VALUES) if VALUES else st.just("x")
    return known if tidy else st.one_of(known, _garbage(), st.sampled_from(
        ["-", "work/missing.yaml", "fuzz.out"]))


@st.composite
def _command_line(draw: st.DrawFn, group: Group) -> list[str]:
    command = draw(st.sampled_from(group.commands))
    tidy = draw(st.booleans())  # plausible values only, and no stray words
    words = list(command.path)
    for param in params(command.args):
        if not draw(st.booleans()):
            continue
        if param.kind is bool:
            words.append(draw(st.sampled_from(param.flags)))
            continue
        repeat = draw(st.integers(1, 3)) if param.kind is list else 1
        for _ in range(repeat):
            value = draw(_value(param, tidy))
            if param.positional:
                words.append(value)
            else:
                flag = draw(st.sampled_from(param.flags))
                words += [f"{flag}={value}"] if draw(st.booleans()) else [flag, value]
    flags = sorted({flag for c in group for p in params(c.args) for flag in p.flags}
                   | {"--json", "--format", "--now", "--help", "-h"})
    for _ in range(0 if tidy else draw(st.integers(0, 3))):  # stray words anywhere
        word = draw(st.one_of(st.sampled_from(flags), _garbage(),
                              st.sampled_from([w for c in group for w in c.path])))
        words.insert(draw(st.integers(0, len(words))), word)
    if not tidy and draw(st.integers(0, 4)) == 0 and words:  # drop a word of the command
        del words[draw(st.integers(0, len(words) - 1))]
    globals_ = draw(st.lists(st.sampled_from(
        [["--json"], ["--format", "json"], ["--format", "yaml"], ["--now", "0"],
         ["--now", "2026-01-01T00:00:00Z"], ["--now", "yesterday"],
         ["--now", "99999999999999999"]]), max_size=2))
    return [word for pair in globals_ for word in pair] + words


def runnable(argv: Sequence[str]) -> list[str]:
    """`argv` without what waits by design: a --follow flag goes, `worker` gets --once,
    `dashboard` --check (it binds, prints its URL and stops instead of serving)."""
    words = [word for word in argv if word.split("=", 1)[0] not in FOLLOW]
    if "worker" in words:
        words.append("--once")
    if "dashboard" in words:
        words.append("--check")
    return words


@functools.cache
def _parser(group: Group) -> argparse.ArgumentParser:
    """The real parser of `group`'s whole tree, built once: it costs more to build than a
    command costs to run in-process, and parsing leaves it as it was."""
    from uwf.cli.parsing import build_parser

    return build_parser(group)


def command_of(group: Group, argv: Sequence[str]) -> tuple[str, ...] | None:
    """The command `argv` names, as the real parser reads it (None if it does not parse)."""
    try:  # argparse prints a usage error (or --help) and exits: keep it quiet
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(
                io.StringIO()):
            namespace, _ = _parser(group).parse_known_args(list(argv))
    except SystemExit:
        return None
    declared = getattr(namespace, "_declared", None)
    return None if declared is None else tuple(declared.path)


# -- the checks ------------------------------------------------------------------------

def check(sandbox: Sandbox, prog: str, argv: list[str], target: str,
          run: fuzzkit.Runner = fuzzkit.run_in_process) -> fuzzkit.Outcome:
    path = command_of(UWF_COMMANDS if prog == "uwf" else CAS_COMMANDS, argv)
    before = sandbox.snapshot()
    outcome = run(sandbox, prog, *argv)
    kind = fuzzkit.verdict(outcome, target, nothing=path in NOTHING)
    # `run rerun --drive` is a rerun, then `run resume --drive` of it (docs/runs.md).
    drives = path == ("run", "rerun") and any(
        len(word) > 4 and "--drive".startswith(word) for word in argv)
    if kind == "refused" and path not in RECORDING and not drives:
        fuzzkit.unchanged(before, sandbox, outcome)
    elif sandbox.snapshot() != before:
        fuzzkit.log_verifies(sandbox, run)
    return outcome


PROGRAMS = st.sampled_from(["uwf", "uwf", "uwf", "json-cas"])


@st.composite
def _argv(draw: st.DrawFn) -> tuple[str, list[str]]:
    prog = draw(PROGRAMS)
    group = UWF_COMMANDS if prog == "uwf" else CAS_COMMANDS
    if draw(st.integers(0, 9)) == 0:  # no structure at all
        flags = [f for c in group for p in params(c.args) for f in p.flags]
        words = draw(st.lists(st.one_of(_garbage(), st.sampled_from(flags)), max_size=6))
        return prog, runnable(words)
    return prog, runnable(draw(_command_line(group)))


@given(_argv())
@fuzzkit.fuzz_settings(250)
# Found by this target: a value that is not UTF-8 (argv bytes reach Python as lone
# surrogates) was an internal error in every query (sqlite3 raises UnicodeEncodeError).
@example(("uwf", ["thread", "list", "--workflow", "\ud800"]))
@example(("uwf", ["queue", "list", "--session", "\udcff"]))
# Found by this target: a file name or value holding a line break made a two-line error.
@example(("json-cas", ["hash", "\x1e"]))
@example(("uwf", ["workflow", "put", "a\nb"]))
@example(("uwf", ["thread", "show", "\u2028"]))
# Found by the batch target: a repo path too long for the file system (or holding a NUL)
# was an internal error.
@example(("uwf", ["thread", "start", "solve-issue", "-p", "x", "--repo", "a/" * 3000]))
@example(("uwf", ["thread", "show", "\x00"]))
@example(("uwf", ["workflow", "put", "\x00"]))  # found: ValueError (embedded null byte)
@example(("uwf", ["run", "rerun", "01J7K9M2XNPQR5VWBCDF8G3H4T", "--drive"]))
@example(("uwf", ["queue", "list", "--limit", str(2**63)]))
@example(("uwf", ["--now", "\ud800", "workflow", "list"]))
@example(("json-cas", ["walk", "0123456789ABC", "--depth", "-1"]))
def test_every_argument_list_exits_cleanly(template: Sandbox,
                                           generated: tuple[str, list[str]]) -> None:
    prog, argv = generated
    with fuzzkit.trying(TARGET), fresh(template) as sandbox:
        check(sandbox, prog, argv, TARGET)


@given(_argv())
@fuzzkit.fuzz_settings(8, binary=True)
def test_the_real_binaries_agree_with_main(template: Sandbox,
                                           generated: tuple[str, list[str]]) -> None:
    """The console scripts exit as `main(argv)` does, with the same stderr."""
    prog, argv = generated
    argv = [word for word in argv if "\x00" not in word and not _surrogate(word)]
    with fuzzkit.trying(BINARY_TARGET), fresh(template) as first, fresh(template) as second:
        inside = check(first, prog, argv, TARGET)
        outside = check(second, prog, argv, BINARY_TARGET, run=fuzzkit.run_binary)
        assert outside.code == inside.code, (inside.describe(), outside.describe())
        assert _same(outside.err, second) == _same(inside.err, first), (inside.describe(),
                                                                       outside.describe())


def _surrogate(word: str) -> bool:
    return any(0xD800 <= ord(char) <= 0xDFFF for char in word)


def _same(text: str, sandbox: Sandbox) -> list[str]:
    """stderr with the sandbox's path, ids and times left out."""
    text = text.replace(str(sandbox.root), "SANDBOX")
    text = re.sub(r"[0-7][0-9A-HJKMNP-TV-Z]{25}", "ULID", text)
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "TIME", text).splitlines()


def test_runnable_drops_follow_and_bounds_the_worker() -> None:
    assert runnable(["log", "tail", "--foll", "--follow=1", "-n", "1"]) == [
        "log", "tail", "-n", "1"]
    assert runnable(["worker"]) == ["worker", "--once"]



def test_a_command_still_running_at_its_limit_is_a_hang(template: Sandbox) -> None:
    """The watchdog behind "never a hang": `log tail --follow` waits by design, so the
    generator drops --follow; run here, it is caught at its limit and is a crash."""
    with fresh(template) as sandbox:
        outcome = fuzzkit.run_in_process(sandbox, "uwf", "log", "tail", "--follow",
                                         limit=0.5)
        assert outcome.hung
        with pytest.raises(fuzzkit.Crash, match="a hang"):
            fuzzkit.verdict(outcome, TARGET)
