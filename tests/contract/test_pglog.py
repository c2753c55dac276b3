"""The PostgreSQL log (uwf/engine/pglog.py) beyond its contract (tests/contract/test_contract.py):
OS processes, each with its own database connections, appending at once through the
writers' section; a writer killed mid-section; a lock held past the timeout; what
`problems()` finds when rows are edited behind the log's back; reads in chunks."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT
from tests.logkit import append, envelopes
from uwf.engine.events import GENESIS_PREV, Envelope, NewEvent, StoreCreated, digest, encode_line
from uwf.engine.log import GENESIS, Checkpoint
from uwf.engine.pgdb import PgDatabase
from uwf.engine.pglog import PgLog
from uwf.errors import StoreBusy
from uwf.store import event_catalog
from uwf.workflows.events import WorkflowRegistered

CATALOG = event_catalog()
HASH = "70D2DHWNFR6T8"

# A writer in its own process. `append NAME BATCHES READY GO`: waits for GO, then
# appends BATCHES batches of 1 to 3 lines, each line naming NAME and its batch, lingering
# in the section between reading the head and appending (any other writer that got in
# meanwhile would take the same seq). `hold`: appends one batch of two lines, says
# "appended", and stays in the section until a line comes on stdin.
CHILD = r"""
import pathlib, sys, time
from tests.logkit import envelopes
from uwf.engine.events import NewEvent, encode_line
from uwf.engine.pgdb import PgDatabase
from uwf.engine.pglog import PgLog
from uwf.workflows.events import WorkflowRegistered

def batch(head, name, index, size):
    return [encode_line(e) for e in envelopes(head, [
        NewEvent(f"workflow/{name}-{index}", WorkflowRegistered(f"{name}-{index}-{k}",
                                                                "70D2DHWNFR6T8"))
        for k in range(size)])]

mode, url = sys.argv[1], sys.argv[2]
log = PgLog(PgDatabase(url, lock_timeout=30))
if mode == "append":
    name, batches, ready, go = sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
    pathlib.Path(ready).touch()
    while not pathlib.Path(go).exists():
        time.sleep(0.005)
    for index in range(batches):
        with log.exclusive() as session:
            head, _ = session.recover()
            time.sleep(0.003)
            session.append(batch(head, name, index, 1 + index % 3))
    print("done", flush=True)
else:
    with log.exclusive() as session:
        head, _ = session.recover()
        session.append(batch(head, "held", 0, 2))
        print("appended", flush=True)
        sys.stdin.readline()
    print("committed", flush=True)
"""


@pytest.fixture
def db(pg_url: str) -> Iterator[PgDatabase]:
    database = PgDatabase(pg_url, lock_timeout=10)
    yield database
    database.close()


def registered(name: str) -> NewEvent:
    return NewEvent(f"workflow/{name}", WorkflowRegistered(name, HASH))


def started(log: PgLog) -> Checkpoint:
    """A store's first line, then one batch: seq 2 is the head."""
    append(log, NewEvent("store", StoreCreated(format=1)))
    return append(log, registered("first"))


def chained(log: PgLog) -> list[Envelope]:
    """Every line, checked as `uwf log verify` and the journal's fold check them: seqs
    from 1 without a gap, each prev the digest of the line before, each batch whole
    and never mixed with another (one subject per batch here)."""
    events: list[Envelope] = []
    prev = GENESIS_PREV
    for expected, line in enumerate(log.read(), 1):
        event = CATALOG.decode(line.raw)
        assert (line.seq, event.seq) == (expected, expected)
        assert event.prev == prev, f"chain broken at seq {expected}"
        prev = digest(line.raw)
        events.append(event)
    open_batch: list[Envelope] = []
    for event in events:
        k, n = event.batch
        assert k == len(open_batch) + 1, f"seq {event.seq}: batch {event.batch} out of turn"
        assert all(member.subject == event.subject for member in open_batch)
        open_batch = [] if k == n else [*open_batch, event]
    assert not open_batch, "the log ends inside a batch"
    assert log.head() == (Checkpoint(events[-1].seq, prev) if events else GENESIS)
    return events


def child(url: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen([sys.executable, "-c", CHILD, *args[:1], url, *args[1:]],
                            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def holding(url: str) -> subprocess.Popen[str]:
    """A process inside the writers' section, its batch appended and not committed."""
    holder = child(url, "hold")
    assert holder.stdout is not None
    said = holder.stdout.readline()
    if said != "appended\n":  # pragma: no cover - the child's failure, shown
        holder.kill()
        pytest.fail(f"the holder said {said!r}: {holder.communicate()[1]}")
    return holder


def test_two_processes_appending_at_once_never_interleave_or_reuse_a_seq(
        db: PgDatabase, pg_url: str, tmp_path: Path) -> None:
    log = PgLog(db)
    started(log)
    go = tmp_path / "go"
    batches = 40
    writers = [child(pg_url, "append", name, str(batches), str(tmp_path / name), str(go))
               for name in ("a", "b")]
    deadline = time.monotonic() + 60
    while not all((tmp_path / name).exists() for name in ("a", "b")):
        assert time.monotonic() < deadline, [writer.poll() for writer in writers]
        time.sleep(0.01)
    go.touch()
    results = [writer.communicate(timeout=120) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], results
    events = chained(log)
    sizes = Counter(event.subject for event in events[2:])
    assert sizes == {f"workflow/{name}-{index}": 1 + index % 3
                     for name in ("a", "b") for index in range(batches)}
    # The writers really raced: the log alternates between them.
    turns = [event.subject.split("/")[1][0] for event in events[2:] if event.batch[0] == 1]
    switches = sum(1 for one, two in itertools.pairwise(turns) if one != two)
    assert switches >= 1, turns


def test_a_writer_killed_mid_section_leaves_nothing_and_the_next_proceeds(
        db: PgDatabase, pg_url: str) -> None:
    log = PgLog(db)
    before = started(log)
    holder = holding(pg_url)
    try:
        # Readers take no lock, and see only what is committed.
        assert log.head() == before
        assert [line.seq for line in log.read()] == [1, 2]
        assert log.line(3) is None
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    with log.exclusive() as session:
        assert session.tail() == before
        head, repairs = session.recover()
        assert (head, repairs) == (before, [])  # nothing torn to cut: nothing to record
        after = session.append([encode_line(e) for e in envelopes(head, [registered("next")])])
    assert after.seq == 3
    events = chained(log)
    assert [event.subject for event in events] == ["store", "workflow/first", "workflow/next"]


def test_a_lock_held_longer_than_the_timeout_is_store_busy(db: PgDatabase, pg_url: str) -> None:
    started(PgLog(db))
    impatient = PgDatabase(pg_url, lock_timeout=0.3)
    log = PgLog(impatient)
    holder = holding(pg_url)
    try:
        began = time.monotonic()
        with pytest.raises(StoreBusy) as busy, log.exclusive():
            pass
        waited = time.monotonic() - began
        assert 0.3 <= waited < 5, waited
        assert busy.value.line() == ("store is busy: another writer held the log for 0.3s; "
                                     "retry, or raise UWF_LOCK_TIMEOUT")
    finally:
        out, err = holder.communicate("\n", timeout=30)  # the holder commits and leaves
    assert (holder.returncode, out) == (0, "committed\n"), err
    # The refused section was rolled back cleanly: the same connection writes now.
    with log.exclusive() as session:
        head, _ = session.recover()
        assert head.seq == 4  # after the holder's batch
        session.append([encode_line(e) for e in envelopes(head, [registered("late")])])
    assert [event.subject for event in chained(log)][2:] == [
        "workflow/held-0", "workflow/held-0", "workflow/late"]
    impatient.close()


def test_a_section_that_raises_after_appending_leaves_nothing(db: PgDatabase) -> None:
    log = PgLog(db)
    before = started(log)

    def failing() -> None:
        with log.exclusive() as session:
            head, _ = session.recover()
            session.append([encode_line(e) for e in envelopes(head, [registered("gone")])])
            assert log.head().seq == 3  # the section reads what it wrote
            raise RuntimeError("the command failed after its append")

    with pytest.raises(RuntimeError, match="after its append"):
        failing()
    assert log.head() == before
    assert log.line(3) is None
    append(log, registered("kept"))
    assert [event.subject for event in chained(log)][2:] == ["workflow/kept"]


def test_reads_cross_chunk_boundaries_in_order(db: PgDatabase) -> None:
    log = PgLog(db)
    head = started(log)
    lines = [encode_line(e) for e in envelopes(head, [NewEvent("workflow/big", WorkflowRegistered(
        f"w{n}", HASH)) for n in range(600)])]
    with log.exclusive() as session:
        session.recover()
        session.append(lines)
    assert [line.seq for line in log.read()] == list(range(1, 603))
    assert [line.raw for line in log.read(2)] == lines
    assert {type(line.raw) for line in [*log.read(), *log.read_reverse()]} == {bytes}
    assert [line.seq for line in log.read(450)] == list(range(451, 603))
    assert [line.seq for line in log.read_reverse()] == list(range(602, 0, -1))
    assert log.line(300) == lines[297]
    assert log.describe() == {"rows": 602,
                              "bytes": sum(len(line.raw) + 1 for line in log.read())}
    assert len(chained(log)) == 602


def test_problems_name_rows_removed_or_changed_in_place(db: PgDatabase, pg_url: str) -> None:
    log = PgLog(db)
    started(log)
    for name in ("a", "b", "c"):
        append(log, registered(name))
    assert log.problems() == []
    with psycopg.connect(pg_url, autocommit=True) as editor:
        editor.execute("DELETE FROM uwf_events WHERE seq = 3")
        editor.execute("UPDATE uwf_events SET line = line || '  '::bytea WHERE seq = 4")
    assert [(p.seq, p.where, p.number, p.problem) for p in log.problems()] == [
        (4, "uwf_events", 4, "seq 4 follows 2: 1 row(s) missing before it"),
    ]
    with psycopg.connect(pg_url, autocommit=True) as editor:
        editor.execute("UPDATE uwf_events SET line = line || '  '::bytea WHERE seq = 5")
    assert [problem.problem for problem in log.problems()][1:] == [
        f"the row ends at byte {log.describe()['bytes']}, its line at "
        f"{log.describe()['bytes'] + 2}: the line was changed in place"]


def test_a_line_with_a_newline_is_refused_by_the_table_too(pg_url: str, db: PgDatabase) -> None:
    PgLog(db)
    with psycopg.connect(pg_url, autocommit=True) as editor, pytest.raises(
            psycopg.errors.CheckViolation):
        editor.execute("INSERT INTO uwf_events VALUES (1, %s, 3)", (b"{\n}",))


@pytest.mark.parametrize(("durable", "setting"), [(True, "on"), (False, "off")])
def test_a_log_that_is_not_durable_does_not_wait_for_the_flush(
        db: PgDatabase, durable: bool, setting: str) -> None:
    log = PgLog(db, durable=durable)
    with log.exclusive():
        assert db.connection().execute("SHOW synchronous_commit").fetchone() == (setting,)
    assert db.reader.execute("SHOW synchronous_commit").fetchone() == ("on",)
