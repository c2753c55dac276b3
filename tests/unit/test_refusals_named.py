"""Every refusal a decider can make is a problem `log verify` names on a forged log.

For each aggregate, each decider of its `decide.py` (the list is read from the module,
so a new decider fails here until it has a recipe) is called on the aggregate as a
small log leaves it (a grid of histories and instants), with each argument that
changes what it decides. Wherever it refuses (raises, or a batch decider leaves the
aggregate out), the event it would have written is appended to the log anyway, with a
valid chain, and `log verify` must name that line; the refusal's code (the rules'
`refusal`) must be one of the aggregate's `REFUSALS`. Each code of `REFUSALS` is met
by the walk, or forged here by hand when no command writes it (an event before the
aggregate exists, a count a command always gets right), so a code added to the rules
without a finding fails too.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest

from tests.refusalkit import T0, V1, V2, Call, Clocked, deciders, named, refused
from uwf.engine.events import EventData
from uwf.queue import decide as queue_decide
from uwf.queue import rules as queue_rules
from uwf.queue.entry import QueueEntry
from uwf.queue.events import (
    QueueAdded,
    QueueCancelled,
    QueueCompleted,
    QueueDrained,
    QueueLeased,
    QueueReclaimed,
    QueueReleased,
    QueueRenewed,
    QueueReset,
    QueueResumed,
    QueueStatusSet,
    QueueWaiting,
)
from uwf.workflows import decide as workflow_decide
from uwf.workflows import rules as workflow_rules
from uwf.workflows.events import WorkflowRegistered
from uwf.workflows.rules import WorkflowState

# -- the queue entry -----------------------------------------------------------------------

ENTRY = "01KB0000000000000000000001"
QSUBJECT = f"queue/{ENTRY}"
LEASE = "01KB00000000000000000000AA"  # the entry's lease in the histories that lease it
OTHER = "01KB00000000000000000000BB"  # a lease it never had
NEW = "01KB00000000000000000000CC"  # the id a new lease is given
TTL = 10_000
BACKOFF = 5_000
POLICIES = (queue_rules.Policy(lease_ttl_ms=TTL),  # a failure is ready after a backoff
            queue_rules.Policy(lease_ttl_ms=TTL, max_attempts=1))  # the first failure parks
LEASED = QueueLeased(LEASE, T0 + TTL, 1)
# Each history: the events that bring a new entry to a state, each at T0 + its index.
QUEUE_HISTORIES: dict[str, list[EventData]] = {
    "ready": [QueueAdded("/r", 100)],
    "leased": [QueueAdded("/r", 100), LEASED],
    "backoff": [QueueAdded("/r", 100), LEASED,
                QueueReleased(LEASE, True, 1, "failed", T0 + BACKOFF)],
    "parked": [QueueAdded("/r", 100), LEASED, QueueReleased(LEASE, True, 1, "failed",
                                                            None, True)],
    "waiting": [QueueAdded("/r", 100), LEASED, QueueWaiting(LEASE, "R", "Deploy?")],
    "drained": [QueueAdded("/r", 100), QueueDrained()],
    "cancelled": [QueueAdded("/r", 100), QueueCancelled("ready")],
    "set-parked": [QueueAdded("/r", 100), QueueStatusSet("parked", "ready")],
}
# When the deciders judge: the lease live and the backoff running; both over.
QUEUE_INSTANTS = (T0 + 10, T0 + TTL + BACKOFF)


def reclaimed(entry: QueueEntry, now: int, policy: queue_rules.Policy) -> QueueReclaimed:
    """The reclaim `decide.reclaim` builds for `entry` (whether it takes it or not)."""
    attempts, eligible, parked = queue_rules.failure(policy, entry.attempts, now)
    lease = entry.lease
    return QueueReclaimed("" if lease is None else lease.id, attempts, "expired", eligible,
                          parked)


def queue_calls(entry: QueueEntry, now: int) -> Iterator[Call]:
    """Every decider of uwf/queue/decide.py, with each argument that changes its answer."""
    d = queue_decide
    for policy in POLICIES:
        for lease_id in (LEASE, OTHER):
            yield ("renew", partial(d.renew, entry, lease_id, now, policy),
                   QueueRenewed(lease_id, now + policy.lease_ttl_ms))
            yield ("complete", partial(d.complete, entry, lease_id, now),
                   QueueCompleted(lease_id))
            yield ("release", partial(d.release, entry, lease_id, now, policy),
                   QueueReleased(lease_id, False, entry.attempts))
            failed = d.failed_release(entry, lease_id, now, policy, "failed")
            yield ("release", partial(d.release, entry, lease_id, now, policy, failed=True),
                   failed)
            yield ("failed_release", object, failed)  # builds the event, refuses nothing
            yield ("wait", partial(d.wait, entry, lease_id, now, "R", "Deploy?"),
                   QueueWaiting(lease_id, "R", "Deploy?"))
        lease = entry.lease
        yield ("fail_attempt", partial(d.fail_attempt, entry, "no artifact", now, policy),
               d.failed_release(entry, "" if lease is None else lease.id, now, policy,
                                "no artifact"))
        yield ("grant", partial(d.grant, [entry], [NEW], now, policy),
               QueueLeased(NEW, now + policy.lease_ttl_ms, entry.attempts + 1))
        yield ("reclaim", partial(d.reclaim, [entry], now, policy),
               reclaimed(entry, now, policy))
    yield ("resume", partial(d.resume, entry, "answered"), QueueResumed("answered"))
    yield ("reset", partial(d.reset, entry), QueueReset(entry.attempts))
    yield ("drain", partial(d.drain, [entry]), QueueDrained())
    yield ("cancel", partial(d.cancel, entry), QueueCancelled(entry.status))
    for target in (*queue_rules.SETTABLE, "leased"):
        yield ("set_status", partial(d.set_status, entry, target),
               QueueStatusSet(target, entry.status))
        yield ("settable", partial(d.settable, target), QueueStatusSet(target, entry.status))


def queue_entry_at(history: str) -> tuple[Clocked, QueueEntry]:
    clocked = Clocked()
    for index, data in enumerate(QUEUE_HISTORIES[history]):
        clocked.write(QSUBJECT, data, T0 + index)
    entry = clocked.store.read().get("queue", ENTRY)
    assert isinstance(entry, QueueEntry)
    return clocked, entry


def test_the_walk_calls_every_queue_decider() -> None:
    _, entry = queue_entry_at("ready")
    assert {name for name, _, _ in queue_calls(entry, T0)} == deciders(queue_decide)


# The codes no command writes (its event is built from the entry itself, or the entry
# is found first), each forged by hand onto a history.
QUEUE_LOG_ONLY: dict[str, tuple[str | None, EventData]] = {
    queue_rules.BEFORE_ADDED: (None, QueueDrained()),
    queue_rules.ADDED_TWICE: ("ready", QueueAdded("/r", 100)),
    queue_rules.ATTEMPT: ("ready", QueueLeased(NEW, T0 + 99 * TTL, 3)),
    queue_rules.ATTEMPTS: ("leased", QueueReleased(LEASE, True, 7)),
    queue_rules.PREVIOUS: ("ready", QueueCancelled("parked")),
}


@pytest.mark.parametrize("now", QUEUE_INSTANTS)
@pytest.mark.parametrize("history", QUEUE_HISTORIES)
def test_every_queue_refusal_is_named_by_verify(history: str, now: int) -> None:
    _, entry = queue_entry_at(history)
    walked = 0
    for name, call, data in queue_calls(entry, now):
        if not refused(call):
            continue
        code = queue_rules.refusal(entry, data, now)
        assert code in queue_rules.REFUSALS, (name, data, code)
        clocked, _ = queue_entry_at(history)  # a fresh log for each forged line
        assert named(clocked, QSUBJECT, data, now), (name, data)
        walked += 1
    assert walked, "no decider refused anything here: the grid lost its point"


@pytest.mark.parametrize("code", sorted(QUEUE_LOG_ONLY))
def test_a_queue_refusal_no_command_writes_is_named(code: str) -> None:
    history, data = QUEUE_LOG_ONLY[code]
    clocked = queue_entry_at(history)[0] if history else Clocked()
    entry = clocked.store.read().get("queue", ENTRY)
    assert queue_rules.refusal(entry, data, T0 + 10) == code
    assert named(clocked, QSUBJECT, data, T0 + 10)


def test_every_queue_refusal_code_is_walked() -> None:
    """Each code of the rules is a decider's refusal met in the walk above, or one no
    command writes, forged by hand."""
    seen: set[str | None] = set()
    for history in QUEUE_HISTORIES:
        _, entry = queue_entry_at(history)
        for now in QUEUE_INSTANTS:
            seen.update(queue_rules.refusal(entry, data, now)
                        for _, call, data in queue_calls(entry, now) if refused(call))
    assert seen.isdisjoint(QUEUE_LOG_ONLY)
    assert seen | set(QUEUE_LOG_ONLY) == set(queue_rules.REFUSALS)


# -- a registered workflow name ------------------------------------------------------------

WSUBJECT = "workflow/wf"
WORKFLOW_HISTORIES: dict[str, list[EventData]] = {
    "new": [],
    "registered": [WorkflowRegistered("wf", V1)],
    "moved": [WorkflowRegistered("wf", V1), WorkflowRegistered("wf", V2, V1)],
}


def workflow_at(history: str) -> tuple[Clocked, WorkflowState | None]:
    clocked = Clocked()
    for index, data in enumerate(WORKFLOW_HISTORIES[history]):
        clocked.write(WSUBJECT, data, T0 + index)
    return clocked, clocked.store.read().get("workflows", "wf")


def workflow_calls(state: WorkflowState | None) -> Iterator[Call]:
    """Every decider of uwf/workflows/decide.py: None is its refusal (nothing to do)."""
    current = None if state is None else state.hash
    for version in (V1, V2):
        yield ("register", partial(workflow_decide.register, state, "wf", version),
               WorkflowRegistered("wf", version, current))


def test_the_walk_calls_every_workflow_decider() -> None:
    assert {name for name, _, _ in workflow_calls(None)} == deciders(workflow_decide)


@pytest.mark.parametrize("history", WORKFLOW_HISTORIES)
def test_every_workflow_refusal_is_named_by_verify(history: str) -> None:
    _, state = workflow_at(history)
    seen: set[str | None] = set()
    for name, call, data in workflow_calls(state):
        if call() is not None:
            continue
        assert isinstance(data, WorkflowRegistered)
        code = workflow_rules.refusal(state, data)
        assert code in workflow_rules.REFUSALS, (name, data, code)
        seen.add(code)
        assert named(workflow_at(history)[0], WSUBJECT, data, T0 + 10), (name, data)
    assert seen == (set() if state is None else {workflow_rules.ALREADY})


def test_every_workflow_refusal_code_is_walked() -> None:
    """Each code of the rules is the decider's refusal (walked above), or one no command
    writes (PREVIOUS: the decider names the state's hash), forged by hand."""
    clocked, state = workflow_at("moved")
    forged = WorkflowRegistered("wf", V1, None)
    assert workflow_rules.refusal(state, forged) == workflow_rules.PREVIOUS
    assert named(clocked, WSUBJECT, forged, T0 + 10)
    seen: set[str | None] = set()
    for history in WORKFLOW_HISTORIES:
        _, state = workflow_at(history)
        seen.update(workflow_rules.refusal(state, data) for _, call, data
                    in workflow_calls(state) if call() is None and
                    isinstance(data, WorkflowRegistered))
    assert seen | {workflow_rules.PREVIOUS} == set(workflow_rules.REFUSALS)
