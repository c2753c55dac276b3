"""`queue add --batch` spells its lines and rows itself (uwf/queue/batch.py): the log's
bytes and the views' rows are the ones the journal's own envelopes and fold make of the
same events at the same instant, with the same ids."""

from __future__ import annotations

import itertools
import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE
from tests.viewkit import rows_of
from uwf.cli.main import main
from uwf.engine import ulids
from uwf.engine.journal import Journal
from uwf.queue import batch, service
from uwf.store import Store

NOW = "2026-01-02T03:04:05.678Z"


def entries(folder: Path, count: int, keyed: bool) -> list[dict[str, Any]]:
    """Entries using every field `queue.added` spells, text JSON escapes included;
    `keyed`: some with a key (met again: the later ones are existing)."""
    found: list[dict[str, Any]] = []
    for n in range(count):
        prompt = f"Fix #{n}: \"quotes\", \\ é ✓ \t\u2028 {'x' * (n % 50)}"
        entry: dict[str, Any] = {"workflow": "solve-issue", "repo": str(folder),
                                 "prompt": prompt, "priority": 100 + n % 7}
        if n % 3 == 0:
            entry.update(note=f"note {n}", session=f"s{n % 4}", agent="claude",
                         timeoutSec=60 + n, idleTimeoutSec=30, expectedArtifacts=[f"a{n}.md"])
        if keyed and n % 5 == 0:
            entry["key"] = f"k{n % 20}"
        if n % 97 == 0:
            entry.update(broker="mqtt://u@broker.example:1884", brokerPasswordEnv="PW",
                         topicPrefix=f"jobs/{n}")
        found.append(entry)
    return found


def written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, spell: bool,
            counts: tuple[tuple[int, bool], ...]
            ) -> tuple[list[bytes], dict[str, list[tuple[object, ...]]]]:
    """A store's log lines and view rows after a workflow and batches of `counts`
    entries (how many, whether keyed), with every id and token the same on each call;
    `spell`: as `queue add --batch` writes (else through the journal's envelopes and
    fold)."""
    counter = itertools.count(1)
    monkeypatch.setattr(ulids, "_LAST", ulids._Last())
    monkeypatch.setattr(ulids, "randomness", lambda: next(counter).to_bytes(10, "big"))
    monkeypatch.setattr(secrets, "token_urlsafe", lambda size: "t" * size)
    spelled: list[bool] = []
    append = Journal._append

    def generic(self: Journal, *args: Any, **kwargs: Any) -> Any:
        spelled.append(False)
        return append(self, *args, **kwargs)

    monkeypatch.setattr(Journal, "_append", generic)
    if not spell:
        monkeypatch.setattr(service, "speller", lambda journal, events: None)
    home = tmp_path / name
    assert main(["--store", str(home), "--now", NOW, "workflow", "put", str(EXAMPLE)]) == 0
    for number, (count, keyed) in enumerate(counts):
        path = tmp_path / f"{name}-{number}.jsonl"
        path.write_text("".join(json.dumps(entry) + "\n"
                                for entry in entries(tmp_path, count, keyed)), "utf-8")
        spelled.clear()
        store = Store.open(home, now=NOW)
        try:
            added = service.add_batch(store, path, store.settings)
        finally:
            store.close()
        assert added.count == count
        assert (added.existing > 0) == keyed
        assert added.added > batch.OPENSSL_FROM or count < batch.OPENSSL_FROM
        assert spelled == ([] if spell else [False])
    monkeypatch.undo()
    lines = b"".join(path.read_bytes() for path in sorted((home / "events").iterdir()))
    return lines.splitlines(), rows_of(home / "views" / "views.sqlite3")


@pytest.mark.parametrize("template", ["as made", "broken"])
def test_a_batch_spells_the_lines_and_rows_the_journal_makes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: str) -> None:
    """Batches under OPENSSL_FROM lines and over it (the two digests), with keys and
    without, one after another: byte for byte the lines and rows of the journal's own
    path. A row template
    that no longer spells the projection's row (a field moved) is found out by the
    batch's check, and the rows are made the projection's way."""
    monkeypatch.setenv("UWF_DURABILITY", "none")
    if template == "broken":
        monkeypatch.setattr(batch, "_UNTOUCHED", batch._UNTOUCHED.replace(b"0", b"1"))
    counts = ((40, True), (batch.OPENSSL_FROM * 2, True), (30, False),
              (batch.OPENSSL_FROM + 10, False))
    lines, rows = written(tmp_path, monkeypatch, "spelled", True, counts)
    monkeypatch.setenv("UWF_DURABILITY", "none")
    their_lines, their_rows = written(tmp_path, monkeypatch, "folded", False, counts)
    added = [line for line in lines if b'"type":"queue.added"' in line]
    assert len(rows["v_queue"]) == len(added)
    assert lines == their_lines
    assert rows == their_rows
