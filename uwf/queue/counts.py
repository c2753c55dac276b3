"""`uwf queue counts`: entries per status from the view's kept counts (no scan,
whatever the number of entries), and the throughput of a recent window read from the
log's end: entries added and entries finished (drained, by `queue drain` or
`sched complete`) since then."""

from __future__ import annotations

import msgspec

from uwf.engine.clock import format_ts
from uwf.queue.events import QueueAdded, QueueCompleted, QueueDrained
from uwf.queue.results import EntryCounts
from uwf.queue.terms import STATUSES
from uwf.store import Store

# The most log lines read back for the window; past it the figures are the newest lines'.
SCAN_LINES = 200_000
FINISHED = frozenset({QueueCompleted.type, QueueDrained.type})


class _Head(msgspec.Struct):
    """The two fields of a log line the window needs (the rest is not decoded)."""

    ts: str
    type: str


def counts(store: Store, minutes: int) -> EntryCounts:
    views = store.read()
    kept = views.counts("queue", "status")
    statuses = {status: int(kept.get(status, 0)) for status in STATUSES}
    since = format_ts(store.clock() - minutes * 60_000)
    added = finished = 0
    exact = True
    decode = msgspec.json.Decoder(_Head).decode
    for read, line in enumerate(store.log.read_reverse()):
        if read >= SCAN_LINES:
            exact = False
            break
        head = decode(line.raw)
        if head.ts < since:  # the log is in time order: nothing older is in the window
            break
        if head.type == QueueAdded.type:
            added += 1
        elif head.type in FINISHED:
            finished += 1
    return EntryCounts(statuses=statuses, total=sum(statuses.values()), minutes=minutes,
                       since=since, added=added, finished=finished, exact=exact)
