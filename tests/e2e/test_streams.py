"""Streams on the journal, on the in-memory and the file store alike: a subject's events
read through the stream index (`read_subject`), its version, and writes that state the
versions they decided on (optimistic concurrency: `Conflict` when a subject moved)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT, Cli
from tests.contract import test_views
from tests.logkit import append, envelopes
from tests.viewkit import HASHES
from uwf.engine.events import Envelope, LogRepaired, NewEvent, encode_line
from uwf.engine.journal import Outcome, Views
from uwf.engine.viewspec import STREAMS
from uwf.errors import EXIT_REJECTED, Conflict, Corrupt
from uwf.store import Store, event_catalog
from uwf.threads.events import ThreadEnded, ThreadStarted
from uwf.workflows.events import WorkflowRegistered

T = "thread/01JD0000000000000000000001"
CATALOG = event_catalog()
# The memory and the file store alike (and PostgreSQL views), as the views' tests
# take them.
store = test_views.store


def registered(name: str, hash_: str = HASHES[0], previous: str | None = None) -> NewEvent:
    return NewEvent(f"workflow/{name}", WorkflowRegistered(name, hash_, previous))


def write(store: Store, *events: NewEvent, expected: dict[str, int] | None = None) -> None:
    store.journal.write(lambda _views: Outcome(list(events)), expected=expected)


def seqs(events: Iterator[Envelope]) -> list[int]:
    return [event.seq for event in events]


def by_scan(store: Store, subject: str) -> list[int]:
    """What the stream index must answer: the log read whole, filtered by subject."""
    return [event.seq for event in (CATALOG.decode(line.raw) for line in store.log.read())
            if event.subject == subject]


def subjects(store: Store) -> set[str]:
    return {CATALOG.decode(line.raw).subject for line in store.log.read()}


def index(store: Store) -> dict[str, list[int]]:
    """The stream index as persisted (the writes' held fold committed first:
    uwf/engine/held.py), every subject of the log."""
    store.journal.flush()
    return {subject: store.views.stream(subject) for subject in sorted(subjects(store))}


# -- reading a subject -------------------------------------------------------------

def test_read_subject_is_the_subjects_events_in_log_order(store: Store) -> None:
    write(store, registered("a"))  # seq 1 store.created, 2
    write(store, registered("b"), registered("a", HASHES[1], HASHES[0]))  # 3, 4
    write(store, registered("b", HASHES[2], HASHES[0]))  # 5
    write(store, registered("a", HASHES[2], HASHES[1]))  # 6
    read = store.journal.read_subject
    assert seqs(read("workflow/a")) == [2, 4, 6] == by_scan(store, "workflow/a")
    assert seqs(read("workflow/b")) == [3, 5]
    assert [e.data.hash for e in read("workflow/a")] == [HASHES[0], HASHES[1], HASHES[2]]
    assert seqs(read("workflow/a", after=2)) == [4, 6]
    assert seqs(read("workflow/a", after=3)) == [4, 6]
    assert seqs(read("workflow/a", after=6)) == []
    assert seqs(read("workflow/a", reverse=True)) == [6, 4, 2]
    assert seqs(read("workflow/a", after=2, reverse=True)) == [6, 4]
    assert seqs(read("store")) == [1]
    assert list(read("workflow/none")) == []
    assert store.journal.version("workflow/a") == 6
    assert store.journal.version("workflow/b") == 5
    assert store.journal.version("workflow/none") == 0


def test_an_empty_store_has_empty_streams(store: Store) -> None:
    assert list(store.journal.read_subject("workflow/a")) == []
    assert store.journal.version("workflow/a") == 0
    assert store.log.head().seq == 0  # reading wrote nothing


def test_read_subject_answers_from_the_index_not_the_log(store: Store,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    for number in range(20):
        write(store, registered(f"w{number % 4}"))
    monkeypatch.setattr(store.log, "read_reverse", None)  # no scan from the end
    reads: list[int] = []
    line = store.log.line

    def counted(seq: int) -> bytes | None:
        reads.append(seq)
        return line(seq)

    monkeypatch.setattr(store.log, "line", counted)
    assert seqs(store.journal.read_subject("workflow/w1")) == by_scan(store, "workflow/w1")
    # The subject's five events, and the index's checkpoint matched with the log.
    assert sorted(set(reads)) == sorted({*by_scan(store, "workflow/w1"),
                                         store.log.head().seq})


def test_events_the_index_has_not_taken_are_read_from_the_log(store: Store) -> None:
    write(store, registered("a"))
    append(store.log, registered("a", HASHES[1], HASHES[0]))  # past the journal: seq 3
    assert store.views.stream("workflow/a") == [2]
    assert seqs(store.journal.read_subject("workflow/a")) == [2, 3]
    assert seqs(store.journal.read_subject("workflow/a", reverse=True)) == [3, 2]
    assert seqs(store.journal.read_subject("workflow/a", after=2)) == [3]
    assert store.journal.version("workflow/a") == 3
    store.read()  # a read catches the index up with the views
    assert store.views.stream("workflow/a") == [2, 3]
    assert store.views.checkpoints()[STREAMS] == store.log.head()


def test_a_batch_still_being_written_is_not_read(store: Store) -> None:
    write(store, registered("a"))
    with store.log.exclusive() as session:
        head, _ = session.recover()
        batch = envelopes(head, [registered("a", HASHES[1]), registered("b")])
        session.append([encode_line(batch[0])])  # [1, 2] without its [2, 2]
    assert seqs(store.journal.read_subject("workflow/a")) == [2]
    assert store.journal.version("workflow/a") == 2


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3),
                min_size=1, max_size=10))
def test_the_index_is_the_log_filtered_by_subject_incrementally_and_rebuilt(
        store: Store, batches: list[list[str]]) -> None:
    store.journal.rebuild()
    for batch in batches:
        write(store, *(registered(name) for name in batch))
    incremental = index(store)
    assert incremental == {subject: by_scan(store, subject) for subject in subjects(store)}
    store.journal.rebuild()
    assert index(store) == incremental
    for subject, found in incremental.items():
        assert seqs(store.journal.read_subject(subject)) == found
        assert seqs(store.journal.read_subject(subject, reverse=True)) == found[::-1]


def test_views_deleted_or_from_an_older_uwf_get_the_index_on_the_next_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    for number in range(12):
        write(store, registered(f"w{number % 3}"))
    before = index(store)
    views = {name: list(store.views.scan(name)) for name in store.journal.projections}
    store.close()
    # The views of an older uwf: no stream index at all.
    db = sqlite3.connect(tmp_path / "s" / "views" / "views.sqlite3", isolation_level=None)
    db.execute("DROP TABLE streams")
    db.execute("DELETE FROM checkpoints WHERE name = ?", (STREAMS,))
    db.close()
    again = Store.open(tmp_path / "s")
    assert again.journal.freshness().status == "valid"  # the views themselves are current
    assert seqs(again.journal.read_subject("workflow/w1")) == before["workflow/w1"]
    assert index(again) == before
    assert {name: list(again.views.scan(name)) for name in again.journal.projections} == views
    again.close()


def test_an_index_table_gone_under_its_checkpoint_is_a_damaged_view(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    write(store, registered("a"))
    store.close()
    db = sqlite3.connect(tmp_path / "s" / "views" / "views.sqlite3", isolation_level=None)
    db.execute("DROP TABLE streams")
    db.close()
    again = Store.open(tmp_path / "s")
    with pytest.raises(Corrupt, match="views are unreadable"):
        list(again.journal.read_subject("workflow/a"))
    again.journal.rebuild()
    assert seqs(again.journal.read_subject("workflow/a")) == [2]
    again.close()


def test_an_index_that_names_another_subjects_line_fails_closed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    write(store, registered("a"), registered("b"))
    db = sqlite3.connect(tmp_path / "s" / "views" / "views.sqlite3", isolation_level=None)
    db.execute("INSERT INTO streams VALUES ('workflow/a', 3)")  # seq 3 is workflow/b's
    db.close()
    with pytest.raises(Corrupt, match="views do not match the log at seq 3"):
        list(store.journal.read_subject("workflow/a"))
    store.journal.rebuild()
    assert seqs(store.journal.read_subject("workflow/a")) == [2]
    store.close()


def test_a_rewritten_log_fails_closed_for_streams_too(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    write(store, registered("a"))
    write(store, registered("b"))
    segment = sorted((tmp_path / "s" / "events").glob("*.jsonl"))[0]
    segment.write_bytes(b"".join(segment.read_bytes().splitlines(keepends=True)[:-1]))
    with pytest.raises(Corrupt, match="views do not match the log at seq 3"):
        list(store.journal.read_subject("workflow/a"))
    store.close()


def test_a_torn_tail_is_not_read_and_its_repair_is_indexed(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    write(store, registered("a"))
    segment = sorted((tmp_path / "s" / "events").glob("*.jsonl"))[-1]
    with segment.open("ab") as handle:
        handle.write(b'{"seq":3,"id":"01JD","ts":"x","type":"workflow.registered",'
                     b'"subject":"workflow/a"')
    assert seqs(store.journal.read_subject("workflow/a")) == [2]
    write(store, registered("a", HASHES[1], HASHES[0]))  # repairs first: seq 3, then 4
    assert seqs(store.journal.read_subject("workflow/a")) == [2, 4]
    repairs = list(store.journal.read_subject("store"))
    assert [e.type for e in repairs] == ["store.created", "log.repaired"]
    assert isinstance(repairs[1].data, LogRepaired)
    assert index(store) == {s: by_scan(store, s) for s in subjects(store)}
    store.journal.rebuild()
    assert seqs(store.journal.read_subject("store")) == [1, 3]
    store.close()


def test_registry_rebuild_rebuilds_the_index(cli: Cli, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(cli.home)
    for number in range(9):
        write(store, registered(f"w{number % 2}"))
    before = index(store)
    store.close()
    db = sqlite3.connect(cli.home / "views" / "views.sqlite3", isolation_level=None)
    db.execute("DELETE FROM streams WHERE seq > 3")  # an index that lost rows
    db.close()
    rebuilt = cli.run("--json", "registry", "rebuild")
    assert rebuilt.code == 0, rebuilt.err
    again = Store.open(cli.home)
    assert index(again) == before
    assert again.views.checkpoints()[STREAMS] == again.log.head()
    again.close()


def test_the_registry_shows_the_same_views_as_before(store: Store) -> None:
    write(store, registered("a"))
    assert set(store.journal.freshness().views) == set(store.journal.projections)
    assert STREAMS not in store.journal.projections
    assert STREAMS in store.views.checkpoints()


# -- expected versions ---------------------------------------------------------------

def test_a_write_at_the_expected_version_is_written(store: Store) -> None:
    write(store, registered("a"), expected={"workflow/a": 0})  # a new subject is at 0
    version = store.journal.version("workflow/a")
    assert version == 2
    write(store, registered("a", HASHES[1], HASHES[0]), expected={"workflow/a": version})
    assert store.journal.version("workflow/a") == 3


def test_a_write_whose_subject_moved_is_refused_before_decide(store: Store) -> None:
    write(store, registered("a"))
    seen = store.journal.version("workflow/a")
    write(store, registered("a", HASHES[1], HASHES[0]))  # another writer moves it
    head = store.log.head()
    decided: list[bool] = []

    def decide(_views: Views) -> Outcome[None]:
        decided.append(True)
        return Outcome([registered("a", HASHES[2], HASHES[0])])

    with pytest.raises(Conflict) as refused:
        store.journal.write(decide, expected={"workflow/a": seen})
    assert refused.value.exit_code == EXIT_REJECTED
    assert refused.value.line() == (
        "workflow/a has moved since the command read it (it expected version 2; the log is "
        "at 3): nothing was written; read it again, then retry")
    assert decided == []
    assert store.log.head() == head
    with pytest.raises(Conflict):  # a subject expected new that has events
        write(store, registered("b"), registered("a"), expected={"workflow/a": 0})
    assert store.log.head() == head


def test_every_expected_subject_must_be_where_the_write_saw_it(store: Store) -> None:
    write(store, registered("a"), registered("b"))
    a, b = store.journal.version("workflow/a"), store.journal.version("workflow/b")
    write(store, registered("b", HASHES[1], HASHES[0]))
    with pytest.raises(Conflict, match="workflow/b"):
        write(store, registered("a", HASHES[1], HASHES[0]),
              expected={"workflow/a": a, "workflow/b": b})
    write(store, registered("a", HASHES[1], HASHES[0]),
          expected={"workflow/a": a, "workflow/b": store.journal.version("workflow/b")})


def test_write_at_takes_expected_versions_too(store: Store) -> None:
    store.journal.write_at(lambda _views, _now: Outcome([registered("a")]),
                           expected={"workflow/a": 0})
    with pytest.raises(Conflict):
        store.journal.write_at(lambda _views, _now: Outcome([registered("a")]),
                               expected={"workflow/a": 0})


def test_expected_versions_see_events_the_index_has_not_taken(store: Store) -> None:
    write(store, registered("a"))
    append(store.log, registered("a", HASHES[1], HASHES[0]))  # seq 3, past the journal
    with pytest.raises(Conflict, match="the log is at 3"):
        write(store, registered("a", HASHES[2], HASHES[0]), expected={"workflow/a": 2})
    write(store, registered("a", HASHES[2], HASHES[1]), expected={"workflow/a": 3})


def test_writes_without_expected_versions_are_unchanged(store: Store) -> None:
    write(store, registered("a"))
    write(store, registered("a", HASHES[1], HASHES[0]))  # no version stated: no check
    assert seqs(store.journal.read_subject("workflow/a")) == [2, 3]


RACER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from uwf.engine.events import NewEvent
    from uwf.engine.journal import Outcome
    from uwf.errors import Conflict
    from uwf.store import Store
    from uwf.workflows.events import WorkflowRegistered

    home, name, new_hash, ready, go = sys.argv[1:6]
    store = Store.open(home)
    subject = "workflow/" + name
    events = list(store.journal.read_subject(subject))
    version = events[-1].seq if events else 0
    previous = events[-1].data.hash if events else None
    Path(ready).touch()
    while not Path(go).exists():
        time.sleep(0.01)
    try:
        store.journal.write(lambda _views: Outcome(
            [NewEvent(subject, WorkflowRegistered(name, new_hash, previous))]),
            expected={subject: version})
    except Conflict as exc:
        print("conflict", exc.line())
        sys.exit(exc.exit_code)
    print("wrote")
""")


def test_two_processes_deciding_on_the_same_version_one_wins(tmp_path: Path) -> None:
    """Both read workflow/a at the same version, then both write the pointer's next
    hash with `previous` as they read it. Without versions both land and `log verify`
    finds the second `previous` wrong; with them one wins and one is refused."""
    home = tmp_path / "s"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("UWF_")},
           "UWF_DURABILITY": "none", "PYTHONPATH": os.pathsep.join(
               [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    opened = Store.open(home)
    hashes = [opened.cas.put_text(text) for text in ("first", "second", "third")]
    opened.journal.write(lambda _views: Outcome([registered("a", hashes[0])]))
    opened.close()
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    go = tmp_path / "go"
    racers = [subprocess.Popen(
        [sys.executable, str(script), str(home), "a", hashes[1 + number],
         str(tmp_path / f"ready{number}"), str(go)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for number in range(2)]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready{n}").exists() for n in range(2)):
        assert time.monotonic() < deadline, [r.poll() for r in racers]
        time.sleep(0.01)
    go.touch()
    results = [racer.communicate(timeout=60) for racer in racers]
    codes = sorted(racer.returncode for racer in racers)
    assert codes == [0, EXIT_REJECTED], results
    outs = sorted(out for out, _ in results)
    assert outs[0].startswith("conflict workflow/a has moved since the command read it "
                              "(it expected version 2; the log is at 3)"), results
    assert outs[1] == "wrote\n"
    verify = Cli(home, {**env, "UWF_HOME": str(home)}).run("--json", "log", "verify")
    assert verify.code == 0, verify.out + verify.err
    assert json.loads(verify.out)["ok"] is True
    again = Store.open(home)
    assert [e.type for e in again.journal.read_subject("workflow/a")] == [
        "workflow.registered"] * 2
    again.close()


def test_a_thread_stream_reads_back_its_start(store: Store) -> None:
    write(store, NewEvent(T, ThreadStarted(HASHES[0], "a", HASHES[1], "/r")))
    write(store, registered("a"))
    write(store, NewEvent(T, ThreadEnded("end")))
    found = list(store.journal.read_subject(T, reverse=True))
    assert [e.type for e in found] == ["thread.ended", "thread.started"]
