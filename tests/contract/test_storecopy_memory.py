"""`uwf store copy` into PostgreSQL checks and folds the lines in one pass as it writes
them (docs/hosts.md#copying-a-store), in memory that does not grow with the log: it
keeps what is kept by entity and node (the views' rows, the nodes named), never by
line. Measured in process with tracemalloc on two logs of the same workflows, one four
times as long as the other (bench/store_copy.py measures the copy's peak RSS)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import EXAMPLE
from tests.pgkit import Server
from uwf.engine import fold
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome, Views
from uwf.store import Store
from uwf.storecopy import service
from uwf.workflows.events import WorkflowRegistered
from uwf.workflows.service import put_workflow

pytest.importorskip("psycopg")  # the `postgres` extra; `dev` installs it, so CI never skips

NAMES = 20  # workflow names, each registered again and again
BATCH = 500  # events a write


def appending(events: list[NewEvent]) -> Callable[[Views], Outcome[None]]:
    """A command that appends `events` as one batch."""
    return lambda _views: Outcome(events)


def registrations(home: Path, events: int) -> Path:
    """A store whose log is `events` registrations of NAMES names, each name moved
    between two real workflow nodes in turn (as `workflow put` of two files would)."""
    second = home.parent / f"{home.name}-other.yaml"
    spec = yaml.safe_load(EXAMPLE.read_text("utf-8"))
    spec["description"] = "the same, told otherwise"
    second.write_text(yaml.safe_dump(spec), "utf-8")
    store = Store.open(home)
    try:
        one, other = (put_workflow(store, path).workflow for path in (EXAMPLE, second))
        current: dict[str, str] = {}
        written = store.log.head().seq
        turn = 0
        while written < events:
            batch = []
            for _ in range(min(BATCH, events - written)):
                name = f"w{turn % NAMES}"
                was = current.get(name)
                current[name] = other if was == one else one
                batch.append(NewEvent(f"workflow/{name}",
                                      WorkflowRegistered(name, current[name], was)))
                turn += 1
            store.journal.write(appending(batch))
            written = store.log.head().seq
    finally:
        store.close()
    return home


def test_the_copys_memory_does_not_grow_with_the_log(pg_server: Server, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch
                                                     ) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    # Stretches and chunks far shorter than these logs: what is held by them is the same
    # for both (as it is for any log longer than 200,000 lines and 4 MiB).
    monkeypatch.setattr(fold, "STRETCH_LINES", 500)
    monkeypatch.setattr(service, "CHUNK_BYTES", 64 * 1024)
    peaks = []
    for events in (8_000, 32_000):  # logs of 2.5 and 10 MiB: several of the MiB read at once
        source = registrations(tmp_path / f"source-{events}", events)
        src, dst = Store.open(source), Store.open(pg_server.create_database())
        try:
            tracemalloc.start()
            try:
                copied = service.copy(src, dst)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        finally:
            src.close()
            dst.close()
        assert copied.events == events
        peaks.append(peak)
    small, large = peaks
    # Four times the lines (32,000 vs 8,000): a copy that kept anything a line (a digest
    # and where it is: over 150 bytes) grows by several MiB.
    assert large < small * 1.1 + 256 * 1024, (small, large)
