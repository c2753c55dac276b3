"""A write digests each line it appends once (issue 30): the chain's `prev` of every line
but the first from the line before it (the envelopes), the new head's from the last line
(the append), never the last line twice; the log still verifies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.viewkit import HASHES, replays_alike
from uwf.engine import journal, rounds
from uwf.engine.events import NewEvent, digest
from uwf.engine.journal import Outcome
from uwf.store import Store
from uwf.workflows.events import WorkflowRegistered


def test_a_write_of_three_events_digests_three_lines(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    root = tmp_path / "s"
    store = Store.open(root)
    store.journal.write(lambda _views: Outcome([
        NewEvent("workflow/first", WorkflowRegistered("first", HASHES[0], None))]))
    digested: list[bytes] = []

    def counted(line: bytes) -> str:
        digested.append(line)
        return digest(line)

    monkeypatch.setattr(journal, "digest", counted)
    monkeypatch.setattr(rounds, "digest", counted)  # the envelopes' chain
    monkeypatch.setattr(store.journal.log, "digest", counted)
    events = [NewEvent(f"workflow/w{n}", WorkflowRegistered(f"w{n}", HASHES[0], None))
              for n in range(3)]
    head = store.journal.log.head()
    store.journal.write(lambda _views: Outcome(events))
    lines = [line.raw for line in store.journal.log.read(head.seq)]
    assert sorted(digested) == sorted(lines)  # each line once
    assert store.journal.log.head().digest == digest(lines[-1])
    monkeypatch.undo()
    assert store.journal.log.problems() == []
    store.close()
    replays_alike(root)
