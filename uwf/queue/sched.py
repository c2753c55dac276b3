"""`uwf sched ...` and `uwf queue pick`: scheduling policy over the queue (SPEC §8).

Policy as data: a `sched.policy_set` event holds it (defaults until one is
written). Each lease-changing command decides inside one `journal.write_at`,
under the writers' lock, against views at the log's head and at the instant the
section was entered (its events' `ts`): the count of active leases and the grant
are one atomic step, and a lease's expiry is judged by a clock read after every
earlier write, never by one read before the lock (a process stalled between the
two would act on a lease that another process already saw expire). So active
leases (expiresAt > now) never exceed maxConcurrent whatever number of processes
lease at once, and however long any of them stalls. Every outcome
(lease id and expiry, attempts, next eligible time, parked) is decided by the
pure deciders (`uwf.queue.decide`, on the transition table of `uwf.queue.rules`)
and recorded in its event; the fold never consults the policy or the clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import msgspec

from uwf.config.limits import MAX_TIMEOUT_S
from uwf.engine.clock import format_ts
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Journal, Outcome, Views
from uwf.engine.ulids import new_ulid
from uwf.engine.viewspec import Query
from uwf.engine.writerlink import WriterLink
from uwf.errors import UsageError, UwfError
from uwf.queue import decide as decider
from uwf.queue import pgcalls
from uwf.queue.events import POLICY_SUBJECT, SchedPolicySet
from uwf.queue.projection import (
    DEFAULT_POOL,
    POLICY_KEY,
    QUEUE_ORDER,
    PolicyState,
    QueueEntry,
)
from uwf.queue.results import (
    EntryRecord,
    Granted,
    Leased,
    Planned,
    PlannedLease,
    PolicyShown,
    PolicyValues,
    PoolLoad,
    Reclaimed,
    ReclaimedLease,
    Skipped,
    SkippedCounts,
)
from uwf.queue.rules import TERMINAL, Policy, out_of_backoff, pool_room, total_room
from uwf.queue.service import artifact_failure, canonical_status, get_entry, ms_ts, record, show
from uwf.store import Store

T = TypeVar("T")
Decision = Callable[[Views, int], Outcome[T]]  # a command's decide, at the section's instant
PLAN_SKIPPED_SHOWN = 20
SKIP_REASONS = ("parked", "terminal", "leased", "waiting", "backoff", "concurrency-ceiling")
# Upper bounds on the policy, so every computed time is one the clock can print.
MAX_DURATION_MS = MAX_TIMEOUT_S * 1000
MAX_LABEL = 1000  # a session label's length, as `queue add --session` takes it
POLICY_LIMITS = {"maxConcurrent": 100_000, "maxAttempts": 10_000,
                 "leaseTtlMs": MAX_DURATION_MS, "backoffBaseMs": MAX_DURATION_MS,
                 "backoffFactor": 1000, "backoffCapMs": MAX_DURATION_MS}


# -- the policy ------------------------------------------------------------------------

def current_policy(views: Views) -> Policy:
    state: PolicyState | None = views.get("sched", POLICY_KEY)
    return Policy() if state is None else state.policy


def policy_values(policy: Policy) -> PolicyValues:
    """The policy as commands print it: a whole backoffFactor as an integer."""
    factor = policy.backoff_factor
    return PolicyValues(
        max_concurrent=policy.max_concurrent, max_attempts=policy.max_attempts,
        lease_ttl_ms=policy.lease_ttl_ms, backoff_base_ms=policy.backoff_base_ms,
        backoff_factor=int(factor) if float(factor).is_integer() else factor,
        backoff_cap_ms=policy.backoff_cap_ms, sessions=policy.sessions,
        max_total=policy.max_total)


def show_policy(views: Views) -> PolicyShown:
    return _policy_shown(views)


def _policy_shown(views: Views) -> PolicyShown:
    state: PolicyState | None = views.get("sched", POLICY_KEY)
    return PolicyShown(policy=policy_values(current_policy(views)), default=state is None,
                       updated_at=None if state is None else state.updated_at)


def set_policy(journal: Journal, changes: dict[str, Any], session: str | None = None
               ) -> PolicyShown:
    """Change some of the policy's values (camelCase names); the whole policy, checked,
    is recorded. With `session`, `maxConcurrent` is that session's own ceiling (the
    only value a session has of its own). `maxTotal` 0 removes the overall cap.
    Invalid values are a usage error and nothing is written."""
    given = {name: value for name, value in changes.items() if value is not None}
    if not given:
        raise UsageError("no policy value given",
                         "give at least one of --max-concurrent, --max-attempts, "
                         "--lease-ttl-ms, --backoff-base-ms, --backoff-factor, "
                         "--backoff-cap-ms, --max-total")
    if session is not None:
        if not 1 <= len(session) <= MAX_LABEL:
            raise UsageError(f"a session label has 1 to {MAX_LABEL} characters",
                             "give the label entries carry (`queue add --session`)")
        if set(given) != {"maxConcurrent"}:
            raise UsageError("with --session, give --max-concurrent only",
                             "a session has a ceiling of its own; the rest of the policy "
                             "is shared: set it without --session")

    def decide(views: Views) -> Outcome[PolicyShown]:
        current = current_policy(views)
        merged = {**msgspec.to_builtins(current), **given}
        if session is not None:
            merged = {**msgspec.to_builtins(current),
                      "sessions": {**current.sessions, session: given["maxConcurrent"]}}
        policy = check_policy(merged)
        if policy == current and views.get("sched", POLICY_KEY) is not None:
            return Outcome((), _policy_shown(views))  # already so: nothing to record
        event = SchedPolicySet(policy.max_concurrent, policy.max_attempts,
                               policy.lease_ttl_ms, policy.backoff_base_ms,
                               policy.backoff_factor, policy.backoff_cap_ms,
                               dict(sorted(policy.sessions.items())), policy.max_total)
        # What the command prints is read in the writers' section, just after the fold.
        return Outcome([NewEvent(POLICY_SUBJECT, event)], then=_policy_shown)

    return journal.write(decide)


def check_policy(values: dict[str, Any]) -> Policy:
    """A Policy from camelCase values: positive integers (the factor a number ≥ 1),
    within POLICY_LIMITS, and the backoff cap at least its base; each session's ceiling
    as maxConcurrent's; maxTotal as well, or 0 / None for no overall cap."""
    values = dict(values)
    sessions = values.pop("sessions", {}) or {}
    total = values.pop("maxTotal", None)
    for name, value in values.items():
        limit = POLICY_LIMITS.get(name)
        if limit is None:
            raise UsageError(f"unknown policy value {name!r}",
                             f"give one of {', '.join(POLICY_LIMITS)}")
        if name == "backoffFactor":
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value) or not 1 <= value <= limit):
                raise UsageError(f"backoffFactor must be a number from 1 to {limit}, "
                                 f"not {value!r}", "give, say, 2")
        else:
            _whole(name, value, limit)
    for label, value in sessions.items():
        _whole(f"maxConcurrent of session {label}", value, POLICY_LIMITS["maxConcurrent"])
    if total == 0:
        total = None
    if total is not None:
        _whole("maxTotal", total, POLICY_LIMITS["maxConcurrent"], "give a positive integer, "
               "or 0 for no overall cap")
    if values["backoffCapMs"] < values["backoffBaseMs"]:
        raise UsageError(f"backoffCapMs ({values['backoffCapMs']}) is below backoffBaseMs "
                         f"({values['backoffBaseMs']})", "give a cap at least the base")
    values = {**values, "backoffFactor": float(values["backoffFactor"]),
              "sessions": dict(sessions), "maxTotal": total}
    return msgspec.convert(values, Policy)


def _whole(name: str, value: Any, limit: int, hint: str = "give a positive integer") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise UsageError(f"{name} must be a whole number from 1 to {limit:,}, not {value!r}",
                         hint)


# -- what may be leased --------------------------------------------------------------

def active_leases(views: Views, now: int) -> int:
    """Leased entries whose lease has not expired: one index range."""
    return views.count(Query("queue", (("status", "=", "leased"),
                                       ("lease_expires", ">", now))))


def pool_active(views: Views, now: int, pool: str | None) -> int:
    """The live leases of one pool (a session label; None: entries without one)."""
    return views.count(Query("queue", (("status", "=", "leased"), ("session", "=", pool),
                                       ("lease_expires", ">", now))))


def ready_pools(views: Views) -> list[str | None]:
    """The pools that have ready entries (the default pool, None, first), from the kept
    counts: as many as there are pools, never one per entry."""
    found = [pool for pool, count in views.counts("queue", "ready_pool").items()
             if isinstance(pool, str) and count]
    if len(found) > 1:
        found.sort(key=lambda label: (label != DEFAULT_POOL, label))
    return [None if pool == DEFAULT_POOL else pool for pool in found]


def _eligible(views: Views, now: int, limit: int | None, pool: str | None = None,
              any_pool: bool = False) -> list[QueueEntry]:
    """The first ready entries out of backoff, in queue order, of one pool (`pool`: a
    session label, None the entries without one), or of all with `any_pool`.

    Read in queue order from the (status or ready_pool, priority, enqueuedAt) index,
    page by page, skipping entries still in backoff here: with the backoff bound in the
    query, SQLite chooses the (status, eligible_at) range and sorts every ready entry
    to find the first (1.9 ms a lease at 10,000 entries, growing with the queue). The
    pages read grow only with the entries in backoff ahead of the first eligible one.
    """
    where: list[tuple[str, str, Any]] = [
        ("status", "=", "ready") if any_pool else ("ready_pool", "=", pool or DEFAULT_POOL)]
    # A first page just past what is wanted (a lease of one decodes a few entries, not
    # 64), then pages doubling up to 1,024 while entries in backoff are skipped.
    page = 256 if limit is None else min(max(2 * limit, 4), 1024)
    found: list[QueueEntry] = []
    offset = 0
    while limit is None or len(found) < limit:
        rows: list[QueueEntry] = views.query(Query("queue", tuple(where), None, QUEUE_ORDER,
                                                   page, offset))
        for entry in rows:  # up to `limit`: the page's rest is not looked at
            if out_of_backoff(entry.next_eligible_at_ms, now):
                found.append(entry)
                if len(found) == limit:
                    return found
        if len(rows) < page:
            break
        offset += page
        page = min(2 * page, 1024)
    return found if limit is None else found[:limit]


def _pool_name(pool: str | None) -> str:
    return "the default pool (entries without a session)" if pool is None else \
        f"session {pool}"


def _choose(views: Views, now: int, limit: int | None, session: str | None, policy: Policy
            ) -> tuple[list[QueueEntry], list[str]]:
    """What a lease would grant now under `policy` (of `session`'s pool, else of every
    pool with ready work): each pool's first eligible entries up to its room, merged in
    queue order, up to `limit` and the overall cap. Also why more could not be granted:
    the ceilings that were reached."""
    reached: list[str] = []
    overall: int | None = None
    if policy.max_total is not None:
        total = active_leases(views, now)
        overall = total_room(policy, total)
        if overall is not None and overall <= 0:
            return [], [f"{total} of {policy.max_total} leases are active over every pool "
                        "(the policy's maxTotal)"]
    want = limit if overall is None else (overall if limit is None else min(limit, overall))
    pools = [session] if session is not None else ready_pools(views)
    found: list[QueueEntry] = []
    for pool in pools:
        active = pool_active(views, now, pool)
        room = pool_room(policy, pool, active)
        if room <= 0:
            reached.append(f"{active} of {policy.ceiling(pool)} leases are active in "
                           f"{_pool_name(pool)} (its ceiling)")
            continue
        found.extend(_eligible(views, now, room if want is None else min(room, want), pool))
    if len(pools) > 1:
        found.sort(key=lambda entry: (entry.priority, entry.enqueued_at, entry.id))
    return (found if want is None else found[:want]), reached


def _grant(views: Views, now: int, limit: int | None, session: str | None, *,
           stamp: Callable[[int], str] = format_ts,
           stamp_expiry: Callable[[int], str] = format_ts) -> Outcome[Leased]:
    policy = current_policy(views)
    chosen, reached = _choose(views, now, limit, session, policy)
    lease_ids = [new_ulid(now) for _ in chosen]
    granted = decider.grant(chosen, lease_ids, now, policy, session=session, reached=reached)
    events = [NewEvent(f"queue/{entry.id}", data) for entry, data in granted]
    leases = [Granted(id=entry.id, lease_id=data.lease_id,
                      lease_expires_at=stamp_expiry(data.expires_at_ms), attempt=data.attempt)
              for entry, data in granted]
    return Outcome(events, Leased(now=stamp(now), granted=len(leases), leases=leases))


def lease(store: Store, limit: int | None = None, session: str | None = None) -> Leased:
    """Lease the first eligible entries (of a session) up to the concurrency ceiling;
    nothing to lease is exit 3. On PostgreSQL one round trip decides it in the server
    (`uwf.queue.pgcalls`); anything but a grant there is decided here."""
    leased = pgcalls.lease(store, limit, session) or _by_writer(
        store.writer, "queue.lease", {"limit": limit, "session": session}, Leased)
    if leased is not None:
        return leased
    return store.journal.write_at(lease_decision(limit, session, store.journal.stamps))


def lease_decision(limit: int | None, session: str | None,
                   stamp: Callable[[int], str] = format_ts,
                   stamp_expiry: Callable[[int], str] = format_ts) -> Decision[Leased]:
    """A lease's decision at the section's instant (the writer runs it in a round); its
    instant and expiries spelled by `format_ts` or a `Stamps` each (uwf/writer/ops.py)."""
    return lambda views, now: _grant(views, now, limit, session, stamp=stamp,
                                       stamp_expiry=stamp_expiry)


def pick(store: Store, session: str) -> str:
    """The job registry's pick: lease the first eligible entry of `session` under the
    policy and return its id (exit 3 when there is none)."""
    result = lease(store, 1, session)
    return result.leases[0].id


# -- the lease holder's commands -----------------------------------------------------

def _by_writer(link: WriterLink | None, op: str, args: dict[str, Any], result: type[T]
               ) -> T | None:
    """`op` decided by the store's resident writer (uwf/writer/: `link`), when one
    answers; None: decide it here."""
    return None if link is None else link.call(op, args, result)


def _recorded(entry_id: str, data: EventData) -> Outcome[EntryRecord]:
    """`data` recorded on the entry; the entry's record as the write left it."""
    return Outcome([NewEvent(f"queue/{entry_id}", data)], then=_shown(entry_id))


def complete(store: Store, entry_id: str, lease_id: str, *, run: str | None = None
             ) -> EntryRecord:
    """Terminal success; `run` records the run the holder worked on. On PostgreSQL one
    round trip (`uwf.queue.pgcalls`); a refusal is decided and worded here."""
    done = pgcalls.complete(store, entry_id, lease_id, run) or _by_writer(
        store.writer, "queue.complete", {"id": entry_id, "lease": lease_id, "run": run},
        EntryRecord)
    if done is not None:
        return done
    return store.journal.write_at(complete_decision(entry_id, lease_id, run))


def complete_decision(entry_id: str, lease_id: str, run: str | None
                      ) -> Decision[EntryRecord]:
    return lambda views, now: _recorded(entry_id, decider.complete(
        get_entry(views, entry_id), lease_id, now, run))


def release(store: Store, entry_id: str, lease_id: str, *, failed: bool = False,
            reason: str = "", run: str | None = None) -> EntryRecord:
    """Give the entry back: ready at once; `failed` counts an attempt (backoff or park).
    `run` records the run the holder started, so the next holder continues it."""
    done = _by_writer(store.writer, "queue.release", {"id": entry_id, "lease": lease_id,
                                               "failed": failed, "reason": reason, "run": run},
                      EntryRecord)
    if done is not None:
        return done
    return store.journal.write_at(release_decision(entry_id, lease_id, failed, reason, run))


def release_decision(entry_id: str, lease_id: str, failed: bool, reason: str,
                     run: str | None) -> Decision[EntryRecord]:
    return lambda views, now: _recorded(entry_id, decider.release(
        get_entry(views, entry_id), lease_id, now, current_policy(views), failed=failed,
        reason=reason, run=run))


def fail_attempt(journal: Journal, entry_id: str, why: str) -> NoReturn:
    """`queue status --set completed` of an entry whose work is not there (`why`): its
    live lease is released as one failed attempt (backoff, or parked at maxAttempts),
    recorded, then the command is refused naming `why`. An entry not leased (or whose
    lease expired) is refused with nothing recorded: there is no attempt to count."""
    def decide(views: Views, now: int) -> Outcome[UwfError]:
        entry = get_entry(views, entry_id)
        data, refused = decider.fail_attempt(entry, artifact_failure(entry) or why, now,
                                             current_policy(views))
        return Outcome([NewEvent(f"queue/{entry_id}", data)], refused)

    raise journal.write_at(decide)


def set_status(store: Store, entry_id: str, status: str) -> EntryRecord:
    """The job registry's `status --set`: any status but `leased` (a lease is granted,
    never set); a lease the entry had is void. `completed` of a leased entry whose
    expected artifacts are not all in its repo is a failed attempt instead
    (`fail_attempt`: backoff or park), and refused."""
    target = canonical_status(status)
    decider.settable(target)
    if target == "drained":
        entry = get_entry(store.read(), entry_id)
        if (why := artifact_failure(entry)) is not None:
            return fail_attempt(store.journal, entry_id, why)

    def decide(views: Views) -> Outcome[None]:
        data = decider.set_status(get_entry(views, entry_id), target)
        return Outcome([NewEvent(f"queue/{entry_id}", data)])

    store.journal.write(decide)
    return show(store.read(), entry_id)


def renew(store: Store, entry_id: str, lease_id: str) -> EntryRecord:
    """Extend a live lease to now + leaseTtlMs."""
    done = _by_writer(store.writer, "queue.renew", {"id": entry_id, "lease": lease_id}, EntryRecord)
    if done is not None:
        return done
    return store.journal.write_at(renew_decision(entry_id, lease_id))


def renew_decision(entry_id: str, lease_id: str) -> Decision[EntryRecord]:
    return lambda views, now: _recorded(entry_id, decider.renew(
        get_entry(views, entry_id), lease_id, now, current_policy(views)))


def reclaim(journal: Journal) -> Reclaimed:
    """Take back every expired lease, each one failed attempt (backoff or park)."""

    def decide(views: Views, now: int) -> Outcome[tuple[int, list[ReclaimedLease]]]:
        expired = views.query(Query("queue", (("status", "=", "leased"),
                                              ("lease_expires", "<=", now)),
                                    None, QUEUE_ORDER))
        taken = decider.reclaim(expired, now, current_policy(views))
        done = [ReclaimedLease(id=entry.id, lease_id=data.lease_id, attempts=data.attempts,
                               status="parked" if data.parked else "ready",
                               next_eligible_at=ms_ts(data.next_eligible_at_ms))
                for entry, data in taken]
        return Outcome([NewEvent(f"queue/{entry.id}", data) for entry, data in taken],
                       (now, done))

    now, reclaimed = journal.write_at(decide)
    return Reclaimed(now=format_ts(now), count=len(reclaimed), reclaimed=reclaimed)


def reset(journal: Journal, entry_id: str) -> EntryRecord:
    """A parked entry is ready again with attempts 0; only a parked one."""
    return journal.write(lambda views: _recorded(entry_id, decider.reset(
        get_entry(views, entry_id))))


def _shown(entry_id: str) -> Callable[[Views], EntryRecord]:
    """The entry's record as the write left it."""
    return lambda views: record(get_entry(views, entry_id))


# -- plan ------------------------------------------------------------------------------

def _skip_reason(entry: QueueEntry, now: int) -> str:
    if entry.status == "parked":
        return "parked"
    if entry.status in TERMINAL:
        return "terminal"
    if entry.status == "leased":
        return "leased"
    if entry.status == "waiting":
        return "waiting"  # its run waits for an answer
    if not out_of_backoff(entry.next_eligible_at_ms, now):
        return "backoff"
    return "concurrency-ceiling"


def plan(store: Store, show_all: bool = False) -> Planned:
    """What `sched lease` would grant now, and why the rest waits: read-only, and the
    same on repeat. Counted from kept counts and index ranges, and `skipped` lists the
    first 20 in queue order (all with `show_all`), so a huge queue plans as fast."""
    views = store.read()
    now = store.clock()
    policy = current_policy(views)
    active = active_leases(views, now)
    planned, _ = _choose(views, now, None, None, policy)
    pools: list[PoolLoad] = []
    available = 0
    for pool in ready_pools(views):
        in_pool = pool_active(views, now, pool)
        pools.append(PoolLoad(session=pool, ceiling=policy.ceiling(pool), active=in_pool))
        available += max(0, policy.ceiling(pool) - in_pool)
    if policy.max_total is not None:
        available = min(available, max(0, policy.max_total - active))
    chosen = {entry.id for entry in planned}
    statuses = views.counts("queue", "status")
    backoff = views.count(Query("queue", (("status", "=", "ready"),
                                          ("eligible_at", ">", now))))
    eligible = int(statuses.get("ready", 0)) - backoff
    counts = SkippedCounts(
        parked=int(statuses.get("parked", 0)),
        terminal=sum(int(statuses.get(status, 0)) for status in TERMINAL),
        leased=int(statuses.get("leased", 0)),
        waiting=int(statuses.get("waiting", 0)),
        backoff=backoff,
        concurrency_ceiling=eligible - len(planned),
    )
    limit = None if show_all else PLAN_SKIPPED_SHOWN + len(planned)
    skipped = []
    for entry in views.query(Query("queue", order=QUEUE_ORDER, limit=limit)):
        if entry.id in chosen:
            continue
        skipped.append(Skipped(id=entry.id, reason=_skip_reason(entry, now)))
    if not show_all:
        skipped = skipped[:PLAN_SKIPPED_SHOWN]
    leases = [PlannedLease(id=entry.id, priority=entry.priority, attempt=entry.attempts + 1,
                           session=entry.session) for entry in planned]
    return Planned(now=format_ts(now), policy=policy_values(policy), active=active,
                   available=available, pools=pools, leases=leases, skipped=skipped,
                   skipped_counts=counts)
