"""The runs, threads and steps views keep the indexes their reads use, and only those
(docs/format.md, "Views"): every listing and lookup those views answer, traced as it
runs, is planned by SQLite on an index (never a scan of the whole table in no order),
and every declared index is in some read's plan. An index no read uses costs every
write and every replay (docs/benchmarks.md)."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest

from tests.conftest import Cli
from tests.viewkit import HASHES
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Outcome
from uwf.engine.viewstore import SqliteViewStore
from uwf.runs.events import RunArchived
from uwf.runs.rerun import _chosen
from uwf.store import Store
from uwf.threads.attempts import attempts, previous_attempts
from uwf.threads.events import (
    ThreadBlocked,
    ThreadEnded,
    ThreadStarted,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
)
from uwf.workflows.events import WorkflowRegistered

VIEWS = ("runs", "threads", "steps")
# Every listing of those views, as the CLI asks for it.
READS = (
    ("run", "list", "--limit", "5"),
    ("run", "search", "--text", "bug 13", "--limit", "5"),
    ("run", "list", "--status", "failed", "--limit", "5"),
    ("run", "list", "--status", "running", "--limit", "5"),
    ("run", "list", "--status", "stalled", "--limit", "5"),
    ("run", "list", "--status", "archived", "--limit", "5"),
    ("run", "list", "--repo", "/repo2", "--limit", "5"),
    ("run", "list", "--workflow", "flow1", "--limit", "5"),
    ("run", "list", "--workflow", HASHES[0], "--limit", "5"),
    ("run", "list", "--since", "2020-01-01", "--limit", "5"),
    ("history", "--limit", "5"),
    ("run", "counts"),
    ("thread", "list"),
    ("thread", "list", "--all"),
    ("thread", "list", "--status", "blocked"),
    ("thread", "list", "--workflow", "flow1"),
    ("thread", "list", "--workflow", HASHES[0]),
    ("registry", "show"),
)


def thread_id(number: int) -> str:
    return f"01JD{number:022d}"


def write_runs(store: Store, count: int) -> None:
    """`count` runs, ending in a mix of lifecycles, each with a step."""
    for number in range(count):
        subject = f"thread/{thread_id(number)}"
        name = f"flow{number % 3}"
        commands: list[list[EventData]] = [
            [ThreadStarted(HASHES[number % 3], name, HASHES[1], f"/repo{number % 4}",
                           inputs_digest=f"fix bug {number}")],
            [ThreadStepStarted(f"s{number:04d}", "planner", "go", "mock", 2**40)],
        ]
        kind = number % 4
        if kind == 0:
            commands.append([ThreadStepped(f"s{number:04d}", HASHES[2], "planner", "ok",
                                           HASHES[0])])
            commands.append([RunArchived("done")])
        elif kind == 1:
            commands.append([ThreadStepFailed(f"s{number:04d}", "planner", "exit", "boom"),
                             ThreadBlocked("no-agent", "none", "dev")])
        elif kind == 2:
            commands.append([ThreadEnded("killed")])
        for command in commands:
            store.journal.write(lambda _views, c=command, s=subject: Outcome(  # type: ignore[misc]
                [NewEvent(s, data) for data in c]))
    for number in range(3):
        store.journal.write(lambda _views, n=number: Outcome(  # type: ignore[misc]
            [NewEvent(f"workflow/flow{n}", WorkflowRegistered(f"flow{n}", HASHES[n]))]))


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the view stores' connections run from now on."""
    statements: list[str] = []
    connect = SqliteViewStore._connect

    def tracing(self: SqliteViewStore, create: bool) -> sqlite3.Connection | None:
        db = connect(self, create)
        if db is not None:
            db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(SqliteViewStore, "_connect", tracing)
    return statements


def plans(db: sqlite3.Connection, statements: list[str]) -> dict[str, list[str]]:
    """Each distinct SELECT of the runs, threads or steps table, and its plan's lines."""
    found: dict[str, list[str]] = {}
    for sql in dict.fromkeys(statements):
        if re.match(r"\s*SELECT", sql) and re.search(r'FROM "v_(runs|threads|steps)"', sql):
            found[sql] = [str(row[3]) for row in db.execute(f"EXPLAIN QUERY PLAN {sql}")]
    return found


def test_each_read_goes_by_an_index_and_each_index_is_read(
        env: Cli, traced: list[str]) -> None:
    store = Store.open(env.home)
    write_runs(store, 24)
    for argv in READS:
        for flags in ((), ("--json",)):
            # (Exit 1 is fine: the test's heads are in no CAS, which listings report.)
            result = env.run(*flags, *argv)
            assert result.code in (0, 1), (argv, result.err)
    # The lookups of a thread's steps: its last attempts (`thread show`), the refused
    # StepNodes before a step (a thread whose last step failed), a rerun's choice.
    views = store.read()
    failed = views.get("threads", thread_id(1))
    assert len(attempts(views, thread_id(1))) == 1
    assert previous_attempts(views, failed, "planner") == []
    assert attempts(views, thread_id(10))
    assert not attempts(views, thread_id(1)[:-1])
    assert _chosen(views, HASHES[2]) is not None
    store.close()
    db = sqlite3.connect(env.home / "views" / "views.sqlite3")
    planned = plans(db, traced)
    declared = {name for (name,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN "
        "('v_runs', 'v_threads', 'v_steps') AND name LIKE 'i\\_%' ESCAPE '\\'")}
    db.close()
    assert {re.search(r'FROM "v_(\w+)"', sql).group(1)  # type: ignore[union-attr]
            for sql in planned} == set(VIEWS)
    used: set[str] = set()
    for sql, lines in planned.items():
        # (The lines that walk the view's table; a full-text lookup's are the index's.)
        named: list[Any] = [re.search(r"USING (?:COVERING )?INDEX (\S+)", line)
                            for line in lines if re.match(r"(SCAN|SEARCH) v_", line)]
        # (A text search's count walks the full-text index's matches: not this test's.)
        assert "MATCH" in sql or (named and all(named)), f"read by no index: {sql} -> {lines}"
        used.update(match.group(1) for match in named if match is not None)
    assert declared <= used, f"indexes no read uses: {sorted(declared - used)}"


def test_the_rows_hold_no_field_at_its_default(env: Cli) -> None:
    """A run's, a thread's and a step's row leave out each field at its default (no
    `null`, `0`, `false`, `{}`): smaller rows, and the same state read back."""
    store = Store.open(env.home)
    write_runs(store, 4)
    projections = store.journal.projections
    for view in VIEWS:
        rows = list(store.views.scan(view))
        assert rows, view
        for _, raw in rows:
            assert not re.search(rb'":(null|0|false|\{\})[,}]', raw), (view, raw)
            assert projections[view].row(projections[view].decode(raw)).value == raw
    store.close()
