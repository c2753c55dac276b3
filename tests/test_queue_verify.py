"""`uwf log verify` follows each queue entry through the lease state machine (SPEC §9:
"no lease of a parked entry"): every transition the commands make verifies clean,
and an event the commands would have refused, written into the log anyway, is
named with its seq."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.queuekit import Queue, at, queue_on
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Outcome
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
    q = queue_on(cli)
    every_transition(q)
    q.ok("queue", "drain")
    payload = verify(cli)
    assert payload["ok"], payload["problems"]


@pytest.mark.parametrize(("forged", "problem"), [
    (lambda ids: ("set", QueueLeased("01M8BBRF2GM9SD3B54Z7VJ3W7C", 10**15, 1)),
     "queue.leased of queue/{set}: leased while parked"),
    (lambda ids: ("cancelled", QueueCompleted("01M8BBRF2GM9SD3B54Z7VJ3W7C")),
     "queue.completed of queue/{cancelled}: the entry is cancelled, not leased"),
    (lambda ids: ("drained", QueueLeased("01M8BBRF2GM9SD3B54Z7VJ3W7C", 10**15, 3)),
     "queue.leased of queue/{drained}: attempt 3 after 0 failed attempts"),
    (lambda ids: ("drained", QueueReset(0)),
     "queue.reset of queue/{drained}: reset while ready, not parked"),
    (lambda ids: ("done", QueueCancelled("drained")),
     "queue.cancelled of queue/{done}: cancelled while already drained"),
    (lambda ids: ("done", QueueDrained()),
     "queue.drained of queue/{done}: drained while drained, not ready"),
    (lambda ids: ("drained", QueueStatusSet("leased", "ready")),
     "queue.status_set of queue/{drained}: status set to 'leased', which is not a status an "
     "operator sets"),
    (lambda ids: ("drained", QueueAdded(repo="/r", priority=1)),
     "queue/{drained} added twice"),
    (lambda ids: ("ghost", QueueDrained()),
     "queue.drained before queue/{ghost} was added"),
])
def test_a_transition_the_commands_refuse_is_named(cli: Cli, forged: object,
                                                   problem: str) -> None:
    q = queue_on(cli)
    ids = every_transition(q)
    ids["ghost"] = "01M8BBRF2GM9SD3B54Z7VJ3W7D"
    assert verify(cli)["ok"]
    name, data = forged(ids)  # type: ignore[operator]
    forge(cli.home, ids[name], data)
    payload = verify(cli)
    problems = payload["problems"]
    assert isinstance(problems, list)
    assert [entry["problem"] for entry in problems] == [problem.format(**ids)]


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
