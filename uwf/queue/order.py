"""`log verify`'s check of the queue's events: each entry folded by the aggregate's
`evolve` (uwf/queue/rules.py, as the `queue` view is), each event judged by its
`refusal` at the event's instant (docs/queue.md): a lease only of a ready entry out of
its backoff, each attempt counted once, a lease's holder acting only on its live lease,
a reset only of a parked entry, nothing after an entry was drained or cancelled but a
status set by hand, and to a status it did not have; and no lease over a ceiling of the
scheduling policy the log has at its instant."""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from uwf.engine.clock import parse_instant
from uwf.engine.events import Envelope
from uwf.engine.feature import Check
from uwf.errors import UsageError
from uwf.queue.entry import QueueEntry
from uwf.queue.events import QueueLeased, SchedPolicySet
from uwf.queue.rules import TIMED, Policy, evolve, over_ceiling, policy_of
from uwf.queue.rules import problem as entry_problem


class LiveLeases:
    """The expiry of every entry `log verify` holds as leased, sorted, so the leases
    active at an instant (expiresAt > it) are counted by one bisection."""

    def __init__(self) -> None:
        self._expiry: dict[str, int] = {}
        self._sorted: list[int] = []

    def set(self, subject: str, expires: int | None) -> None:
        old = self._expiry.pop(subject, None)
        if old is not None:
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        if expires is not None:
            self._expiry[subject] = expires
            bisect.insort(self._sorted, expires)

    def active_at(self, at: int) -> int:
        return len(self._sorted) - bisect.bisect_right(self._sorted, at)


def _instant(ts: str) -> int | None:
    try:
        return parse_instant(ts)
    except UsageError:
        return None  # named by the auditor's ts check already


class QueueOrder:
    """Each entry's state (`evolve` folded), the policy, and the live leases per pool
    and over all pools, as the log has them so far."""

    def __init__(self, made: Mapping[str, Check]) -> None:
        self.queue: dict[str, QueueEntry] = {}
        self.policy = Policy()
        self.live: dict[str | None, LiveLeases] = {}
        self.live_total = LiveLeases()

    def __call__(self, envelope: Envelope) -> str | None:
        data = envelope.data
        if isinstance(data, SchedPolicySet):
            self.policy = policy_of(data)
            return None
        if not envelope.type.startswith("queue."):
            return None
        subject = envelope.subject
        entry = self.queue.get(subject)
        at = _instant(envelope.ts) if envelope.type in TIMED else None
        problem = entry_problem(entry, data, subject, at)
        after = evolve(entry, envelope)
        if after is None:  # nothing folds into an entry not added
            return problem
        self.queue[subject] = after
        if entry is not None and entry.session != after.session:  # added twice, elsewhere
            self.live.setdefault(entry.session, LiveLeases()).set(subject, None)
        live = self.live.setdefault(after.session, LiveLeases())
        if problem is None and isinstance(data, QueueLeased) and at is not None:
            ceiling = over_ceiling(self.policy, after.session, live.active_at(at),
                                   self.live_total.active_at(at), envelope.ts)
            problem = None if ceiling is None else f"{envelope.type} of {subject}: {ceiling}"
        lease = after.lease
        expires = (lease.expires_at_ms if lease is not None and after.status == "leased"
                   else None)
        live.set(subject, expires)
        self.live_total.set(subject, expires)
        return problem
