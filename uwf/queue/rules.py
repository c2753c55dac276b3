"""The queue entry as an aggregate (SPEC §8, docs/queue.md): its transition table (which
event may follow which status, the status after it), `refusal` (why an event may not
happen to an entry, its time rules included), `evolve` (the entry after an event, over
its whole state, `uwf.queue.entry.QueueEntry`), and the policy the lease rules are
judged under.

An entry is `ready`, `leased`, `drained`, `parked`, `cancelled` or `waiting` (its
run waits for an answer; resumed to `ready` once answered); before its
`queue.added` it does not exist (None). Everything that decides or folds an entry
reads these: the commands (`uwf/queue/decide.py`) judge the entry the `queue` view
holds with `refusal`; the view (`uwf/queue/projection.py`) is `evolve` folded;
`log verify` (`uwf/queue/order.py`) folds the same `evolve` and names what `refusal`
refuses.

Pure: no store, no clock, no I/O.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import msgspec

from uwf.engine.clock import format_ts
from uwf.engine.events import Envelope, EventData
from uwf.queue.entry import TERMINAL as _TERMINAL
from uwf.queue.entry import Lease, QueueEntry
from uwf.queue.events import (
    QueueAdded,
    QueueCancelled,
    QueueCompleted,
    QueueDelivered,
    QueueDeliveryFailed,
    QueueDrained,
    QueueLeased,
    QueuePublished,
    QueueReceived,
    QueueReclaimed,
    QueueReleased,
    QueueRenewed,
    QueueReset,
    QueueResumed,
    QueueStatusSet,
    QueueWaiting,
    SchedPolicySet,
)
from uwf.queue.terms import STATUSES

READY, LEASED, DRAINED, PARKED, CANCELLED, WAITING = STATUSES
TERMINAL = _TERMINAL  # drained, cancelled: what the entry's whole state calls ended
T = TypeVar("T")
SETTABLE = (READY, DRAINED, PARKED, CANCELLED)  # `queue status --set`: a lease is granted

# What an event does to an entry: its type, told apart further by what three types
# say (a release: given back, failed and ready after a backoff, or failed and parked
# at maxAttempts; a reclaim: ready or parked; a status set: the status set).
KINDS = ("added", "leased", "renewed", "completed", "released", "released_failed",
         "released_parked", "reclaimed", "reclaimed_parked", "drained", "reset", "cancelled",
         "waiting", "resumed", *(f"set_{status}" for status in SETTABLE))
_SET = {f"set_{status}": status for status in SETTABLE}

# The table. A status (None: not added yet) -> the kinds that may follow it -> the
# status after. A pair not here is refused by the commands and named by `log verify`.
# An event that names a lease (a renew, complete, release or reclaim) follows `leased`
# only for the live lease: a holder's only while it is live (expiresAt > the event's
# instant), a reclaim only once it has expired.
TRANSITIONS: dict[str | None, dict[str, str]] = {
    None: {"added": READY},
    READY: {"leased": LEASED, "drained": DRAINED, "cancelled": CANCELLED, **_SET},
    LEASED: {"renewed": LEASED, "completed": DRAINED, "released": READY,
             "released_failed": READY, "released_parked": PARKED, "reclaimed": READY,
             "reclaimed_parked": PARKED, "cancelled": CANCELLED, "waiting": WAITING, **_SET},
    PARKED: {"reset": READY, "cancelled": CANCELLED, **_SET},
    WAITING: {"resumed": READY, "cancelled": CANCELLED, **_SET},
    DRAINED: {**_SET},
    CANCELLED: {**_SET},
}
# A status outside the table (only a forged status set leaves one, and `log verify`
# named it there) is a live status no command knows: it may be cancelled or set.
_UNKNOWN_STATUS = {"cancelled": CANCELLED, **_SET}
RECLAIMS = frozenset({"reclaimed", "reclaimed_parked"})
# The event types judged at their own instant: a lease's expiry, or the ceilings.
TIMED = frozenset({QueueLeased.type, QueueRenewed.type, QueueCompleted.type,
                   QueueReleased.type, QueueReclaimed.type, QueueWaiting.type})

# Why a pair may not happen: the codes `refusal` returns. The commands word their
# refusals from these (decide.py), `log verify` its problems (`problem`).
BEFORE_ADDED = "before-added"
ADDED_TWICE = "added-twice"
NOT_SETTABLE = "not-settable"  # a status set to `leased`, or to no status at all
WRONG_STATUS = "wrong-status"  # the pair is not in the table
NOT_THE_LEASE = "not-the-lease"  # the event names a lease that is not the live one
EXPIRED = "expired"  # a holder acts on a lease expired at the event's instant
NOT_EXPIRED = "not-expired"  # a reclaim of a lease still live at its instant
ATTEMPT = "attempt"  # a lease's attempt is not the failed attempts + 1
ATTEMPTS = "attempts"  # a release or reclaim counts the failed attempts wrong
PREVIOUS = "previous"  # a cancel or status set names a status the entry was not in
IN_BACKOFF = "in-backoff"  # a lease before the entry's backoff ran out, at its instant
ALREADY = "already"  # a status set to the status the entry has: nothing to do
# Every code `refusal` returns: each is a refusal of a decider and a problem `log verify`
# names (tests/unit/test_refusals_named.py walks them).
REFUSALS = (BEFORE_ADDED, ADDED_TWICE, NOT_SETTABLE, WRONG_STATUS, NOT_THE_LEASE, EXPIRED,
            NOT_EXPIRED, ATTEMPT, ATTEMPTS, PREVIOUS, IN_BACKOFF, ALREADY)


# The events a lease's holder records while it holds the lease.
Held = QueueRenewed | QueueCompleted | QueueReleased | QueueWaiting


def kind_of(data: EventData) -> str | None:
    """The table's name for what `data` does to an entry (None: not a queue event)."""
    if isinstance(data, QueueReleased):
        return ("released" if not data.failed else
                "released_parked" if data.parked else "released_failed")
    if isinstance(data, QueueReclaimed):
        return "reclaimed_parked" if data.parked else "reclaimed"
    if isinstance(data, QueueStatusSet):
        return f"set_{data.status}"
    return _KIND.get(type(data))


_KIND: dict[type[EventData], str] = {
    QueueAdded: "added", QueueLeased: "leased", QueueRenewed: "renewed",
    QueueCompleted: "completed", QueueDrained: "drained", QueueReset: "reset",
    QueueCancelled: "cancelled", QueueWaiting: "waiting", QueueResumed: "resumed",
}


def follows(status: str | None) -> dict[str, str]:
    """The kinds that may follow `status`, each with the status after it."""
    return TRANSITIONS.get(status, _UNKNOWN_STATUS)


def refusal(entry: QueueEntry | None, data: EventData, at: int | None = None) -> str | None:
    """Why `data`, happening at `at` (epoch ms, the event's instant; None: not judged
    by time), may not happen to `entry` (None: not added), or None when the table allows
    it. One code, the first that applies, so one problem is named once."""
    kind = kind_of(data)
    if kind is None:
        return None
    if entry is None:
        return None if kind in TRANSITIONS[None] else BEFORE_ADDED
    if kind == "added":
        return ADDED_TWICE
    if isinstance(data, QueueStatusSet) and data.status not in SETTABLE:
        return NOT_SETTABLE
    if kind not in follows(entry.status):
        return WRONG_STATUS
    if isinstance(data, Held | QueueReclaimed):
        lease = entry.lease
        if lease is None or data.lease_id != lease.id:
            return NOT_THE_LEASE
        if at is not None:
            if kind in RECLAIMS:
                return NOT_EXPIRED if lease.expires_at_ms > at else None
            if lease.expires_at_ms <= at:
                return EXPIRED
    if isinstance(data, QueueLeased):
        if at is not None and not out_of_backoff(entry.next_eligible_at_ms, at):
            return IN_BACKOFF
        if data.attempt != entry.attempts + 1:
            return ATTEMPT
    if isinstance(data, QueueReleased | QueueReclaimed) and data.attempts != counted(entry,
                                                                                     data):
        return ATTEMPTS
    if isinstance(data, QueueStatusSet) and data.status == entry.status:
        return ALREADY
    if isinstance(data, QueueCancelled | QueueStatusSet) and data.previous != entry.status:
        return PREVIOUS
    return None


def counted(entry: QueueEntry, data: QueueReleased | QueueReclaimed) -> int:
    """The failed attempts after a release or reclaim: one more unless given back."""
    failed = not isinstance(data, QueueReleased) or data.failed
    return entry.attempts + 1 if failed else entry.attempts


# What `log verify` says when an event follows a status the table does not allow it.
_WRONG_STATUS = {
    QueueLeased.type: "leased while {status}",
    QueueDrained.type: "drained while {status}, not ready",
    QueueReset.type: "reset while {status}, not parked",
    QueueCancelled.type: "cancelled while already {status}",
    QueueResumed.type: "resumed while {status}, not waiting",
    **{t.type: "the entry is {status}, not leased"
       for t in (QueueRenewed, QueueCompleted, QueueReleased, QueueReclaimed, QueueWaiting)},
}


def problem(entry: QueueEntry | None, data: EventData, subject: str, at: int | None = None
            ) -> str | None:
    """What `log verify` says of `data` happening at `at` to the entry `subject` (None:
    not added; the answer None: the table allows it)."""
    code = refusal(entry, data, at)
    if code is None:
        return None
    if code == BEFORE_ADDED:
        return f"{data.type} before {subject} was added"
    if code == ADDED_TWICE:
        return f"{subject} added twice"
    assert entry is not None
    return f"{data.type} of {subject}: {_words(code, entry, data, at)}"


def _words(code: str, entry: QueueEntry, data: EventData, at: int | None) -> str:
    status = entry.status
    if code == NOT_SETTABLE:
        assert isinstance(data, QueueStatusSet)
        return f"status set to {data.status!r}, which is not a status an operator sets"
    if code == WRONG_STATUS:
        return _WRONG_STATUS[data.type].format(status=status)
    if code == ALREADY:
        return f"status set to {status}, which it already was"
    if code == PREVIOUS:
        assert isinstance(data, QueueCancelled | QueueStatusSet)
        return f"previous is {data.previous}, but the entry was {status}"
    if code == IN_BACKOFF:
        assert at is not None
        return (f"leased at {format_ts(at)}, in its backoff until "
                f"{format_ts(entry.next_eligible_at_ms or 0)}")
    if code == ATTEMPT:
        assert isinstance(data, QueueLeased)
        return f"attempt {data.attempt} after {entry.attempts} failed attempts"
    if code == ATTEMPTS:
        assert isinstance(data, QueueReleased | QueueReclaimed)
        return f"{data.attempts} attempts recorded where {counted(entry, data)} were counted"
    assert isinstance(data, Held | QueueReclaimed)
    lease = entry.lease
    if code == NOT_THE_LEASE:
        return f"lease {data.lease_id} is not the live lease {lease and lease.id}"
    assert lease is not None
    assert at is not None
    if code == NOT_EXPIRED:
        return (f"lease {data.lease_id} reclaimed at {format_ts(at)}, before it expired at "
                f"{format_ts(lease.expires_at_ms)}")
    return (f"lease {data.lease_id} had expired at {format_ts(lease.expires_at_ms)}, before "
            f"this event ({format_ts(at)})")


def leads_to(status: str, data: EventData) -> str:
    """The status after `data`: the table's target when the event may follow `status`,
    else what the event says (a forged lease is a lease), so the view shows what the log
    holds and `log verify` names each problem once. A renew moves no status."""
    kind = kind_of(data)
    if kind is None:
        return status
    target = follows(status).get(kind)
    if target is not None:
        return target
    if isinstance(data, QueueRenewed):
        return status
    if isinstance(data, QueueStatusSet):
        return data.status
    return _AS_IT_SAYS[kind]


# Every kind leads to one status wherever the table allows it (tests/unit/test_queue_rules.py).
_AS_IT_SAYS = {kind: target for row in TRANSITIONS.values() for kind, target in row.items()}


_replace = msgspec.structs.replace


def added(entry_id: str, data: QueueAdded, ts: str) -> QueueEntry:
    """The entry its `queue.added` makes: ready, no attempt yet."""
    return QueueEntry(
        id=entry_id, repo=data.repo, priority=data.priority, enqueued_at=ts, updated_at=ts,
        workflow=data.workflow, workflow_hash=data.workflow_hash, prompt=data.prompt,
        run=data.run, session=data.session, agent=data.agent, timeout_sec=data.timeout_sec,
        idle_timeout_sec=data.idle_timeout_sec, expected_artifacts=data.expected_artifacts,
        note=data.note, key=data.key, broker=_given(data.broker),
        topic_prefix=_given(data.topic_prefix), auth_token=_given(data.auth_token))


def evolve(entry: QueueEntry | None, event: Envelope) -> QueueEntry | None:
    """The entry after `event` (None: not added yet), over its whole state: what the
    event says happened, needing no policy and no clock. An event the table refuses
    is folded as it says all the same (a forged lease is a lease), so the view shows
    what the log holds and `log verify`, folding this too, names each problem once;
    an entry added twice starts over; nothing folds into an entry not added."""
    data = event.data
    if isinstance(data, QueueAdded):
        return added(event.subject.removeprefix("queue/"), data, event.ts)
    if entry is None:
        return None
    # One copy of the entry an event (its status, stamp and count with the event's own
    # fields), not one a field group: a copy is the whole entry's 29 fields.
    changes: dict[str, Any] = {"status": leads_to(entry.status, data),
                               "updated_at": event.ts, "events": entry.events + 1}
    if isinstance(data, QueuePublished | QueueDeliveryFailed | QueueDelivered | QueueReceived):
        return _message(entry, data, changes)
    if isinstance(data, QueueLeased):
        changes["lease"] = Lease(data.lease_id, data.expires_at_ms, data.attempt, data.session)
        changes["next_eligible_at_ms"] = None
        return _replace(entry, **changes)
    if isinstance(data, QueueRenewed):  # only the live lease is extended
        live = entry.lease
        if live is not None and live.id == data.lease_id:
            changes["lease"] = _replace(live, expires_at_ms=data.expires_at_ms)
        return _replace(entry, **changes)
    if isinstance(data, QueueCompleted | QueueReleased | QueueWaiting) and data.run is not None:
        changes["run"] = data.run
    changes["lease"] = changes["next_eligible_at_ms"] = None
    if isinstance(data, QueueReleased | QueueReclaimed):  # the attempts the event counted
        changes["attempts"] = data.attempts
        if isinstance(data, QueueReleased) and not data.failed:
            pass
        elif data.parked:
            changes["parked_reason"] = data.reason or "failed"
        else:
            changes["next_eligible_at_ms"] = data.next_eligible_at_ms
            changes["parked_reason"] = None
    elif isinstance(data, QueueReset):
        changes["attempts"] = 0
        changes["parked_reason"] = None
    elif isinstance(data, QueueStatusSet):
        changes["parked_reason"] = "set by an operator" if data.status == PARKED else None
    return _replace(entry, **changes)


def _given(value: T | msgspec.UnsetType) -> T | None:
    return None if isinstance(value, msgspec.UnsetType) else value


def _message(entry: QueueEntry, data: EventData, changes: dict[str, Any]) -> QueueEntry:
    """The entry after one of its MQTT events: `changes` (its stamp, its count) and its
    messaging counters (no status moves)."""
    if isinstance(data, QueuePublished):
        changes["last_seq"] = max(entry.last_seq, data.seq)
    elif isinstance(data, QueueDeliveryFailed):
        changes["undelivered"] = sorted({*entry.undelivered, data.seq})
    elif isinstance(data, QueueDelivered):
        changes["undelivered"] = [seq for seq in entry.undelivered if seq not in data.seqs]
    else:
        assert isinstance(data, QueueReceived)
        changes["received_seq"] = max(entry.received_seq, data.seq)
    return _replace(entry, **changes)


# -- the policy the lease rules are judged under ----------------------------------------

class Policy(msgspec.Struct, frozen=True, rename="camel"):
    """The scheduling policy; the defaults are SPEC §8's (conservative: one at a time).

    Ceilings are per pool: the entries of one session label are a pool, and the
    entries without a session are the default pool. A pool's ceiling is its own
    (`sessions`), else `max_concurrent`; a lease in one pool never blocks another's.
    `max_total`, when set, bounds the active leases of all pools together.
    """

    max_concurrent: int = 1
    max_attempts: int = 3
    lease_ttl_ms: int = 300_000
    backoff_base_ms: int = 1000
    backoff_factor: float = 2
    backoff_cap_ms: int = 60_000
    sessions: dict[str, int] = {}  # msgspec copies mutable defaults
    max_total: int | None = None

    def ceiling(self, pool: str | None) -> int:
        """The most leases active at once in `pool` (a session label; None: the default
        pool, of entries without a session)."""
        return self.max_concurrent if pool is None else self.sessions.get(
            pool, self.max_concurrent)


def policy_of(data: SchedPolicySet) -> Policy:
    """The policy a `sched.policy_set` event records."""
    return Policy(data.max_concurrent, data.max_attempts, data.lease_ttl_ms,
                  data.backoff_base_ms, data.backoff_factor, data.backoff_cap_ms,
                  dict(data.sessions), data.max_total)


def backoff_ms(policy: Policy, attempts: int) -> int:
    """`min(round(base * factor^(attempts-1)), cap)`, rounding halves up, no jitter."""
    delay = float(policy.backoff_base_ms)
    for _ in range(max(0, attempts - 1)):
        delay *= policy.backoff_factor
        if delay >= policy.backoff_cap_ms:
            return policy.backoff_cap_ms
    return min(math.floor(delay + 0.5), policy.backoff_cap_ms)


def failure(policy: Policy, attempts: int, now: int) -> tuple[int, int | None, bool]:
    """One more failed attempt after `attempts`: (attempts, nextEligibleAt or None,
    parked). Ready after a backoff, or parked at maxAttempts."""
    attempts += 1
    if attempts >= policy.max_attempts:
        return attempts, None, True
    return attempts, now + backoff_ms(policy, attempts), False


def out_of_backoff(next_eligible_at_ms: int | None, now: int) -> bool:
    """Whether a ready entry may be leased at `now`: no backoff, or it has run out."""
    return (next_eligible_at_ms or 0) <= now


def pool_room(policy: Policy, pool: str | None, active: int) -> int:
    """How many more leases `pool` may have while `active` of its leases are live."""
    return policy.ceiling(pool) - active


def total_room(policy: Policy, total: int) -> int | None:
    """How many more leases every pool together may have while `total` are live (None:
    no overall cap)."""
    return None if policy.max_total is None else policy.max_total - total


def over_ceiling(policy: Policy, pool: str | None, active: int, total: int, ts: str
                 ) -> str | None:
    """What `log verify` says of a lease at `ts` while `active` leases of its pool and
    `total` of every pool were live (SPEC §8: never over a pool's ceiling, nor the
    overall cap), or None."""
    if pool_room(policy, pool, active) <= 0:
        whose = "the default pool" if pool is None else f"session {pool}"
        return (f"leased at {ts} while {active} leases of {whose} were active: over its "
                f"ceiling (maxConcurrent {policy.ceiling(pool)})")
    room = total_room(policy, total)
    if room is not None and room <= 0:
        return (f"leased at {ts} while {total} leases were active: over the overall cap "
                f"(maxTotal {policy.max_total})")
    return None
