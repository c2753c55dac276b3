"""The queue entry's deciders: an entry as the views hold it, a command, the instant
and the policy in; the event to record out, or a refusal (`uwf.errors`).

Each builds the event its command would record and asks the aggregate's rules
(`uwf.queue.rules.refusal`, over the entry's whole state as `evolve` left it in the
view: its status, lease, attempts and backoff, judged at `now`) whether it may happen,
then words the refusal for the command's user: so every refusal here is a problem
`log verify` names on a log holding that event (tests/unit/test_refusals_named.py).
`uwf.queue.sched` and `uwf.queue.service` are the I/O around them:
they read the views and call these inside the writers' section
(`journal.write_at`), so `now` is the instant the events are recorded at. Pure: no
store, no clock, no CAS, no environment.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from uwf.engine.clock import format_ts
from uwf.errors import NothingToDo, Rejected
from uwf.queue.entry import QueueEntry
from uwf.queue.events import (
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
from uwf.queue.rules import (
    ALREADY,
    EXPIRED,
    NOT_THE_LEASE,
    SETTABLE,
    WRONG_STATUS,
    Held,
    Policy,
    failure,
    refusal,
)

# -- a lease holder's commands ----------------------------------------------------------

def _held(entry: QueueEntry, data: Held, now: int) -> None:
    """Refuse a lease holder's event unless its lease is the entry's live lease at `now`."""
    code = refusal(entry, data, now)
    if code is None:
        return
    if code == WRONG_STATUS:
        raise Rejected(f"queue entry {entry.id} is {entry.status}, not leased",
                       "its lease is over; see `uwf queue logs " + entry.id + "`")
    if code == NOT_THE_LEASE:
        raise Rejected(f"lease {data.lease_id} is not queue entry {entry.id}'s lease",
                       "use the lease id `uwf sched lease` gave you")
    # The only check left that an event built from the entry itself can fail.
    assert code == EXPIRED, code
    assert entry.lease is not None
    raise Rejected(f"lease {data.lease_id} expired at {format_ts(entry.lease.expires_at_ms)}",
                   "the entry waits for `uwf sched reclaim`")


def renew(entry: QueueEntry, lease_id: str, now: int, policy: Policy) -> QueueRenewed:
    """Extend the live lease `lease_id` to now + leaseTtlMs."""
    data = QueueRenewed(lease_id, now + policy.lease_ttl_ms)
    _held(entry, data, now)
    return data


def complete(entry: QueueEntry, lease_id: str, now: int, run: str | None = None
             ) -> QueueCompleted:
    """Terminal success of the live lease `lease_id`; `run`: the run its holder worked on."""
    data = QueueCompleted(lease_id, run)
    _held(entry, data, now)
    return data


def release(entry: QueueEntry, lease_id: str, now: int, policy: Policy, *,
            failed: bool = False, reason: str = "", run: str | None = None) -> QueueReleased:
    """The live lease `lease_id` given back: ready at once, or (`failed`) one failed
    attempt, ready after its backoff or parked at maxAttempts."""
    data = (failed_release(entry, lease_id, now, policy, reason or "failed", run=run)
            if failed else QueueReleased(lease_id, False, entry.attempts, reason, run=run))
    _held(entry, data, now)
    return data


def wait(entry: QueueEntry, lease_id: str, now: int, run: str, question: str
         ) -> QueueWaiting:
    """The live lease `lease_id` given back because its run waits for an answer: the
    entry waits (no attempt failed) until it is resumed."""
    data = QueueWaiting(lease_id, run, question)
    _held(entry, data, now)
    return data


def resume(entry: QueueEntry, reason: str) -> QueueResumed:
    """A waiting entry ready again (its run was answered, or its deadline passed)."""
    data = QueueResumed(reason)
    if refusal(entry, data) is not None:
        raise Rejected(f"queue entry {entry.id} is {entry.status}, not waiting",
                       "nothing to resume")
    return data


def failed_release(entry: QueueEntry, lease_id: str, now: int, policy: Policy, reason: str,
                   *, run: str | None = None) -> QueueReleased:
    """The release of `lease_id` as one failed attempt under `policy`: ready after its
    backoff, or parked at maxAttempts (the reason then says which attempt)."""
    attempts, eligible, parked = failure(policy, entry.attempts, now)
    if parked:
        reason = f"{reason} (attempt {attempts} of {policy.max_attempts})"
    return QueueReleased(lease_id, True, attempts, reason, eligible, parked, run)


def fail_attempt(entry: QueueEntry, why: str, now: int, policy: Policy
                 ) -> tuple[QueueReleased, Rejected]:
    """`queue status --set completed` of a leased entry whose work is not there (`why`):
    its live lease released as one failed attempt, and the refusal to give once that is
    recorded. An entry not leased (or whose lease expired) is refused at once: there is
    no attempt to count."""
    lease = entry.lease
    data = failed_release(entry, "" if lease is None else lease.id, now, policy, why)
    if refusal(entry, data, now) is not None:
        raise Rejected(f"queue entry {entry.id} is not completed: {why}",
                       "put the artifact in place, then set it again")
    after = (f"parked at attempt {data.attempts}" if data.parked else
             f"ready again at {format_ts(data.next_eligible_at_ms or now)}, attempt "
             f"{data.attempts} failed")
    return data, Rejected(
        f"queue entry {entry.id} is not completed: {why}; recorded as a failed attempt "
        f"({after})", "put the artifact in place before completing it")


# -- the scheduler's commands -----------------------------------------------------------

def grant(chosen: Sequence[QueueEntry], lease_ids: Sequence[str], now: int, policy: Policy,
          *, session: str | None = None, reached: Sequence[str] = ()
          ) -> list[tuple[QueueEntry, QueueLeased]]:
    """A lease of each entry `chosen` (each with its id from `lease_ids`) that the table
    lets be leased now: ready, out of its backoff (`refusal` at `now`). None granted is
    exit 3, naming the first ceiling `reached` if one was (the selection's reasons), else
    that nothing is eligible."""
    expires = now + policy.lease_ttl_ms
    granted = []
    for entry, lease_id in zip(chosen, lease_ids, strict=True):
        data = QueueLeased(lease_id, expires, entry.attempts + 1, session)
        if refusal(entry, data, now) is None:
            granted.append((entry, data))
    if granted:
        return granted
    if reached:
        raise NothingToDo(reached[0], "wait for a lease to end, or raise the ceiling "
                          "(`uwf sched policy set [--session S] --max-concurrent N`, "
                          "or --max-total N)")
    whose = f" for session {session}" if session is not None else ""
    raise NothingToDo(f"no queue entry is eligible{whose}", "see why with `uwf sched plan`")


def reclaim(entries: Iterable[QueueEntry], now: int, policy: Policy
            ) -> list[tuple[QueueEntry, QueueReclaimed]]:
    """Every expired lease of `entries` taken back, each one failed attempt (backoff or
    park); an entry the table refuses it for (not leased, its lease live) keeps it."""
    taken = []
    for entry in entries:
        lease = entry.lease
        attempts, eligible, parked = failure(policy, entry.attempts, now)
        reason = "" if lease is None else (
            f"lease {lease.id} expired at {format_ts(lease.expires_at_ms)}")
        data = QueueReclaimed("" if lease is None else lease.id, attempts, reason, eligible,
                              parked)
        if refusal(entry, data, now) is None:
            taken.append((entry, data))
    return taken


def reset(entry: QueueEntry) -> QueueReset:
    """A parked entry ready again with attempts 0; only a parked one."""
    data = QueueReset(entry.attempts)
    if refusal(entry, data) is not None:
        raise Rejected(f"queue entry {entry.id} is {entry.status}, not parked",
                       "only a parked entry is reset")
    return data


# -- the queue's commands without a lease -----------------------------------------------

def drain(entries: Iterable[QueueEntry]) -> list[tuple[QueueEntry, QueueDrained]]:
    """Each of `entries` the table lets be drained (handed to the host outside any
    policy): the ready ones, in backoff or not."""
    data = QueueDrained()
    return [(entry, data) for entry in entries if refusal(entry, data) is None]


def cancel(entry: QueueEntry, reason: str = "") -> QueueCancelled:
    """The entry will never run; a live lease on it is void."""
    data = QueueCancelled(entry.status, reason)
    if refusal(entry, data) is not None:
        raise Rejected(f"queue entry {entry.id} is already {entry.status}",
                       "nothing to cancel")
    return data


def settable(target: str) -> None:
    """Refuse a status an operator may not set (a lease is granted, never set)."""
    if target not in SETTABLE:
        raise Rejected("an entry is leased only by `uwf queue pick` or `uwf sched lease`",
                       "use one of them")


def set_status(entry: QueueEntry, target: str) -> QueueStatusSet:
    """The job registry's `status --set`: the table lets an operator set any status an
    operator sets, from any; setting the one the entry has is refused as nothing to do."""
    settable(target)
    data = QueueStatusSet(target, entry.status)
    code = refusal(entry, data)
    # A set from any status is in the table; what is left is the status it has.
    assert code in (None, ALREADY), code
    if code == ALREADY:
        raise Rejected(f"queue entry {entry.id} is already {target}", "nothing to do")
    return data
