"""`uwf log verify` follows each queue entry through the lease state machine (SPEC §9:
"no lease of a parked entry"): every transition the commands make verifies clean,
and an event the commands would have refused, written into the log anyway, is
named with its seq. What it says of each event is the transition table's
(`uwf.queue.rules.problem`), tested here directly; tests/unit/test_queue_rules.py walks
every pair the table forbids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.queuekit import Queue, at, queue_on
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Outcome
from uwf.queue import rules
from uwf.queue.entry import QueueEntry
from uwf.queue.events import (
    QueueAdded,
    QueueCancelled,
    QueueCompleted,
    QueueDrained,
    QueueLeased,
    QueueReleased,
    QueueReset,
    QueueStatusSet,
)
from uwf.store import Store


def verify(cli: Cli) -> dict[str, object]:
    result = cli.run("log", "verify", "--json")
    payload: dict[str, object] = json.loads(result.out)
    assert (result.code == 0) == payload["ok"]
    return payload


def forge(home: Path, entry: str, data: EventData) -> None:
    """Append an event the commands would refuse, straight through the journal: a log
    that chains and parses, with a transition that should never happen."""
    store = Store.open(home)
    try:
        store.journal.write(lambda views: Outcome([NewEvent(f"queue/{entry}", data)]))
    finally:
        store.close()


def every_transition(q: Queue) -> dict[str, str]:
    """Entries taken through each command: lease, renew, complete, release (plain and
    failed), park, reset, reclaim, cancel, status set, drain."""
    q.policy("--max-attempts", "2", "--backoff-base-ms", "1000", "--max-concurrent", "8")
    names = ("done", "parked", "reclaimed", "cancelled", "set", "drained")
    ids = {name: q.add(now=at(index / 1000), prompt=name) for index, name in enumerate(names)}
    leases = {}
    for name in ("done", "parked", "reclaimed"):  # entries are leased in queue order
        (lease,) = q.lease("--limit", "1", now=at(1))
        assert lease["id"] == ids[name]
        leases[lease["id"]] = lease["leaseId"]
    done, parked = ids["done"], ids["parked"]
    q.ok("sched", "renew", done, "--lease", leases[done], now=at(2))
    q.ok("sched", "complete", done, "--lease", leases[done], now=at(3))
    q.ok("sched", "release", parked, "--lease", leases[parked], now=at(2))
    for second in (10, 20):  # two failed attempts: parked at maxAttempts 2
        (lease,) = q.lease("--limit", "1", now=at(second))
        assert lease["id"] == parked
        q.ok("sched", "release", parked, "--lease", lease["leaseId"], "--failed",
             now=at(second + 1))
    assert q.entry(parked)["status"] == "parked"
    q.ok("sched", "reset", parked)
    q.ok("sched", "reclaim", now=at(10_000))  # the reclaimed entry's lease expired
    q.ok("queue", "cancel", ids["cancelled"])
    q.ok("queue", "status", ids["set"], "--set", "error")
    return ids


def test_every_transition_the_commands_make_verifies_clean(cli: Cli) -> None:
    """End to end: the log the commands wrote verifies clean, and an event forged into
    it is named with its seq, in the words of the table (the cases below)."""
    q = queue_on(cli)
    ids = every_transition(q)
    q.ok("queue", "drain")
    payload = verify(cli)
    assert payload["ok"], payload["problems"]
    forge(cli.home, ids["set"], QueueLeased("01M8BBRF2GM9SD3B54Z7VJ3W7C", 10**15, 1))
    head = int(q.events()[-1]["seq"])
    problems = verify(cli)["problems"]
    assert isinstance(problems, list)
    assert [(p["seq"], p["problem"]) for p in problems] == [
        (head, f"queue.leased of queue/{ids['set']}: leased while parked")]


# The entries `every_transition` leaves, as the transition table sees them: `set` was
# set to error (parked), `cancelled` cancelled, `drained` still ready (the drain comes
# later), `done` completed; `ghost` never added.
ENTRY = "01M8BBRF2GM9SD3B54Z7VJ3W7E"


def entry_in(status: str) -> QueueEntry:
    return QueueEntry(ENTRY, "/r", 1, "2026-12-01T10:00:00.000Z", "2026-12-01T10:00:00.000Z",
                      status)


SET, CANCELLED, READY, DONE = (entry_in("parked"), entry_in("cancelled"), entry_in("ready"),
                               entry_in("drained"))


@pytest.mark.parametrize(("state", "data", "problem"), [
    (SET, QueueLeased("01M8BBRF2GM9SD3B54Z7VJ3W7C", 10**15, 1),
     "queue.leased of queue/{id}: leased while parked"),
    (CANCELLED, QueueCompleted("01M8BBRF2GM9SD3B54Z7VJ3W7C"),
     "queue.completed of queue/{id}: the entry is cancelled, not leased"),
    (READY, QueueLeased("01M8BBRF2GM9SD3B54Z7VJ3W7C", 10**15, 3),
     "queue.leased of queue/{id}: attempt 3 after 0 failed attempts"),
    (READY, QueueReset(0), "queue.reset of queue/{id}: reset while ready, not parked"),
    (DONE, QueueCancelled("drained"),
     "queue.cancelled of queue/{id}: cancelled while already drained"),
    (DONE, QueueDrained(), "queue.drained of queue/{id}: drained while drained, not ready"),
    (READY, QueueStatusSet("leased", "ready"),
     "queue.status_set of queue/{id}: status set to 'leased', which is not a status an "
     "operator sets"),
    (READY, QueueAdded(repo="/r", priority=1), "queue/{id} added twice"),
    (None, QueueDrained(), "queue.drained before queue/{id} was added"),
])
def test_a_transition_the_commands_refuse_is_named(state: QueueEntry | None, data: EventData,
                                                   problem: str) -> None:
    assert rules.problem(state, data, f"queue/{ENTRY}") == problem.format(id=ENTRY)


def test_a_release_of_a_stale_lease_is_named(cli: Cli) -> None:
    q = queue_on(cli)
    entry = q.add(now=at(0))
    (first,) = q.lease(now=at(1))
    q.ok("sched", "release", entry, "--lease", first["leaseId"], now=at(2))
    (second,) = q.lease(now=at(3))
    forge(cli.home, entry, QueueReleased(first["leaseId"], True, 1))
    problems = verify(cli)["problems"]
    assert isinstance(problems, list)
    assert [p["problem"] for p in problems] == [
        f"queue.released of queue/{entry}: lease {first['leaseId']} is not the live lease "
        f"{second['leaseId']}"]
