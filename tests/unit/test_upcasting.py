"""Event evolution: a store written with an older shape of an event's `data` loads
through the catalogue's upcasters (docs/events.md, "Changing an event"), and the
log, which the chain hashes byte for byte, is never rewritten.

The older shapes are fabricated for `sched.policy_set`: v1 named `maxConcurrent`
`concurrency`, v2 renamed it and still held `leaseTtlSec` in seconds, v3 (the
current Struct) holds `leaseTtlMs`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.logkit import TS, ulid
from uwf.audit.verify import verify
from uwf.engine.events import (
    Envelope,
    EventCatalog,
    NewEvent,
    Upcaster,
    digest,
    encode_line,
)
from uwf.engine.journal import Outcome
from uwf.engine.log import Checkpoint, EventLog
from uwf.errors import Corrupt
from uwf.queue.events import (
    QUEUE_EVENTS,
    SchedPolicySet,
)
from uwf.queue.projection import POLICY_KEY, PolicyState
from uwf.queue.rules import Policy
from uwf.runs.events import RUN_EVENTS
from uwf.store import Store, event_catalog
from uwf.threads.events import THREAD_EVENTS
from uwf.workflows.events import WORKFLOW_EVENTS, WorkflowRegistered

POLICY = "sched.policy_set"
CURRENT = {"maxConcurrent": 2, "maxAttempts": 4, "leaseTtlMs": 300_000, "backoffBaseMs": 1000,
           "backoffFactor": 2.0, "backoffCapMs": 60_000}
V2 = {**{k: v for k, v in CURRENT.items() if k != "leaseTtlMs"}, "leaseTtlSec": 300}
V1 = {**{k: v for k, v in V2.items() if k != "maxConcurrent"}, "concurrency": 2}
EXPECTED = Policy(max_concurrent=2, max_attempts=4, lease_ttl_ms=300_000, backoff_base_ms=1000,
                  backoff_factor=2.0, backoff_cap_ms=60_000)

calls: list[int] = []  # which upcasters ran, in order (reset by the `store` fixture)


def policy_set(max_concurrent: int) -> SchedPolicySet:
    """The current shape, as a current uwf writes it."""
    return SchedPolicySet(max_concurrent=max_concurrent, max_attempts=4, lease_ttl_ms=300_000,
                          backoff_base_ms=1000, backoff_factor=2.0, backoff_cap_ms=60_000)


def v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    calls.append(1)
    upcast = {k: v for k, v in data.items() if k != "concurrency"}
    return {**upcast, "maxConcurrent": data["concurrency"]}


def v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    calls.append(2)
    # Reads the name v1_to_v2 gave: run out of order, this would fail.
    upcast = {k: v for k, v in data.items() if k != "leaseTtlSec"}
    return {**upcast, "maxConcurrent": data["maxConcurrent"],
            "leaseTtlMs": data["leaseTtlSec"] * 1000}


UPCASTERS = (
    Upcaster(POLICY, 1, lambda data: "concurrency" in data, v1_to_v2),
    Upcaster(POLICY, 2, lambda data: "leaseTtlSec" in data, v2_to_v3),
)


def catalog(*upcasters: Upcaster) -> EventCatalog:
    """The store's catalogue (`event_catalog()`) with these upcasters."""
    return EventCatalog(WORKFLOW_EVENTS, THREAD_EVENTS, RUN_EVENTS, QUEUE_EVENTS,
                        upcasters=upcasters)


def line(seq: int, type_: str, data: dict[str, Any], *, prev: str = "0" * 32,
         batch: tuple[int, int] = (1, 1), subject: str = "policy/sched") -> bytes:
    return encode_line(Envelope(seq, ulid(seq), TS, type_, subject, batch, data, prev))


def write_raw(log: EventLog, *events: tuple[str, str, dict[str, Any]]) -> Checkpoint:
    """Append `(type, subject, data)` lines as one batch, as an older uwf wrote them:
    `data` as given, the chain correct."""
    with log.exclusive() as session:
        head, _ = session.recover()
        prev, raws = head.digest, []
        for index, (type_, subject, data) in enumerate(events):
            raw = line(head.seq + index + 1, type_, data, prev=prev,
                       batch=(index + 1, len(events)), subject=subject)
            prev = digest(raw)
            raws.append(raw)
        return session.append(raws)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """A file store whose second line is a v1 `sched.policy_set`, opened with the
    upcasting catalogue."""
    monkeypatch.setenv("UWF_DURABILITY", "none")
    opened = Store.open(tmp_path / "s")
    write_raw(opened.log, ("store.created", "store", {"format": 1}))
    write_raw(opened.log, (POLICY, "policy/sched", V1))
    opened.journal.catalog = catalog(*UPCASTERS)
    calls.clear()
    yield opened
    opened.close()


def policy(store: Store) -> Policy:
    state = store.read().get("sched", POLICY_KEY)
    assert isinstance(state, PolicyState)
    return state.policy


def raw_lines(store: Store) -> list[bytes]:
    return [item.raw for item in store.log.read()]


def test_without_upcasters_the_old_shape_does_not_load(store: Store) -> None:
    store.journal.catalog = event_catalog()
    with pytest.raises(Corrupt, match=r"invalid data for sched\.policy_set: .*unknown field"):
        store.read()
    report = verify(store)
    assert not report.ok
    assert [p.seq for p in report.problems] == [2]


def test_the_views_fold_an_old_line_in_the_current_shape(store: Store) -> None:
    before = raw_lines(store)
    assert policy(store) == EXPECTED
    assert calls == [1, 2]
    decoded = store.journal.catalog.decode(before[1])
    assert decoded.data == policy_set(2)
    assert (decoded.seq, decoded.type, decoded.batch) == (2, POLICY, (1, 1))
    assert raw_lines(store) == before  # read, never rewritten


def test_log_verify_accepts_the_old_line_and_the_chain_goes_on(store: Store) -> None:
    before = raw_lines(store)
    store.read()
    # A current write after the old lines: chained on the old line's bytes.
    store.journal.write(lambda _views: Outcome([NewEvent("policy/sched", policy_set(3))]))
    assert raw_lines(store)[:2] == before
    assert policy(store).max_concurrent == 3
    report = verify(store)
    assert report.problems == []
    assert report.events == 3
    # A rebuild from the log folds the same views as the incremental folds did.
    rows = {view: dict(store.views.scan(view)) for view in store.journal.projections}
    store.journal.rebuild()
    assert {view: dict(store.views.scan(view)) for view in store.journal.projections} == rows


def test_a_chain_runs_in_version_order_from_the_line_s_shape() -> None:
    # Registered out of order: the catalogue orders them by version.
    upcasting = catalog(*reversed(UPCASTERS))
    calls.clear()
    assert upcasting.decode(line(2, POLICY, V1)).data.lease_ttl_ms == 300_000
    assert calls == [1, 2]
    calls.clear()
    assert upcasting.decode(line(2, POLICY, V2)).data.max_concurrent == 2
    assert calls == [2]  # a v2 line starts at v2
    calls.clear()
    upcasting.decode(line(2, POLICY, CURRENT))
    assert calls == []  # a current line is one typed decode: no upcaster is asked


def test_a_type_without_upcasters_decodes_exactly_as_before(store: Store) -> None:
    store.journal.write(lambda _views: Outcome(
        [NewEvent("workflow/w", WorkflowRegistered("w", "70D2DHWNFR6T8"))]))
    plain, upcasting = event_catalog(), catalog(*UPCASTERS)
    current = [raw_lines(store)[0], raw_lines(store)[2], line(2, POLICY, CURRENT)]
    assert [upcasting.decode(raw) for raw in current] == [plain.decode(raw) for raw in current]
    # An old shape of a type no upcaster is for is refused with the same words.
    renamed = line(2, "workflow.registered", {"workflow": "w", "hash": "70D2DHWNFR6T8"})
    with pytest.raises(Corrupt) as old:
        plain.decode(renamed)
    with pytest.raises(Corrupt) as new:
        upcasting.decode(renamed)
    assert new.value.what == old.value.what
    assert new.value.what.startswith("invalid data for workflow.registered")


def test_unknown_fields_no_upcaster_applies_to_are_refused(store: Store) -> None:
    extra = line(2, POLICY, {**CURRENT, "surprise": 1})
    with pytest.raises(Corrupt) as plain:
        event_catalog().decode(extra)
    with pytest.raises(Corrupt) as upcasting:
        catalog(*UPCASTERS).decode(extra)
    assert upcasting.value.what == plain.value.what
    assert "unknown field `surprise`" in upcasting.value.what
    write_raw(store.log, (POLICY, "policy/sched", {**CURRENT, "surprise": 1}))
    report = verify(store)
    assert [(p.seq, "surprise" in p.problem) for p in report.problems] == [(3, True)]


def raises(data: dict[str, Any]) -> dict[str, Any]:
    raise KeyError("concurrency")


def returns_a_list(data: dict[str, Any]) -> dict[str, Any]:
    return [data]  # type: ignore[return-value]


def keeps_the_old_name(data: dict[str, Any]) -> dict[str, Any]:
    return data


@pytest.mark.parametrize(("upcast", "says"), [
    (raises, "seq 2: the sched.policy_set upcaster from v1 failed: KeyError"),
    (returns_a_list, "seq 2: the sched.policy_set upcaster from v1 returned a list, not an "
                     "object"),
    (keeps_the_old_name, "seq 2: invalid data for sched.policy_set upcast from v1: "),
])
def test_a_failing_upcaster_is_a_corrupt_line_naming_its_seq(store: Store, upcast: Any,
                                                             says: str) -> None:
    store.journal.catalog = catalog(Upcaster(POLICY, 1, lambda d: "concurrency" in d, upcast))
    with pytest.raises(Corrupt) as failed:
        store.read()
    assert failed.value.what.startswith(says)
    report = verify(store)  # reported as a problem, never raised
    assert [(p.seq, p.problem.startswith(says)) for p in report.problems] == [(2, True)]


def test_a_predicate_that_raises_is_a_corrupt_line_too() -> None:
    def broken(data: Any) -> bool:
        return bool(data["missing"])

    upcasting = catalog(Upcaster(POLICY, 1, broken, keeps_the_old_name))
    with pytest.raises(Corrupt, match=r"seq 7: the sched\.policy_set upcaster from v1 failed"):
        upcasting.decode(line(7, POLICY, V2))


def test_the_catalogue_refuses_upcasters_it_cannot_chain() -> None:
    with pytest.raises(ValueError, match="unknown event type nope"):
        catalog(Upcaster("nope", 1, lambda d: True, keeps_the_old_name))
    with pytest.raises(ValueError, match=r"versions \[1, 3\], not 1 to 2"):
        catalog(UPCASTERS[0], Upcaster(POLICY, 3, lambda d: True, keeps_the_old_name))
    with pytest.raises(ValueError, match=r"versions \[1, 1\]"):
        catalog(UPCASTERS[0], UPCASTERS[0])
