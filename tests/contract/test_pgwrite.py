"""A command on PostgreSQL in one round trip (uwf/engine/pgwrite.py, issue 31), against a
real server (tests/pgkit.py): one statement a command in steady state, the same bytes
and rows as the ordinary path (`log verify`, `registry verify`), and nothing decided on
rows another writer has changed since."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE
from tests.contract.test_pgcalls import called, check_verified, counted
from uwf.engine.events import NewEvent
from uwf.engine.pgwrite import OneCall
from uwf.errors import UsageError
from uwf.queue import sched
from uwf.queue.service import add_batch
from uwf.store import Store
from uwf.workflows.service import put_workflow

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def statements() -> Iterator[None]:
    original = psycopg.Cursor.execute
    yield
    psycopg.Cursor.execute = original


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    opened = Store.open(pg_url)
    put_workflow(opened, EXAMPLE)
    yield opened
    opened.close()


def answers(store: Store) -> list[str]:
    """What each `uwf_write` call answered from now on, and each fall back to the
    ordinary way ('ordinary')."""
    told: list[str] = []
    first: Any = store.journal.first
    assert isinstance(first, OneCall)
    write = first.write

    def spy(*args: Any, **kwargs: Any) -> Any:
        got = write(*args, **kwargs)
        told.append("ordinary" if got is None else "one call")
        return got

    first.write = spy  # type: ignore[method-assign]
    return told


def sent_by(store: Store) -> list[str]:
    """Every statement the store's connections send from now on (set-up aside): psycopg's,
    and those sent through libpq directly (`PgDatabase.prepared`), with their text."""
    sent = counted(store)
    db = store.journal.log.db  # type: ignore[attr-defined]
    prepared = db.prepared

    def spy(name: str, sql: str, values: Any) -> Any:
        sent.append(sql)
        return prepared(name, sql, values)

    db.prepared = spy
    return sent


def test_one_statement_a_command(store: Store, statements: None) -> None:
    sched.set_policy(store.journal, {"maxConcurrent": 5})  # the function is made on first use
    sent = sent_by(store)
    shown = sched.set_policy(store.journal, {"maxConcurrent": 6})
    assert [called(text) for text in sent] == ["SELECT uwf_write"]
    assert shown.policy.max_concurrent == 6
    assert sched.set_policy(store.journal, {"maxConcurrent": 7}).policy.max_concurrent == 7
    assert [called(text) for text in sent] == ["SELECT uwf_write"] * 2
    check_verified(store)


def test_the_write_is_prepared_once_a_connection(store: Store, statements: None) -> None:
    """The first call on a connection prepares the statement; a new connection (the
    server dropped the old one) prepares it again; the writes go on, chained."""
    sched.set_policy(store.journal, {"maxConcurrent": 5})
    db = store.journal.log.db  # type: ignore[attr-defined]
    names = [row[0] for row in db.reader.execute(
        "SELECT name FROM pg_prepared_statements WHERE name LIKE 'uwf_write_%'")]
    assert len(names) == 1
    db.reader.close()  # as a dropped connection: the next use connects again
    assert sched.set_policy(store.journal, {"maxConcurrent": 6}).policy.max_concurrent == 6
    again = [row[0] for row in db.reader.execute(
        "SELECT name FROM pg_prepared_statements WHERE name LIKE 'uwf_write_%'")]
    assert again == names
    check_verified(store)


def test_batches_and_counts_as_the_ordinary_path(store: Store, tmp_path: Path) -> None:
    """Entries added (the queue's kept counts move), leased and completed, a policy set,
    from two stores writing in turn: `registry verify` replays the log in Python and
    finds every row and count as the one-call writes left them."""
    told = answers(store)
    path = tmp_path / "batch.jsonl"
    for round_ in range(3):
        path.write_text("".join(json.dumps({"workflow": "solve-issue", "repo": str(tmp_path),
                                            "prompt": f"p{round_}-{n}"}) + "\n"
                                for n in range(4)))
        add_batch(store, str(path), store.settings)
        sched.set_policy(store.journal, {"maxConcurrent": 10 + round_})
    assert told.count("one call") >= 4
    leased = sched.lease(store, 2).leases
    sched.complete(store, leased[0].id, leased[0].lease_id)
    sched.set_policy(store.journal, {"maxConcurrent": 3})  # after the queue's own calls: a new look
    check_verified(store)


def test_another_writers_change_is_not_decided_on_stale_rows(store: Store, pg_url: str) -> None:
    """This store keeps the policy row from its own write; another store changes it; the
    same value set again here must be written (the kept row says it is so already)."""
    sched.set_policy(store.journal, {"maxConcurrent": 5})
    other = Store.open(pg_url)
    try:
        sched.set_policy(other.journal, {"maxConcurrent": 7})
    finally:
        other.close()
    shown = sched.set_policy(store.journal, {"maxConcurrent": 5})
    assert shown.policy.max_concurrent == 5
    assert sched.show_policy(store.read()).policy.max_concurrent == 5
    check_verified(store)


def test_a_refusal_is_worded_and_writes_nothing(store: Store) -> None:
    sched.set_policy(store.journal, {"maxConcurrent": 5})
    head = store.journal.log.head()
    with pytest.raises(UsageError):
        sched.set_policy(store.journal, {"maxConcurrent": 0})
    assert store.journal.log.head() == head


def test_a_steps_result_and_its_nodes_are_one_call(store: Store) -> None:
    """A step on PostgreSQL: its start and its result, with the new nodes the agent
    wrote as records in the same batch, each written by one call."""
    from uwf.config.configfile import Config, WorkflowConfig
    from uwf.threads.results import StepContext
    from uwf.threads.service import start_thread
    from uwf.threads.stepping import step_thread

    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    told = answers(store)

    def agent(ctx: StepContext) -> tuple[Any, str]:
        return {"status": "ready", "plan": "check the password"}, "planned"

    step_thread(store, thread, in_process=agent, config=Config(WorkflowConfig(), None, None),
                settings=store.settings)
    assert told == ["one call", "one call"]  # the step's start, then its result
    last = list(store.journal.log.read(store.journal.log.head().seq - 1))[-1]
    types = [envelope.type for envelope in store.journal.read_subject(f"thread/{thread}")]
    assert types[-1] == "thread.stepped", types
    batch = [store.journal.catalog.decode(line.raw) for line in store.journal.log.read(
        last.seq - store.journal.catalog.decode(last.raw).batch[1])]
    assert batch[0].type == "cas.node"
    check_verified(store)


def test_a_line_past_the_shared_checkpoint_goes_the_ordinary_way(store: Store,
                                                                 pg_url: str) -> None:
    """A line appended without the views moved (a writer of the log alone): the call
    finds its line's seq taken, its transaction is rolled back, and the command runs
    the ordinary way, which folds that line first; nothing of the call is left."""
    sched.set_policy(store.journal, {"maxConcurrent": 5})
    told = answers(store)
    head = store.journal.log.head()
    last = store.journal.catalog.decode(store.journal.log.line(head.seq) or b"")
    other = Store.open(pg_url)
    try:
        _, lines = other.journal.envelopes(head, [NewEvent(last.subject, last.data)],
                                           other.journal.clock())
        with other.journal.log.exclusive() as session:
            session.append(lines)
    finally:
        other.close()
    shown = sched.set_policy(store.journal, {"maxConcurrent": 6})
    assert told == ["ordinary"]
    assert shown.policy.max_concurrent == 6
    assert store.journal.log.head().seq == head.seq + 2
    assert sched.set_policy(store.journal, {"maxConcurrent": 7}).policy.max_concurrent == 7
    assert told == ["ordinary", "one call"]
    check_verified(store)
