"""A lease and a complete on PostgreSQL in one round trip (uwf/queue/pgcalls.py, issue 31),
against a real server (tests/pgkit.py): the server chooses what `sched._choose` chooses,
writes the bytes the Python fold writes (`registry verify` replays the log in Python and
compares every row, `log verify` checks every line), sends one statement a command in
steady state, and leaves every refusal to the ordinary path, which words it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import EXAMPLE
from tests.contract.test_pgentry import ENTRIES  # entries whose JSON tests a splice
from uwf.audit.verify import verify as verify_log
from uwf.engine.clock import parse_instant
from uwf.errors import NothingToDo, Rejected, UwfError
from uwf.queue import pgjson, sched
from uwf.queue.events import QueueCompleted, QueueLeased
from uwf.queue.projection import Lease, QueueEntry
from uwf.queue.service import add_batch
from uwf.runs.registry import verify as verify_views
from uwf.store import Store
from uwf.workflows.service import put_workflow

psycopg = pytest.importorskip("psycopg")

START = parse_instant("2026-03-02T09:00:00Z")


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(pg_url: str, clock: Clock) -> Iterator[Store]:
    opened = Store.open(pg_url, clock=clock)
    put_workflow(opened, EXAMPLE)
    yield opened
    opened.close()


def add(store: Store, tmp_path: Path, entries: list[dict[str, Any]]) -> list[str]:
    path = tmp_path / "batch.jsonl"
    path.write_text("".join(json.dumps({"workflow": "solve-issue", "repo": str(tmp_path),
                                        **entry}) + "\n" for entry in entries))
    return add_batch(store, str(path), store.settings).ids


def counted(store: Store) -> list[str]:
    """Every statement the store's connections send from now on (set-up aside)."""
    sent: list[str] = []
    original = psycopg.Cursor.execute

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return original(self, query, *args, **kwargs)

    psycopg.Cursor.execute = execute  # undone by the fixture below
    return sent


def called(statement: str) -> str:
    """A statement, the digest of a procedure's name and its arguments left out."""
    return re.sub(r"_[0-9a-f]{12}\(.*", "", statement, flags=re.DOTALL)


@pytest.fixture
def statements() -> Iterator[None]:
    original = psycopg.Cursor.execute
    yield
    psycopg.Cursor.execute = original


def check_verified(store: Store) -> None:
    views = verify_views(store)
    assert views.ok, views.differences[:3]
    log = verify_log(store)
    assert log.ok, log.problems[:3]


def test_one_statement_a_lease_and_a_complete(store: Store, tmp_path: Path,
                                              statements: None) -> None:
    add(store, tmp_path, [{"prompt": f"p{n}"} for n in range(3)])
    sched.set_policy(store.journal, {"maxConcurrent": 8})
    store.read()
    warm = sched.lease(store, 1).leases[0]  # the procedures are made on first use
    sched.complete(store, warm.id, warm.lease_id)
    sent = counted(store)
    leased = sched.lease(store, 1).leases[0]
    assert [called(text) for text in sent] == ["CALL uwf_lease"]
    record = sched.complete(store, leased.id, leased.lease_id)
    assert [called(text) for text in sent] == ["CALL uwf_lease", "CALL uwf_complete"]
    assert record.status == "drained"
    assert record.lease is None
    check_verified(store)


def answers(store: Store) -> list[str]:
    """What each server-side call answers from now on ('ok': decided there)."""
    told: list[str] = []
    log: Any = store.journal.log
    call = log.call

    def spy(procedure: Any, args: Any) -> Any:
        got = call(procedure, args)
        told.append("none" if got is None else got[0])
        return got

    log.call = spy
    return told


def predicted(store: Store, limit: int, session: str | None) -> list[str]:
    views = store.read()
    chosen, _ = sched._choose(views, store.clock(), limit, session, sched.current_policy(views))
    return [entry.id for entry in chosen]


def test_the_server_chooses_as_python_does(store: Store, clock: Clock, tmp_path: Path) -> None:
    """Pools, per-session ceilings, the overall cap, priorities, backoff and expiry: before
    each lease the Python selection is asked what it would grant; the server grants that."""
    add(store, tmp_path, [
        {"prompt": f"p{n} \u00e9 \x01 \"q\"", "priority": 100 + n % 3,
         **({"session": "a"} if n % 3 == 1 else {"session": "b"} if n % 3 == 2 else {}),
         **({"expectedArtifacts": ["x", "y"]} if n == 4 else {}),
         **({"broker": "mqtt://bot@broker.example:8883", "brokerPasswordEnv": "MQTT_PW",
             "topicPrefix": "jobs/\u00e9"} if n in (0, 5) else {})}
        for n in range(18)])
    sched.set_policy(store.journal, {"maxConcurrent": 2, "maxAttempts": 5})
    sched.set_policy(store.journal, {"maxConcurrent": 3}, session="a")
    told = answers(store)
    grants: list[Any] = []
    for limit, session in [(1, None), (4, None), (2, "a"), (3, "b"), (5, None)]:
        want = predicted(store, limit, session)
        if not want:
            with pytest.raises(NothingToDo):
                sched.lease(store, limit, session)
            continue
        got = sched.lease(store, limit, session)
        assert [lease.id for lease in got.leases] == want
        assert told[-1] == "ok"
        grants += got.leases
        clock.now += 1000
    assert len(grants) >= 7
    # A failed release puts one entry in backoff; complete one; let the rest expire.
    first, second, *_ = grants
    sched.release(store, first.id, first.lease_id, failed=True, reason="flaky")
    sched.complete(store, second.id, second.lease_id)
    sched.set_policy(store.journal, {"maxTotal": 4})
    for _ in range(2):
        want = predicted(store, 3, None)
        if want:
            assert [lease.id for lease in sched.lease(store, 3).leases] == want
            assert told[-1] == "ok"
    clock.now += 10 * 60 * 1000  # every lease expired: the ceilings count none of them
    sched.set_policy(store.journal, {"maxTotal": 0})
    want = predicted(store, 6, None)
    assert want
    assert [lease.id for lease in sched.lease(store, 6).leases] == want
    assert told[-1] == "ok"
    check_verified(store)


def test_pools_whose_labels_json_escapes_go_the_ordinary_way(store: Store,
                                                             tmp_path: Path) -> None:
    """The server reads the pools' labels as stored (json.dumps), unparsed: one with an
    escape (a quote, a backslash, past ASCII) sends a lease without a session the
    ordinary way, which grants what Python chooses; one of plain ASCII is the
    server's."""
    add(store, tmp_path, [{"prompt": f"p{n}", "priority": 100 - n, "session": session}
                          for n, session in enumerate(['x"y', "b\\s", "\u00e9"])])
    sched.set_policy(store.journal, {"maxConcurrent": 8})
    told = answers(store)
    for _ in range(3):
        want = predicted(store, 1, None)
        assert [lease.id for lease in sched.lease(store, 1).leases] == want
    assert told == ["label", "ok"] * 3  # the ordinary way's write is one call too
    add(store, tmp_path, [{"prompt": "plain", "session": "a b-c"}])
    want = predicted(store, 1, None)
    assert [lease.id for lease in sched.lease(store, 1).leases] == want
    assert told[-1] == "ok"
    check_verified(store)


def test_refusals_are_worded_by_the_ordinary_path(store: Store, clock: Clock,
                                                  tmp_path: Path) -> None:
    entry, _other = add(store, tmp_path, [{"prompt": "first"}, {"prompt": "second"}])
    sched.set_policy(store.journal, {"maxConcurrent": 1, "leaseTtlMs": 1000})
    told = answers(store)
    lease = sched.lease(store, 1).leases[0]
    with pytest.raises(NothingToDo, match="1 of 1 leases are active"):
        sched.lease(store, 1)
    with pytest.raises(Rejected, match="is not queue entry"):
        sched.complete(store, entry, "01J00000000000000000000000")
    with pytest.raises(UwfError, match="no-such-entry"):  # no row: refused in the server
        sched.complete(store, "no-such-entry", lease.lease_id)
    clock.now += 1000
    with pytest.raises(Rejected, match="expired"):
        sched.complete(store, entry, lease.lease_id)
    clock.now += 1
    with pytest.raises(NothingToDo, match="no queue entry is eligible"):
        sched.lease(store, 1, "nobody")
    assert told == ["ok", "none", "refused", "refused", "refused", "none"]
    check_verified(store)


def test_a_complete_records_its_run(store: Store, tmp_path: Path) -> None:
    add(store, tmp_path, [{"prompt": "with a run"}])
    lease = sched.lease(store, 1).leases[0]
    record = sched.complete(store, lease.id, lease.lease_id, run="01J0000000000000000000RUN0")
    assert record.run == "01J0000000000000000000RUN0"
    check_verified(store)


def test_a_clock_behind_the_log_acts_at_the_logs_last_instant(store: Store, clock: Clock,
                                                              tmp_path: Path) -> None:
    """A lease whose clock was read before another writer logged a later instant happens
    at that instant: each line's instant is at least the one before, and expiry is
    judged no earlier than any write before it."""
    add(store, tmp_path, [{"prompt": "p"}, {"prompt": "q"}])
    sched.set_policy(store.journal, {"maxConcurrent": 2})
    told = answers(store)
    first = sched.lease(store, 1)
    clock.now -= 5000
    second = sched.lease(store, 1)
    assert told == ["ok", "ok"]
    assert second.now == first.now
    assert second.leases[0].lease_expires_at == first.leases[0].lease_expires_at
    clock.now -= 5000
    record = sched.complete(store, second.leases[0].id, second.leases[0].lease_id)
    assert record.updated_at == first.now
    check_verified(store)


@pytest.mark.parametrize("entry", ENTRIES, ids=["escapes", "nested", "markers"])
def test_a_spliced_row_is_msgspecs(pg_url: str, entry: QueueEntry) -> None:
    """An entry's row edited in the server as a lease and a complete edit it
    (pgjson.Splice: fields replaced and read, no parse) is msgspec's bytes of the entry
    with those fields replaced; what it reads is what msgspec wrote."""
    new = msgspec.structs.replace(entry, updated_at="2026-03-02T09:00:00Z", status="leased",
                                  run='r "1"', lease=Lease("l2", 2**41, 4, "s"),
                                  next_eligible_at_ms=None, events=entry.events + 1)
    changed = ("updated_at", "status", "run", "lease", "next_eligible_at_ms", "events")
    edit = pgjson.Splice(QueueEntry, "r.raw", "p.at", changed=changed,
                         read=("attempts", "events", "run"))
    values = {name: f"%({name})s::text" for name in changed}
    params: dict[str, Any] = {name: msgspec.json.encode(getattr(new, name)).decode()
                              for name in changed}
    with psycopg.connect(pg_url, autocommit=True) as connection:
        row = connection.execute(
            f"SELECT {edit.value(values)}, {edit.read('attempts')}, {edit.read('events')}, "
            f"{edit.read('run')}, {edit.starts('lease', '%(held)s::text')} FROM (SELECT "
            f"%(raw)s::bytea AS raw) r, LATERAL (SELECT {edit.positions()} AS at) p",
            {**params, "raw": msgspec.json.encode(entry),
             "held": '{"id":"l",' if entry.lease else "null"}).fetchone()
    assert row is not None
    assert bytes(row[0]) == msgspec.json.encode(new)
    assert row[1:4] == (str(entry.attempts), str(entry.events),
                        msgspec.json.encode(entry.run).decode())
    assert row[4] is True


@pytest.mark.parametrize("data", [
    QueueLeased(lease_id="l1", expires_at_ms=2**41, attempt=2, session='s "\u00e9" \\'),
    QueueLeased(lease_id="l2", expires_at_ms=0, attempt=1),
    QueueCompleted(lease_id="l3", run="r\n"), QueueCompleted(lease_id="l4")],
    ids=["leased", "leased-no-session", "completed", "completed-no-run"])
def test_an_events_data_is_msgspecs(pg_url: str, data: QueueLeased | QueueCompleted) -> None:
    """An event's data concatenated in the server is the bytes msgspec writes."""
    values = {field: f"%({field})s" for field in data.__struct_fields__}
    sql = pgjson.json_text(type(data), values)
    with psycopg.connect(pg_url, autocommit=True) as connection:
        row = connection.execute(f"SELECT {sql}", {
            field: getattr(data, field) for field in data.__struct_fields__}).fetchone()
    assert row is not None
    assert row[0].encode() == msgspec.json.encode(data)


def test_a_log_held_too_long_is_store_busy(store: Store, tmp_path: Path) -> None:
    from uwf.engine.pglog import LOG_LOCK
    from uwf.errors import StoreBusy

    add(store, tmp_path, [{"prompt": "p"}])
    head = store.log.head()
    store.journal.log.db.lock_timeout = 0.05  # type: ignore[attr-defined]
    url = store.settings.store_url
    assert url is not None
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (LOG_LOCK,))
        with pytest.raises(StoreBusy, match="another writer held the log"):
            sched.lease(store, 1)
    assert store.log.head() == head


def test_a_damaged_view_fails_the_call_in_one_line_writing_nothing(store: Store,
                                                                    tmp_path: Path) -> None:
    from uwf.errors import Corrupt

    add(store, tmp_path, [{"prompt": "p"}])
    head = store.log.head()
    url = store.settings.store_url
    assert url is not None
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute('ALTER TABLE uwf_v_queue DROP COLUMN "c_ready_pool"')
    with pytest.raises(Corrupt, match="the server's uwf_lease failed") as failed:
        sched.lease(store, 1)
    assert "\n" not in failed.value.line()
    assert store.log.head() == head


def test_a_row_not_as_uwf_writes_it_goes_the_ordinary_way(store: Store, tmp_path: Path,
                                                           statements: None) -> None:
    """A row the server cannot edit by its bytes (valid JSON, not msgspec's: a hand
    edit) is left to the ordinary way, which reads any JSON and writes msgspec's."""
    _, second = add(store, tmp_path, [{"prompt": "p"}, {"prompt": "q"}])
    sched.set_policy(store.journal, {"maxConcurrent": 8})
    warm = sched.lease(store, 1).leases[0]  # the procedures are made on first use
    sched.complete(store, warm.id, warm.lease_id)
    url = store.settings.store_url
    assert url is not None
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("UPDATE uwf_v_queue SET value = convert_to(replace(convert_from("
                           "value, 'UTF8'), ',\"attempts\":', ', \"attempts\": '), 'UTF8') WHERE "
                           "key = %s", (second,))
    sent = counted(store)
    leased = sched.lease(store, 1).leases[0]
    assert leased.id == second
    assert called(sent[0]) == "CALL uwf_lease"
    assert len(sent) > 1  # refused by the server: then the ordinary way
    sent.clear()
    sched.complete(store, leased.id, leased.lease_id)  # its row is msgspec's again
    assert [called(text) for text in sent] == ["CALL uwf_complete"]
    check_verified(store)


def backends(url: str) -> int:
    """The server's backends connected to the store's database, this look's aside."""
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                 "current_database() AND pid <> pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def test_a_process_of_one_call_commands_opens_one_connection(store: Store, pg_url: str,
                                                            tmp_path: Path) -> None:
    """The writer's connection is made on the first section that needs it: a store whose
    commands each go in one call never opens it (each costs the server a backend)."""
    add(store, tmp_path, [{"prompt": f"p{n}"} for n in range(3)])
    sched.set_policy(store.journal, {"maxConcurrent": 8})
    warm = sched.lease(store, 1).leases[0]  # the procedures are made on first use
    sched.complete(store, warm.id, warm.lease_id)
    before = backends(pg_url)
    worker = Store.open(pg_url)
    try:
        worker.read()
        leased = sched.lease(worker, 1).leases[0]
        sched.complete(worker, leased.id, leased.lease_id)
        sched.set_policy(worker.journal, {"maxConcurrent": 9})
        assert backends(pg_url) == before + 1
    finally:
        worker.close()
    check_verified(store)
