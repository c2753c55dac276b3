"""Fuzzing the view files: the SQLite file under `views/` damaged byte by byte (bits
flipped, pages overwritten, the file cut short, replaced with garbage, emptied,
removed, made a folder, a garbage WAL beside it) or row by row (a state, a column,
a count, a checkpoint or a signature set to any value; rows deleted or invented;
tables dropped).

Every read then exits cleanly (it rebuilds what is absent, or says the views are
unreadable or do not match, with `uwf registry rebuild` as the next action) and
never touches the log or the CAS; `registry verify` never passes a changed state;
a writer refuses with nothing written or writes a log that verifies; and
`registry rebuild` always succeeds, after which every read prints what it printed
before the damage (SPEC §5). docs/fuzzing.md has the budgets.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests import fuzzkit
from tests.conftest import EXAMPLE
from tests.fuzzkit import Sandbox, fresh

TARGET = "view files"
BINARY_TARGET = "view files (real binary)"
VIEWS = ("workflows", "threads", "runs", "queue", "sched", "history", "repos")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sandbox, list[tuple[str, ...]]]:
    """A store with every view holding rows; (the sandbox, the reads to run)."""
    sandbox = Sandbox.create(tmp_path_factory.mktemp("views") / "template")

    def ok(*argv: str) -> Any:
        done = fuzzkit.run_in_process(sandbox, "uwf", "--json", *argv)
        assert done.code == 0, done.describe()
        return json.loads(done.out)

    ok("workflow", "put", str(EXAMPLE))
    thread = ok("thread", "start", "solve-issue", "-p", "Fix the login bug")["thread"]
    ok("thread", "start", "solve-issue", "-p", "Another task")
    entry = ok("queue", "add", "--workflow", "solve-issue", "--prompt", "one")["entry"]["id"]
    ok("queue", "add", "--workflow", "solve-issue", "--prompt", "two", "--session", "s")
    ok("sched", "lease", "--limit", "1")
    ok("sched", "policy", "set", "--maxConcurrent", "2")
    ok("run", "archive", thread, "--reason", "done with it")
    reads = [("thread", "list", "--all"), ("thread", "show", thread), ("workflow", "list"),
             ("workflow", "show", "solve-issue"), ("queue", "list"), ("queue", "show", entry),
             ("run", "search"), ("run", "search", "--text", "login", "--include-archived", "false"),
             ("run", "show", thread), ("history",), ("sched", "plan", "--now", "0"),
             ("registry", "show")]
    return sandbox, reads


def views_file(sandbox: Sandbox) -> Path:
    return sandbox.home / "views" / "views.sqlite3"


# -- damage ------------------------------------------------------------------------------

INDEX = st.integers(0, 10**7)
ANY_VALUE = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(),
                      st.text(max_size=20), st.binary(max_size=20),
                      st.sampled_from([b"{}", b"[]", b"null", b'{"thread": 1}', b"\xff",
                                       "[]", "{}", "\x00", "nan"]))
OPS = st.one_of(
    st.tuples(st.just("flip"), INDEX, st.integers(0, 7)),
    st.tuples(st.just("overwrite"), INDEX, st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("zero-page"), st.integers(0, 64)),
    st.tuples(st.just("truncate"), INDEX),
    st.tuples(st.just("garbage"), st.binary(max_size=200)),
    st.tuples(st.just("remove")),
    st.tuples(st.just("folder")),
    st.tuples(st.just("wal"), st.binary(max_size=100)),
    st.tuples(st.just("set"), st.sampled_from(VIEWS), st.sampled_from(
        ["value", "key", "text", "c_status", "c_repo", "c_created_ms", "c_priority"]),
        INDEX, ANY_VALUE),
    st.tuples(st.just("delete-row"), st.sampled_from(VIEWS), INDEX),
    st.tuples(st.just("insert-row"), st.sampled_from(VIEWS), st.text(max_size=30), ANY_VALUE),
    st.tuples(st.just("checkpoint"), st.sampled_from([*VIEWS, ""]),  # "": the shared row
              st.sampled_from(["seq", "digest", "signature", "name"]), ANY_VALUE),
    st.tuples(st.just("counts"), st.sampled_from(["value", "n", "col", "view"]), INDEX,
              ANY_VALUE),
    st.tuples(st.just("drop"), st.sampled_from(
        [*(f"v_{view}" for view in VIEWS), "checkpoints", "counts", "f_runs"])),
)


def damage(sandbox: Sandbox, op: tuple[Any, ...]) -> bool:
    """Apply `op` to the views file; whether it changed a row's state (`registry verify`
    must then fail)."""
    path = views_file(sandbox)
    kind = op[0]
    if kind in ("flip", "overwrite", "zero-page", "truncate") and path.is_file():
        data = bytearray(path.read_bytes())
        if not data:
            return False
        if kind == "flip":
            data[op[1] % len(data)] ^= 1 << op[2]
        elif kind == "overwrite":
            at = op[1] % len(data)
            data[at:at + len(op[2])] = op[2]
        elif kind == "zero-page":
            start = (op[1] * 4096) % len(data)
            data[start:start + 4096] = bytes(len(data[start:start + 4096]))
        else:
            del data[op[1] % len(data):]
        path.write_bytes(bytes(data))
    elif kind == "garbage":
        path.parent.mkdir(exist_ok=True)
        if path.is_dir():
            shutil.rmtree(path)
        path.write_bytes(op[1])
    elif kind == "remove":
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    elif kind == "folder":
        if path.is_file():
            path.unlink()
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "wal":
        Path(f"{path}-wal").write_bytes(op[1])
    elif path.is_file():
        return _sql(path, op)
    return False


def _sql(path: Path, op: tuple[Any, ...]) -> bool:
    kind = op[0]
    changed = False
    try:
        db = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        if kind == "set":
            _, view, column, index, value = op
            rows = db.execute(f'SELECT rowid, "{column}" FROM "v_{view}" ORDER BY rowid'
                              ).fetchall()
            if rows:
                rowid, old = rows[index % len(rows)]
                db.execute(f'UPDATE "v_{view}" SET "{column}" = ? WHERE rowid = ?',
                           (value, rowid))
                changed = column == "value" and value != old
        elif kind == "delete-row":
            _, view, index = op
            rows = db.execute(f'SELECT rowid FROM "v_{view}" ORDER BY rowid').fetchall()
            if rows:
                db.execute(f'DELETE FROM "v_{view}" WHERE rowid = ?', rows[index % len(rows)])
                changed = True
        elif kind == "insert-row":
            _, view, key, value = op
            db.execute(f'INSERT INTO "v_{view}" (key, value) VALUES (?, ?)', (key, value))
            changed = True
        elif kind == "checkpoint":
            _, view, column, value = op
            db.execute(f'UPDATE checkpoints SET "{column}" = ? WHERE name = ?', (value, view))
        elif kind == "counts":
            _, column, index, value = op
            rows = db.execute("SELECT view, col, value FROM counts ORDER BY view, col, value"
                              ).fetchall()
            if rows:
                view_name, col, old = rows[index % len(rows)]
                db.execute(f'UPDATE counts SET "{column}" = ? WHERE view = ? AND col = ? AND '
                           "value = ?", (value, view_name, col, old))
        elif kind == "drop":
            db.execute(f'DROP TABLE IF EXISTS "{op[1]}"')
    except (sqlite3.Error, ValueError):  # ValueError: a damaged text the flips left
        return False  # the statement did not apply (a constraint, a missing table)
    finally:
        db.close()
    return changed


# -- the checks ----------------------------------------------------------------------------

def normalised(sandbox: Sandbox, outcome: fuzzkit.Outcome) -> str:
    return outcome.out.replace(str(sandbox.root), "SANDBOX")


def check(sandbox: Sandbox, reads: list[tuple[str, ...]], expected: list[str],
          ops: list[tuple[Any, ...]], target: str, *,
          run: fuzzkit.Runner = fuzzkit.run_in_process) -> list[int]:
    """Damage the views; the reads, verify, rebuild and the reads again; damage them
    again and write. The exit codes, in order."""
    changed = [damage(sandbox, op) for op in ops]
    codes = []
    for argv in reads:
        before = sandbox.snapshot()
        outcome = run(sandbox, "uwf", "--json", *argv)
        fuzzkit.verdict(outcome, target)
        fuzzkit.unchanged(before, sandbox, outcome)
        codes.append(outcome.code)
    before = sandbox.snapshot()
    verified = run(sandbox, "uwf", "--json", "registry", "verify")
    fuzzkit.verdict(verified, target)
    fuzzkit.unchanged(before, sandbox, verified)
    codes.append(verified.code)
    if changed == [True]:  # one op, which changed a state: verify must see it
        assert verified.code != 0, ("registry verify passed a changed state",
                                    verified.describe())
    rebuild(sandbox, target, run)
    for argv, want in zip(reads, expected, strict=True):
        again = run(sandbox, "uwf", "--json", *argv)
        assert again.code == 0, again.describe()
        assert normalised(sandbox, again) == want, (
            "a read after `registry rebuild` differs from before the damage", again.describe())
    for op in ops:
        damage(sandbox, op)
    before = sandbox.snapshot()
    wrote = run(sandbox, "uwf", "--json", "queue", "add", "--workflow", "solve-issue",
                "--prompt", "after the damage")
    fuzzkit.accepted_or_unchanged(sandbox, target, before, wrote, run=run)
    codes.append(wrote.code)
    rebuild(sandbox, target, run)
    return codes


def rebuild(sandbox: Sandbox, target: str, run: fuzzkit.Runner) -> None:
    """`registry rebuild` is the way out of any damage to the file: it succeeds, the log
    untouched. (A folder where the file goes is not deleted: refused in one line.)"""
    before = sandbox.snapshot()
    rebuilt = run(sandbox, "uwf", "--json", "registry", "rebuild")
    if fuzzkit.verdict(rebuilt, target) == "refused" and views_file(sandbox).is_dir():
        shutil.rmtree(views_file(sandbox))
        rebuilt = run(sandbox, "uwf", "--json", "registry", "rebuild")
    assert rebuilt.code == 0, rebuilt.describe()
    fuzzkit.unchanged(before, sandbox, rebuilt)


@pytest.fixture(scope="module")
def expected(template: tuple[Sandbox, list[tuple[str, ...]]]) -> list[str]:
    """What each read prints on the undamaged store."""
    sandbox_template, reads = template
    with fresh(sandbox_template) as sandbox:
        found = []
        for argv in reads:
            outcome = fuzzkit.run_in_process(sandbox, "uwf", "--json", *argv)
            assert outcome.code == 0, outcome.describe()
            found.append(normalised(sandbox, outcome))
        return found


@given(st.lists(OPS, min_size=1, max_size=3))
@fuzzkit.fuzz_settings(25)
@example([("remove",)])
@example([("garbage", b"")])
@example([("folder",)])
@example([("folder",), ("folder",)])
@example([("set", "threads", "value", 0, b"\xff")])
@example([("checkpoint", "threads", "seq", "not a number")])
def test_every_damaged_view_file_is_rebuilt_or_refused_in_one_line(
        template: tuple[Sandbox, list[tuple[str, ...]]], expected: list[str],
        ops: list[tuple[Any, ...]]) -> None:
    sandbox_template, reads = template
    with fuzzkit.trying(TARGET), fresh(sandbox_template) as sandbox:
        check(sandbox, reads, expected, ops, TARGET)


@given(st.lists(OPS, min_size=1, max_size=3))
@fuzzkit.fuzz_settings(3, binary=True)
def test_the_real_binary_reads_damaged_views_as_main_does(
        template: tuple[Sandbox, list[tuple[str, ...]]], expected: list[str],
        ops: list[tuple[Any, ...]]) -> None:
    sandbox_template, reads = template
    with (fuzzkit.trying(BINARY_TARGET), fresh(sandbox_template) as first,
          fresh(sandbox_template) as second):
        inside = check(first, reads, expected, ops, TARGET)
        outside = check(second, reads, expected, ops, BINARY_TARGET, run=fuzzkit.run_binary)
        assert outside == inside



@pytest.mark.parametrize("value", [1.5, -1, 2**62, "7"])
def test_a_checkpoint_out_of_place_is_rebuilt_or_refused_in_one_line(
        template: tuple[Sandbox, list[tuple[str, ...]]], expected: list[str],
        value: Any) -> None:
    sandbox_template, reads = template
    with fresh(sandbox_template) as sandbox:
        check(sandbox, reads, expected, [("checkpoint", "threads", "seq", value)], TARGET)


@pytest.mark.parametrize("value", ["not a number", b"\x01"])
def test_a_checkpoint_that_is_not_a_number_is_a_one_line_error(
        template: tuple[Sandbox, list[tuple[str, ...]]], expected: list[str],
        value: Any) -> None:
    sandbox_template, reads = template
    with fresh(sandbox_template) as sandbox:
        check(sandbox, reads, expected, [("checkpoint", "threads", "seq", value)], TARGET)


fuzzkit.known((TARGET, BINARY_TARGET),
              "test_a_write_whose_views_fail_after_it_is_not_reported_as_refused",
              "the store changed", "views are unreadable")


@pytest.mark.xfail(strict=True, raises=fuzzkit.DataChanged,
                   reason="uwf/queue/service.py add and uwf/queue/sched.py "
                   "set_policy re-read the views (store.read()) after journal.write has made "
                   "their events durable; when the views cannot take them, the command "
                   "exits 1 with 'views are unreadable' though the entry or policy was "
                   "recorded (a retry adds it twice). Fix belongs in queue.py / sched.py "
                   "(build the result from the decided events) or in journal.py")
@pytest.mark.parametrize(("table", "argv"), [
    ("v_queue", ("queue", "add", "--workflow", "solve-issue", "--prompt", "again")),
    ("v_sched", ("sched", "policy", "set", "--maxConcurrent", "3")),
])
def test_a_write_whose_views_fail_after_it_is_not_reported_as_refused(
        template: tuple[Sandbox, list[tuple[str, ...]]], table: str,
        argv: tuple[str, ...]) -> None:
    sandbox_template, _ = template
    with fresh(sandbox_template) as sandbox:
        damage(sandbox, ("drop", table))
        before = sandbox.snapshot()
        wrote = fuzzkit.run_in_process(sandbox, "uwf", "--json", *argv)
        fuzzkit.accepted_or_unchanged(sandbox, TARGET, before, wrote)


@pytest.mark.parametrize(("column", "value"), [("value", ""), ("value", "{"), ("n", "x"),
                                               ("value", b"\x80"), ("value", b"{}")])
def test_a_damaged_count_is_a_one_line_error(
        template: tuple[Sandbox, list[tuple[str, ...]]], expected: list[str], column: str,
        value: Any) -> None:
    sandbox_template, reads = template
    with fresh(sandbox_template) as sandbox:
        check(sandbox, reads, expected, [("counts", column, 0, value)], TARGET)


@pytest.mark.parametrize("table", [b"CREATE TABLE checkpoints", b'CREATE TABLE "v_threads"'])
def test_a_schema_that_is_not_utf8_is_a_one_line_error(
        template: tuple[Sandbox, list[tuple[str, ...]]], expected: list[str],
        table: bytes) -> None:
    sandbox_template, reads = template
    with fresh(sandbox_template) as sandbox:
        at = views_file(sandbox).read_bytes().find(table)
        assert at >= 0
        check(sandbox, reads, expected, [("flip", at + 8, 7)], TARGET)
