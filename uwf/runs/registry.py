"""`uwf registry show|refresh|rebuild|verify`: the views against the log (SPEC §5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uwf.engine.fold import Key, Progress
from uwf.engine.freshness import ViewFreshness
from uwf.engine.journal import Journal
from uwf.engine.log import GENESIS, Checkpoint
from uwf.engine.viewspec import Query, Row, ViewStore
from uwf.errors import Corrupt
from uwf.payload import UNSET
from uwf.runs.results import (
    Counts,
    DamagedHead,
    Difference,
    Heads,
    Rebuilt,
    Refreshed,
    RegistryShown,
    RepoRuns,
    RunIndex,
    SnapshotKept,
    Verified,
    ViewStatus,
)
from uwf.store import Store

_NEXT = {
    "valid": "none",
    "stale": "run `uwf registry refresh` (any read also catches up)",
    "absent": "run `uwf registry rebuild` (any read also rebuilds)",
    "mismatch": "run `uwf registry rebuild`",
    "unreadable": "run `uwf registry rebuild` (it replaces the views file)",
}


def show(store: Store, scope: str = "home", here: str | None = None) -> RegistryShown:
    """Freshness of every view, row counts, durability and the next action (the runs'
    counts of the current repo, `here`, with scope `repo`).

    Kept counts and index reads only, so its cost does not grow with the store: no
    thread's head node is read here (`verify` checks them, and every command that
    reads a run's nodes fails closed on a missing or damaged one)."""
    freshness = store.journal.freshness()
    status = freshness.status
    views = {}
    for name, view in freshness.views.items():
        label = f"stale ({view.behind} events behind)" if view.status == "stale" else view.status
        readable = view.status in ("valid", "stale")
        views[name] = ViewStatus(status=label,
                                 rows=store.views.count(Query(name)) if readable else 0)
    readable = status in ("valid", "stale")
    return RegistryShown(
        store=store.location,
        scope=scope,
        status=status,
        checkpoint=freshness.checkpoint,
        log_seq=freshness.log_seq,
        behind=freshness.behind,
        segments=store.log.describe().get("segments", UNSET),
        durability=store.durability,
        views=views,
        counts=Counts(workflows=views["workflows"].rows,
                      threads=_thread_counts(store.views) if readable else {}),
        runs=(_runs(store, freshness.views.get("runs"), scope, here) if readable else RunIndex()),
        next_action=_NEXT[status],
    )


STALE_SHOWN = 20


def _runs(store: Store, view: ViewFreshness | None, scope: str, here: str | None
          ) -> RunIndex:
    """The run index as persisted: its sourceFingerprint, runs per derived lifecycle and
    per repo (kept counts, not a scan), and the runs whose events the view has not folded
    yet (`staleRuns`, from the log after its checkpoint: as many lines as it is behind)."""
    from uwf.runs.service import lifecycle_counts, runs_after, scoped

    repo = scoped(scope, here)
    lifecycles, archived = lifecycle_counts(store.views, repo)
    repos = store.views.counts("runs", "repo")
    # A repo named only by queue entries (work queued, no run started yet) is one of the
    # store's repos too: one GROUP BY over the queue's repo index.
    entries = store.views.counts("queue", "repo")
    stale: list[str] = []
    behind = view.behind if view is not None and view.status == "stale" else 0
    if behind:
        stale = list(runs_after(store.log, view.checkpoint if view else 0))
    checkpoint = store.views.checkpoints().get("runs")
    return RunIndex(
        # The index's sourceFingerprint: the chain digest of the last log line the runs
        # view folded (its checkpoint), so it names the exact log prefix the index was
        # built from; the 32 zeros of an empty log before anything is folded.
        source_fingerprint=checkpoint.digest if checkpoint is not None else GENESIS.digest,
        lifecycles=lifecycles,
        archived=archived,
        repos=[RepoRuns(repo=str(name), runs=repos.get(name, 0),
                        queue_entries=entries.get(name, 0))
               for name in sorted({*repos, *entries}, key=str)
               if name is not None and (repo is None or name == repo)],
        stale_runs=stale[:STALE_SHOWN],
        stale_count=len(stale),
    )


def damaged_heads(store: Store) -> Heads:
    """Open (idle, running or blocked) threads whose head node is not in the CAS
    (`missing`), or is there but does not hash to its name (`corrupt`).

    Only open threads: they are the ones a step or an agent will read next, and
    killing one is a way out. One index range of the view and one read (and hash) per
    open thread: `verify`'s cost, never `show`'s.
    """
    from uwf.threads.service import head_damage

    decode = store.journal.projections["threads"].decode
    heads = Heads(checked=0, missing=[], corrupt=[])
    for key, raw in store.views.query(Query("threads", (("open", "=", 1),))):
        state = decode(raw)
        head = state.head or state.start
        heads.checked += 1
        damage = head_damage(store.cas, head)
        if damage is not None:
            (heads.missing if damage == "missing" else heads.corrupt).append(
                DamagedHead(thread=key, head=head))
    return heads


def _thread_counts(views: ViewStore) -> dict[str, int]:
    """Threads per state: kept up to date by the view store, not counted row by row."""
    counts = views.counts("threads", "state")
    return {str(state): n for state, n in sorted(counts.items(), key=lambda item: str(item[0]))}


def refresh(journal: Journal, progress: Progress | None = None) -> Refreshed:
    """Catch the views up with the log."""
    before = journal.views.checkpoints()
    head = journal.refresh(progress)
    start = min((before.get(name, GENESIS).seq for name in journal.projections),
                default=0)
    return Refreshed(checkpoint=head.seq, applied=head.seq - start, status="valid")


def rebuild(store: Store, progress: Progress | None = None) -> Rebuilt:
    """New views: the kept snapshot and the log after it when the log holds its
    checkpoint, else the whole log replayed."""
    done = store.journal.rebuild_views(progress)
    rows = sum(store.views.count(Query(name)) for name in store.journal.projections)
    return Rebuilt(checkpoint=done.head.seq, rows=rows, status="valid",
                   from_snapshot=UNSET if done.restored is None else done.restored.seq,
                   snapshot_refused=UNSET if done.refused is None else done.refused)


def snapshot(journal: Journal) -> SnapshotKept:
    """Catch the views up and keep a snapshot of them beside them (SPEC §11)."""
    kept = journal.snapshot()
    return SnapshotKept(snapshot=str(kept.path), checkpoint=kept.checkpoint.seq,
                        digest=kept.checkpoint.digest)


def verify(store: Store, progress: Progress | None = None) -> Verified:
    """Replay into a scratch copy and compare with the persisted views row by row; and
    look for the head node of every open thread in the CAS (`damaged_heads`). `progress`
    is told the events replayed of the log's head."""
    try:
        head = store.journal.refresh()
        expected = store.journal.replay(progress)
    except Corrupt as exc:
        return Verified(ok=False, checkpoint=None, rows=0,
                        differences=[Difference(view="*", key="*", problem=exc.line())],
                        heads=Heads(checked=0, missing=[], corrupt=[]))
    return compare(store, head, expected)


def compare(store: Store, head: Checkpoint, expected: Mapping[Key, Row]) -> Verified:
    """`verify`'s findings, given the rows a full replay of the log to `head` makes
    (`expected`, as `Journal.replay` returns them): what `verify` runs after its replay,
    and what a store's copy runs with the rows its one fold of the lines wrote
    (uwf/storecopy/)."""
    differences: list[Difference] = []
    persisted = {
        (name, key): raw
        for name in store.journal.projections
        for key, raw in store.views.scan(name)
    }
    for view, key in sorted(expected.keys() | persisted.keys()):
        want, have = expected.get((view, key)), persisted.get((view, key))
        if have is None:
            differences.append(Difference(view=view, key=key,
                                          problem="missing from the views"))
        elif want is None:
            differences.append(Difference(view=view, key=key,
                                          problem="not produced by replay"))
        elif want.value != have:
            differences.append(Difference(view=view, key=key, problem="differs from replay"))
        else:
            columns = store.journal.projections[view].spec().columns
            where = (("key", "=", key), *((column, "=", value) for column, value in
                                          zip(columns, want.columns, strict=True)
                                          if value is not None))
            if store.views.count(Query(view, where)) != 1:
                differences.append(Difference(view=view, key=key,
                                              problem="indexed columns differ from replay"))
    for name in store.journal.projections:
        spec = store.journal.projections[name].spec()
        for column in spec.counted:
            want_counts: dict[Any, int] = {}
            for (view, _), row in expected.items():
                if view == name:
                    value = row.columns[spec.columns.index(column)]
                    want_counts[value] = want_counts.get(value, 0) + 1
            if store.views.counts(name, column) != want_counts:
                differences.append(Difference(view=name, key="*",
                                              problem=f"counts by {column} differ from replay"))
    try:
        heads = damaged_heads(store)
    except Corrupt as exc:  # a threads row that does not decode: the views file was edited
        heads = Heads(checked=0, missing=[], corrupt=[])
        differences.append(Difference(view="threads", key="*", problem=exc.line()))
    return Verified(ok=not differences and not heads.missing and not heads.corrupt,
                    checkpoint=head.seq, rows=len(persisted), differences=differences,
                    heads=heads)
