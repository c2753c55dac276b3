"""`uwf registry show|refresh|rebuild|verify`: the views against the log (SPEC §5)."""

from __future__ import annotations

from typing import Any

from uwf.api.store import Store
from uwf.engine.journal import Progress
from uwf.errors import Corrupt

_NEXT = {
    "valid": "none",
    "stale": "run `uwf registry refresh` (any read also catches up)",
    "absent": "run `uwf registry rebuild` (any read also rebuilds)",
    "mismatch": "run `uwf registry rebuild`",
    "unreadable": "run `uwf registry rebuild` (it replaces the views file)",
}


def show(store: Store, scope: str = "home") -> dict[str, Any]:
    """Freshness of every view, row counts, durability and the next action."""
    freshness = store.journal.freshness()
    status = freshness.status
    label = f"stale ({freshness.behind} events behind)" if status == "stale" else status
    readable = status in ("valid", "stale")
    views = {
        name: {"status": label, "rows": store.views.count(name) if readable else 0}
        for name in store.journal.projections
    }
    return {
        "store": str(store.root) if store.root else ":memory:",
        "scope": scope,
        "status": status,
        "checkpoint": freshness.checkpoint,
        "logSeq": freshness.log_seq,
        "behind": freshness.behind,
        "segments": len(store.log.segments.names()),
        "durability": store.durability,
        "views": views,
        "counts": {"workflows": views["workflows"]["rows"],
                   "threads": _thread_counts(store) if readable else {}},
        "nextAction": _NEXT[status],
    }


def _thread_counts(store: Store) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, state in store.journal.scan("threads"):
        counts[state.state] = counts.get(state.state, 0) + 1
    return dict(sorted(counts.items()))


def refresh(store: Store, progress: Progress | None = None) -> dict[str, Any]:
    """Catch the views up with the log."""
    before = store.journal.views.checkpoint()
    head = store.journal.refresh(progress)
    start = 0 if before is None else before.seq
    return {"checkpoint": head.seq, "applied": head.seq - start, "status": "valid"}


def rebuild(store: Store, progress: Progress | None = None) -> dict[str, Any]:
    """Drop the views and replay the whole log."""
    head = store.journal.rebuild(progress)
    rows = sum(store.views.count(name) for name in store.journal.projections)
    return {"checkpoint": head.seq, "rows": rows, "status": "valid"}


def verify(store: Store) -> dict[str, Any]:
    """Replay into a scratch copy and compare with the persisted views row by row."""
    differences: list[dict[str, str]] = []
    try:
        head = store.journal.refresh()
        expected = store.journal.replay()
    except Corrupt as exc:
        return {"ok": False, "checkpoint": None, "rows": 0,
                "differences": [{"view": "*", "key": "*", "problem": exc.line()}]}
    persisted = {
        (name, key): raw
        for name in store.journal.projections
        for key, raw in store.views.scan(name)
    }
    for view, key in sorted(expected.keys() | persisted.keys()):
        want, have = expected.get((view, key)), persisted.get((view, key))
        if have is None:
            differences.append({"view": view, "key": key, "problem": "missing from the views"})
        elif want is None:
            differences.append({"view": view, "key": key, "problem": "not produced by replay"})
        elif want != have:
            differences.append({"view": view, "key": key, "problem": "differs from replay"})
    return {"ok": not differences, "checkpoint": head.seq, "rows": len(persisted),
            "differences": differences}
