"""A long fold (a rebuild, a first read of absent views) is written a stretch at a time,
so memory stays flat in the log's length (issue 21): the views it leaves are the ones
a fold held whole would leave, on every backend, whatever the stretch, even one that
ends inside a batch's lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli, cli_on
from tests.threadkit import make_kit
from uwf.engine import bulkfold, fold
from uwf.store import Store


def busy_store(cli: Cli, tmp_path: Path) -> None:
    """Threads run to their end, one killed, a batch of queue entries (one batch of many
    lines), leases and completions, a policy."""
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    for n in range(3):
        thread = kit.start(prompt=f"task {n} timeout")
        kit.ok("thread", "run", thread)
    kit.ok("thread", "kill", kit.start(prompt="killed"), "--reason", "no")
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(f'{{"workflow": "solve-issue", "prompt": "queued {n}"}}\n'
                             for n in range(12)), "utf-8")
    kit.ok("sched", "policy", "set", "--max-concurrent", "3")
    kit.ok("queue", "add", "--batch", str(batch))
    leased = kit.ok("sched", "lease")["leases"]
    kit.ok("sched", "complete", leased[0]["id"], "--lease", leased[0]["leaseId"])


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A busy store, made once (its threads' steps run agents): each test copies it."""
    root = tmp_path_factory.mktemp("busy")
    made = cli_on(root / "store", root / "config")
    busy_store(made, root)
    return made.home


def rebuilt(store: Store) -> Store:
    store.journal.rebuild()
    return store


def contents(store: Store) -> dict[str, Any]:
    """Every view's rows and kept counts, the stream index, a text search."""
    views = store.journal.views
    found: dict[str, Any] = {}
    subjects: set[str] = set()
    for line in store.log.read():
        subjects.add(store.journal.catalog.decode(line.raw).subject)
    for name, projection in store.journal.projections.items():
        found[name] = list(views.scan(name))
        for column in projection.spec().counted:
            found[f"{name}.{column}"] = views.counts(name, column)
    found["streams"] = {subject: views.stream(subject) for subject in sorted(subjects)}
    store.close()
    return found


@pytest.mark.parametrize("window", [1, 3, 7])
def test_a_fold_in_stretches_leaves_the_views_a_whole_fold_does(
        cli: Cli, busy: Path, monkeypatch: pytest.MonkeyPatch, window: int) -> None:
    shutil.copytree(busy, cli.home)
    whole = contents(rebuilt(Store.open(cli.home)))
    assert len(whole["queue"]) == 12
    monkeypatch.setattr(fold, "WINDOW", window)
    # A full replay's own fold (uwf/engine/bulkfold.py) writes its oldest states past a
    # bound, keeping some: here past `window` states, down to one.
    monkeypatch.setattr(bulkfold, "BOUND", window)
    monkeypatch.setattr(bulkfold, "KEEP", 1)
    monkeypatch.setattr(bulkfold, "CHECK_EVERY", 1)
    assert contents(rebuilt(Store.open(cli.home))) == whole  # a rebuild
    shutil.rmtree(cli.home / "views")
    store = Store.open(cli.home)  # a first read of absent views
    store.read()
    assert contents(store) == whole
    store.close()
    assert cli.run("registry", "verify").code == 0
    result = cli.run("run", "search", "--text", "timeout", "--json")  # the search index
    assert result.code == 0, result.err
    assert len(json.loads(result.out)["runs"]) == 3, result.out


def test_a_fold_in_stretches_on_postgresql(cli: Cli, busy: Path, pg_url: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("psycopg")
    from uwf.config.settings import Settings
    from uwf.storecopy.service import copy

    shutil.copytree(busy, cli.home)
    store = rebuilt(Store.open(cli.home))
    settings = Settings.from_env({**cli.env, "UWF_HOME": pg_url}, None)
    server = Store.open(settings=settings)
    copy(store, server)
    server.close()
    whole = contents(store)
    monkeypatch.setattr(fold, "WINDOW", 3)
    monkeypatch.setattr(bulkfold, "BOUND", 3)
    monkeypatch.setattr(bulkfold, "CHECK_EVERY", 1)
    assert contents(rebuilt(Store.open(settings=settings))) == whole
