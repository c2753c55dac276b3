"""A write's commit reads back no row its fold already knows (uwf/engine/journal.py
`_append`, `Rows.before` in uwf/engine/viewspec.py), and the rows it writes are the ones a
replay writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE
from tests.viewkit import replays_alike
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome
from uwf.engine.ulids import new_ulid
from uwf.queue import sched
from uwf.queue.events import QueueAdded
from uwf.store import Store


def test_a_lease_and_a_complete_read_no_row_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    store.journal.write(lambda views: Outcome(
        [NewEvent(f"queue/{new_ulid(0)}", QueueAdded("/r", 100 + n)) for n in range(3)]))
    store.read()
    statements: list[str] = []
    db = store.views._connect(create=False)  # type: ignore[attr-defined]
    db.set_trace_callback(statements.append)
    for _ in range(3):
        granted = sched.lease(store, 1).leases[0]
        sched.complete(store, granted.id, granted.lease_id)
    db.set_trace_callback(None)
    read_back = [s for s in statements if s.startswith("SELECT key, text")]
    assert read_back == []
    assert [s for s in statements if s.startswith('UPDATE "v_queue"')]  # written all the same
    store.close()
    replays_alike(tmp_path / "s")


def test_a_batch_reads_none_of_its_new_entries_and_collects_no_garbage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`queue add --batch`: the entries' ids were minted by the command, so neither the
    fold nor the commit looks them up (`Views.absent`), and the cyclic collector is held
    off while the batch is made and written (uwf/engine/gcpause.py), then on again."""
    import gc
    import json

    from uwf.cli.main import main

    monkeypatch.setenv("UWF_DURABILITY", "none")
    home = tmp_path / "s"
    assert main(["--store", str(home), "workflow", "put", str(EXAMPLE)]) == 0
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({"workflow": "solve-issue", "prompt": f"p{n}",
                                         "repo": str(tmp_path), "priority": 100 + n % 3})
                             + "\n" for n in range(1200)))
    store = Store.open(home)
    store.read()
    statements: list[str] = []
    collecting: list[bool] = []
    write = store.journal.write

    def watched(*args: Any, **kwargs: Any) -> Any:
        collecting.append(gc.isenabled())
        return write(*args, **kwargs)

    monkeypatch.setattr(store.journal, "write", watched)
    db = store.views._connect(create=False)  # type: ignore[attr-defined]
    db.set_trace_callback(statements.append)
    from uwf.queue import service

    assert service.add_batch(store, batch, store.settings).added == 1200
    db.set_trace_callback(None)
    assert collecting == [False]
    assert gc.isenabled()
    assert [s for s in statements if 'FROM "v_queue"' in s] == []
    store.close()
    replays_alike(home)
