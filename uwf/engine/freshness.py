"""How the views stand against the log (SPEC §5): each view valid, stale (and how
far behind), absent, mismatch (its checkpoint's line is not in the log as it was
folded) or unreadable, as `uwf registry show` reports it. Measuring changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from uwf.engine.log import Checkpoint, EventLog
from uwf.engine.viewspec import ViewStore
from uwf.errors import Corrupt


class ViewFreshness(msgspec.Struct, frozen=True):
    """How one persisted view stands against the log."""

    status: str  # valid | stale | absent | mismatch | unreadable
    checkpoint: int
    behind: int


_SEVERITY = ("valid", "stale", "absent", "mismatch", "unreadable")


class Freshness(msgspec.Struct, frozen=True):
    """How the views stand against the log: the worst view decides `status`.
    (A frozen Struct: a dataclass compiles its methods at every start-up.)"""

    status: str
    checkpoint: int
    log_seq: int
    behind: int
    views: dict[str, ViewFreshness] = msgspec.field(default_factory=dict)


def measure(log: EventLog, store: ViewStore, names: Sequence[str],
            match: Callable[[Checkpoint], None]) -> Freshness:
    """The freshness of the views `names`; `match` raises Corrupt when a checkpoint's
    line is not the log's."""
    head = log.head()
    try:
        checkpoints = store.checkpoints()
    except Corrupt:
        unreadable = ViewFreshness("unreadable", 0, head.seq)
        return Freshness("unreadable", 0, head.seq, head.seq,
                         dict.fromkeys(names, unreadable))
    views: dict[str, ViewFreshness] = {}
    for name in names:
        checkpoint = checkpoints.get(name)
        if checkpoint is None:
            # Nothing logged and nothing folded: the (empty) views are exactly current.
            views[name] = ViewFreshness("valid" if head.seq == 0 else "absent", 0, head.seq)
            continue
        behind = head.seq - checkpoint.seq
        try:
            match(checkpoint)
        except Corrupt:
            behind = -1
        if behind < 0:
            views[name] = ViewFreshness("mismatch", checkpoint.seq, 0)
        else:
            views[name] = ViewFreshness("stale" if behind else "valid", checkpoint.seq,
                                        behind)
    worst = max(views.values(), key=lambda v: _SEVERITY.index(v.status),
                default=ViewFreshness("valid", head.seq, 0))
    lowest = min((v.checkpoint for v in views.values()), default=head.seq)
    return Freshness(worst.status, lowest, head.seq,
                     max((v.behind for v in views.values()), default=0), views)
