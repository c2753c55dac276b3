"""Writes' views commits held in the writing process (uwf/engine/held.py, issue 30).

A process's run of writes (after STREAK of them in a row found the log's tail their
own) commits the views once for up to HOLD_WRITES of them (the log has every line at
once); another OS process reading meanwhile sees every write (it
folds the log after the views' checkpoint); a write after another process's append
commits at once; a decide's query and a stated version see the held writes; a process
killed (SIGKILL) with writes held leaves views that the next reader catches up. Each
store's views end equal to a replay's (a replay checks every line's seq and chain).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.viewkit import HASHES, replays_alike
from uwf.engine.events import NewEvent
from uwf.engine.held import HOLD_WRITES, STREAK
from uwf.engine.journal import Outcome, Views
from uwf.engine.log import Checkpoint
from uwf.engine.viewspec import Query
from uwf.errors import Conflict
from uwf.store import Store
from uwf.workflows.events import WorkflowRegistered

# Another OS process: the store's workflows as its reads see them, or writes of its own.
NAMES = """
import sys
from uwf.store import Store
store = Store.open(sys.argv[1])
print(" ".join(sorted(key for key, _ in store.read().scan("workflows"))))
store.close()
"""
WRITES = """
import os, signal, sys
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome
from uwf.store import Store
from uwf.workflows.events import WorkflowRegistered
store = Store.open(sys.argv[1])
for name in sys.argv[3:]:
    event = NewEvent(f"workflow/{name}", WorkflowRegistered(name, sys.argv[2], None))
    store.journal.write(lambda _views, event=event: Outcome([event]))
print(store.journal.log.head().seq, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    return tmp_path / "s"


def put(store: Store, name: str, *, expected: dict[str, int] | None = None) -> None:
    event = NewEvent(f"workflow/{name}", WorkflowRegistered(name, HASHES[0], None))
    store.journal.write(lambda _views: Outcome([event]), expected=expected)


def persisted(store: Store) -> set[Checkpoint]:
    """The views' checkpoints as their file holds them (the held fold not committed)."""
    return set(store.journal.views.checkpoints().values())


def other(root: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script, str(root), *args],
                          capture_output=True, text=True, check=False, timeout=120)


def test_a_run_of_writes_commits_the_views_once_for_hold_writes_of_them(root: Path) -> None:
    store = Store.open(root)
    put(store, "w0")  # the store's first line: the views are made
    for number in range(1, STREAK + 1):  # not yet STREAK writes in a row: committed
        put(store, f"w{number}")
        assert persisted(store) == {store.log.head()}
    first = STREAK + 1
    for number in range(first, first + HOLD_WRITES - 1):
        put(store, f"w{number}")
        assert store.log.head() not in persisted(store)  # in the log, not in the views
    put(store, f"w{first + HOLD_WRITES - 1}")  # the HOLD_WRITES-th held write commits
    assert persisted(store) == {store.log.head()}
    store.close()
    replays_alike(root)


def test_another_process_reads_every_held_write_and_a_write_after_it_goes_on(
        root: Path) -> None:
    store = Store.open(root)
    for number in range(5):
        put(store, f"w{number}")
    assert store.log.head() not in persisted(store)
    read = other(root, NAMES)
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == [f"w{number}" for number in range(5)]
    put(store, "w5")  # the views moved under the held fold: it is let go, this commits
    assert persisted(store) == {store.log.head()}
    assert sorted(key for key, _ in store.read().scan("workflows")) == [
        f"w{number}" for number in range(6)]
    store.close()
    replays_alike(root)


def test_a_write_after_another_process_appended_commits_at_once(root: Path) -> None:
    store = Store.open(root)
    for number in range(3):
        put(store, f"w{number}")
    wrote = other(root, WRITES.replace("os.kill(os.getpid(), signal.SIGKILL)",
                                       "store.close()"), HASHES[0], "theirs")
    assert wrote.returncode == 0, wrote.stderr
    for number in range(3, 3 + STREAK):  # the log's tail was another process's line,
        put(store, f"w{number}")  # then not yet STREAK writes of its own in a row
        assert persisted(store) == {store.log.head()}
    put(store, "w9")  # held
    assert store.log.head() not in persisted(store)
    store.close()
    replays_alike(root)


def test_a_decide_queries_and_states_versions_over_the_held_writes(root: Path) -> None:
    store = Store.open(root)
    for number in range(4):
        put(store, f"w{number}")
    assert store.log.head() not in persisted(store)

    def listed(views: Views) -> Outcome[list[str]]:
        found = [state.name for state in views.query(Query("workflows"))]
        return Outcome((), sorted(found))

    assert store.journal.write(listed) == ["w0", "w1", "w2", "w3"]  # they are committed
    put(store, "w4")
    put(store, "w5")
    version = store.log.head().seq - 1  # w4's, held
    assert store.log.head() not in persisted(store)
    with pytest.raises(Conflict):
        put(store, "w4", expected={"workflow/w4": version - 1})
    put(store, "w4", expected={"workflow/w4": version})
    store.close()
    replays_alike(root)


def test_a_process_killed_with_writes_held_leaves_views_the_next_reader_catches_up(
        root: Path) -> None:
    names = [f"w{number}" for number in range(10)]
    killed = other(root, WRITES, HASHES[0], *names)
    assert killed.returncode == -9, killed.stderr
    head = int(killed.stdout)
    store = Store.open(root)
    assert store.log.head().seq == head
    assert all(checkpoint.seq < head for checkpoint in persisted(store))  # left behind
    assert sorted(key for key, _ in store.read().scan("workflows")) == names
    assert persisted(store) == {store.log.head()}
    put(store, "w10")
    store.close()
    replays_alike(root)


def test_a_read_after_another_process_wrote_is_not_served_from_the_held_states(
        root: Path) -> None:
    store = Store.open(root)
    for number in range(5):
        put(store, f"w{number}")
    assert store.read().get("workflows", "w4").hash == HASHES[0]  # committed, states kept
    wrote = other(root, WRITES.replace("os.kill(os.getpid(), signal.SIGKILL)",
                                       "store.close()"), HASHES[1], "w4")
    assert wrote.returncode == 0, wrote.stderr
    assert store.read().get("workflows", "w4").hash == HASHES[1]
    assert store.journal.reader().get("workflows", "w4").hash == HASHES[1]
    store.close()
    replays_alike(root)


def test_a_cut_back_to_this_process_s_last_line_is_still_recorded(root: Path) -> None:
    """A writer whose own line is still the log's last skips the tail's scan
    (`_FileSession.own`), but not the repair note: another writer that cut a torn tail
    back to exactly that line and was killed before recording it left the note, so the
    next write records `log.repaired` first."""
    from uwf.engine.events import LogRepaired
    from uwf.engine.filelog import FileLog
    from uwf.engine.tailcut import cut_tail

    store = Store.open(root)
    for number in range(STREAK + 2):  # held: the tail is this process's own
        put(store, f"w{number}")
    head = store.log.head()
    segment = max((root / "events").glob("*.jsonl"))
    size = segment.stat().st_size
    with segment.open("ab") as torn:  # a writer killed mid-line
        torn.write(b'{"seq":')
    other_log = FileLog(root / "events", root / "lock")
    cut_tail(other_log.segments, segment.name, size + 7, size, reasons=("torn last line",),
             unrecorded=[])  # noted and cut; the writer is killed before recording it
    other_log.close()
    assert segment.stat().st_size == size  # the log's last line is this process's again
    put(store, "after")
    lines = [line.raw for line in store.log.read(head.seq)]
    assert len(lines) == 2
    assert LogRepaired.type.encode() in lines[0]
    assert b'"after"' in lines[1]
    assert not (root / "events" / "repair.pending").exists()
    store.close()
    replays_alike(root)
