"""A long fold into views it makes anew reads back from them only the states of keys an
earlier stretch wrote (`fold.Seen`): a key it never wrote is None without a read, a key
it wrote is read back, and the views are the ones a fold held whole leaves."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.contract.test_fold_windows import busy_store, contents, rebuilt
from uwf.engine import bulkfold, fold
from uwf.store import Store


def reads_of(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each state read back from the views, as it happens, was there."""
    read: list[bool] = []
    load: Callable[[str, str], bytes | None] = store.views.load

    def recorded(view: str, key: str) -> bytes | None:
        raw = load(view, key)
        read.append(raw is not None)
        return raw

    monkeypatch.setattr(store.views, "load", recorded)
    return read


@pytest.mark.parametrize("window", [1, 3])
def test_a_fold_reads_back_only_what_it_wrote(cli: Cli, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               window: int) -> None:
    busy_store(cli, tmp_path)
    whole = contents(rebuilt(Store.open(cli.home)))
    # Stretches of a few states, none kept from one to the next: every state a later
    # stretch needs is read back, or known to be absent.
    monkeypatch.setattr(fold, "WINDOW", window)
    monkeypatch.setattr(fold, "KNOWN", 0)
    # The same for a full replay's own fold (uwf/engine/bulkfold.py): every state
    # written, none kept, whenever more than `window` are held.
    monkeypatch.setattr(bulkfold, "BOUND", window)
    monkeypatch.setattr(bulkfold, "KEEP", 0)
    monkeypatch.setattr(bulkfold, "CHECK_EVERY", 1)
    for first_read in (False, True):
        if first_read:
            shutil.rmtree(cli.home / "views")
        store = Store.open(cli.home)
        read = reads_of(store, monkeypatch)
        if first_read:
            store.read()  # a first read of absent views
        else:
            store.journal.rebuild()
        assert any(read), "no state was read back: the stretches did not split an entity"
        # Each read found a row (a new entity is not looked for), but for one at most:
        # two keys may share the filter's slot (about 1 in 10,000 runs of this test).
        assert read.count(False) <= 1, read
        assert contents(store) == whole
