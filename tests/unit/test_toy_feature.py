"""docs/architecture.md's "where to add a feature", walked with a toy: one event
(`toy.rang`: a bell rang, the count of its rings so far), one view (`bells`), one
`log verify` check (a ring counts on from the one before), one upcaster (the first
shape named the count `n`). Registered only through its `Feature` value, handed to
the store and the CLI's `main`: written, folded, verified, replayed, with nothing of
uwf's changed and no registry (a store opened without it does not know `toy.rang`).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest

from tests.logkit import TS, ulid
from uwf.cli.main import main
from uwf.engine.events import Envelope, EventData, NewEvent, Upcaster, encode_line
from uwf.engine.feature import Check, Feature, checks_of, views_of
from uwf.engine.journal import Outcome, Views
from uwf.engine.projection import StructProjection
from uwf.errors import Corrupt
from uwf.features import FEATURES
from uwf.store import Store

# -- the toy feature: what a `uwf/toy/` package would hold --------------------------------


class ToyRang(EventData, frozen=True):  # toy/events.py
    """A bell rang; `count` is its rings so far, this one included."""

    type: ClassVar[str] = "toy.rang"
    bell: str
    count: int


class BellState(msgspec.Struct, frozen=True, rename="camel"):  # toy/projection.py
    bell: str
    rings: int
    last_seq: int


class BellsProjection(StructProjection):
    name: ClassVar[str] = "bells"
    version: ClassVar[int] = 1
    event_types: ClassVar[frozenset[str]] = frozenset({ToyRang.type})
    state_type: ClassVar[type[msgspec.Struct]] = BellState
    columns: ClassVar[tuple[str, ...]] = ("rings",)
    types: ClassVar[tuple[str, ...]] = ("int",)

    def key(self, event: Envelope) -> str:
        data: ToyRang = event.data
        return data.bell

    def apply(self, state: BellState | None, event: Envelope) -> BellState:
        data: ToyRang = event.data
        return BellState(data.bell, data.count, event.seq)


class BellOrder:  # toy/order.py
    """A ring counts on from the bell's ring before it."""

    def __init__(self, made: Mapping[str, Check]) -> None:
        self.rings: dict[str, int] = {}

    def __call__(self, envelope: Envelope) -> str | None:
        data: ToyRang = envelope.data
        before = self.rings.get(data.bell, 0)
        self.rings[data.bell] = data.count
        if data.count != before + 1:
            return f"bell {data.bell} rang {data.count} after {before}"
        return None


def _n_to_count(data: dict[str, Any]) -> dict[str, Any]:
    return {"bell": data["bell"], "count": data["n"]}


# toy/feature.py
TOY = Feature(name="toy", events=(ToyRang,), views=(BellsProjection,), check=BellOrder,
              upcasters=(Upcaster(ToyRang.type, 1, lambda data: "n" in data, _n_to_count),))
WITH_TOY = (*FEATURES, TOY)  # the entry point's list, with the toy


def ring(store: Store, bell: str) -> int:
    """The toy's service: ring `bell` once, deciding its count from the view."""
    def decide(views: Views) -> Outcome[int]:
        state = views.get("bells", bell)
        count = 1 if state is None else state.rings + 1
        return Outcome([NewEvent(f"toy/{bell}", ToyRang(bell, count))], count)

    count: int = store.journal.write(decide)
    return count


# -- the walk ------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    return tmp_path / "s"


@pytest.fixture
def store(root: Path) -> Iterator[Store]:
    opened = Store.open(root, features=WITH_TOY)
    yield opened
    opened.close()


def forge(store: Store, type_: str, subject: str, data: dict[str, Any]) -> int:
    """Append one line as a writer that skips the deciders would (chain intact)."""
    with store.log.exclusive() as session:
        head, _ = session.recover()
        seq = head.seq + 1
        raw = encode_line(Envelope(seq, ulid(seq), TS, type_, subject, (1, 1), data,
                                   head.digest))
        session.append([raw])
    return seq


def cli(root: Path, *argv: str, features: tuple[Feature, ...] | None = WITH_TOY
        ) -> tuple[int, Any]:
    """`uwf --store ROOT --json ARGV` in this process, on a store of `features`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--store", str(root), "--json", *argv], features=features)
    text = out.getvalue()
    return code, json.loads(text) if text.strip() else None


def test_a_toy_feature_is_written_folded_verified_and_replayed(store: Store,
                                                               root: Path) -> None:
    # Registered through the value: its view is made, its event type known.
    assert "bells" in store.journal.projections
    assert store.journal.catalog.types[ToyRang.type] is ToyRang
    # Written and folded.
    assert [ring(store, "big-ben"), ring(store, "big-ben"), ring(store, "tom")] == [1, 2, 1]
    assert store.read().get("bells", "big-ben").rings == 2
    # Verified, by the CLI given the same list: the log and the views.
    assert cli(root, "log", "verify") == (0, {"ok": True, "events": 4, "segments": 1,
                                              "problems": []})
    code, verified = cli(root, "registry", "verify")
    assert (code, verified["ok"]) == (0, True)
    # Replayed: the views deleted, rebuilt from the log, the same rows.
    before = sorted(store.views.scan("bells"))
    store.close()
    shutil.rmtree(root / "views")
    with closing(Store.open(root, features=WITH_TOY)) as again:
        again.read()
        assert sorted(again.views.scan("bells")) == before


def test_its_check_names_a_forged_ring_and_its_upcaster_reads_the_old_shape(
        store: Store, root: Path) -> None:
    ring(store, "tom")
    old = forge(store, ToyRang.type, "toy/tom", {"bell": "tom", "n": 2})  # shape 1, upcast
    skipped = forge(store, ToyRang.type, "toy/tom", {"bell": "tom", "count": 5})
    assert store.read().get("bells", "tom") == BellState("tom", 5, skipped)
    code, verified = cli(root, "log", "verify")
    assert code == 1
    assert [(p["seq"], p["problem"]) for p in verified["problems"]] == [
        (skipped, "bell tom rang 5 after 2")]
    assert old == skipped - 1


def test_without_the_value_the_store_does_not_know_the_toy(store: Store, root: Path) -> None:
    """No registry: a store opened with uwf's own list (the default) in the same process
    refuses the toy's line, and names it."""
    ring(store, "tom")
    store.close()
    shutil.rmtree(root / "views")  # rebuilt from the log by the next read
    with closing(Store.open(root)) as plain:
        assert "bells" not in plain.journal.projections
        assert ToyRang.type not in plain.journal.catalog.types
        with pytest.raises(Corrupt, match=r"unknown event type 'toy\.rang'"):
            plain.read()
    code, verified = cli(root, "log", "verify", features=None)
    assert code == 1
    assert verified["problems"][0]["problem"] == "unknown event type 'toy.rang'"
    assert cli(root, "log", "verify")[0] == 0  # main(argv) again, with the toy: one process


def test_a_list_of_features_is_checked_when_a_store_opens() -> None:
    """Listing a feature twice, or something that is not one, is a programming error;
    a check that reads another's needs that one listed before it."""
    with pytest.raises(ValueError, match="two features are named toy"):
        Store.memory(features=(*WITH_TOY, TOY))
    with pytest.raises(ValueError, match="is not a Feature"):
        Store.memory(features=(*FEATURES, "toy"))  # type: ignore[arg-type]
    runs_first = tuple(f for f in FEATURES if f.name != "threads")
    with pytest.raises(ValueError, match="list the threads feature before the runs"):
        checks_of(runs_first)
    assert [view.name for view in views_of(WITH_TOY)][-1] == "bells"


def test_uwf_s_views_keep_their_order() -> None:
    """A view folded over another's (runs over threads) comes right after it: the order
    `registry show` prints, which the golden transcript holds."""
    assert [view.name for view in views_of(FEATURES)] == [
        "workflows", "threads", "runs", "steps", "queue", "sched"]
