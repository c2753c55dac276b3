"""`queue.added` events spelled in one pass (`Outcome.spell`, uwf/engine/spelled.py):
each line, its chained digest, the entry's row and its stream entry made together, with
no envelope fold between them. The bytes are the journal's: the same lines its
`envelopes` make of the events at the same instant, the same rows its fold makes of
them (tests/unit/test_batch_bytes.py). What a batch costs an entry beyond SQLite's
inserts is this loop and the line's parse (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from msgspec import UNSET, Raw

from uwf.engine.clock import format_ts
from uwf.engine.events import Envelope, NewEvent, digest
from uwf.engine.journal import Journal
from uwf.engine.log import Checkpoint
from uwf.engine.spelled import Spelled, Speller
from uwf.engine.ulids import new_ulids
from uwf.engine.viewspec import ASCII_LOWER, NewRows
from uwf.queue.events import QueueAdded
from uwf.queue.projection import DEFAULT_POOL, QueueProjection
from uwf.queue.rules import READY, added

# From this many lines, the chain's digests are OpenSSL's SHA-256 (~1 µs a line less
# than CPython's own, which a CLI call loads in a tenth of the time: uwf/engine/events.py).
OPENSSL_FROM = 512


def speller(journal: Journal, events: Sequence[NewEvent]) -> Speller | None:
    """How `events` (each a `queue.added` of subject `queue/<a new id>`) are spelled
    after a head; None when the journal would make them otherwise: a view besides the
    queue's folds them, or the store redacts event data."""
    projection = journal.projections.get(QueueProjection.name)
    routed = journal.fold.routes.get(QueueAdded.type, [])
    if (journal.redact is not None or type(projection) is not QueueProjection
            or routed != [projection]):
        return None
    return lambda head, ms: _spelled(projection, head, ms, events)


def _spelled(projection: QueueProjection, head: Checkpoint, ms: int,
             events: Sequence[NewEvent]) -> Spelled:
    count = len(events)
    ts = format_ts(ms)
    ids = new_ulids(ms, count)  # as the journal's `envelopes` mints them
    hasher: Callable[[bytes], Any] | None = None
    if count >= OPENSSL_FROM:
        from hashlib import sha256

        hasher = sha256
    lines: list[bytes] = []
    rows: list[tuple[Any, ...]] = []
    streams: list[tuple[str, int]] = []
    prev = head.digest
    seq = head.seq
    kind = QueueAdded.type
    encode = _encoder.encode
    made = _Made(projection, ts)
    # A new entry's row (`QueueProjection.row` of `rules.added`'s entry) spliced from its
    # `queue.added` data's JSON: the entry's fields are the event's, in the same order,
    # with its id first, its times and status between priority and workflow, and its
    # untouched fields' defaults after them. Checked against the projection's own row
    # on the first entry; an entry over MQTT (its broker's fields sit elsewhere), or a
    # batch whose check fails (a field moved), has its rows made the projection's way.
    between = f',"enqueuedAt":"{ts}","updatedAt":"{ts}","status":"{READY}"'.encode()
    spliced = None  # not checked yet
    for index, event in enumerate(events, 1):
        subject = event.subject
        data: Any = event.data  # a QueueAdded
        spelled = encode(data)
        line = encode(Envelope(seq + index, ids[index - 1], ts, kind, subject,
                               (index, count), Raw(spelled), prev))  # as `encode_line`
        prev = hasher(line).hexdigest()[:32] if hasher else digest(line)
        lines.append(line)
        streams.append((subject, seq + index))
        entry_id = subject[6:]  # "queue/<id>"
        if spliced is False or not (data.broker is data.topic_prefix is data.auth_token
                                    is UNSET):
            rows.append(made(entry_id, data))
            continue
        cut = spelled.index(_WORKFLOW)  # a key: inside a string a quote is escaped
        session = data.session
        row = (entry_id, b"".join((b'{"id":"', entry_id.encode(), b'",', spelled[1:cut],
                                   between, spelled[cut:-1], _UNTOUCHED)),
               READY, data.priority, ts, session, data.repo, data.key, None, None,
               session or DEFAULT_POOL, "")
        if spliced is None:
            checked = made(entry_id, data)
            spliced = row == checked
            row = checked
        rows.append(row)
    # Every entry is new (its id minted by this command): the views hold no row of it.
    return Spelled(lines, {QueueProjection.name: NewRows(rows)}, streams)


class _Made:
    """A new entry's row made the projection's way, as the view stores it: (key, value,
    *columns, text)."""

    def __init__(self, projection: QueueProjection, ts: str) -> None:
        self.projection = projection
        self.ts = ts

    def __call__(self, entry_id: str, data: QueueAdded) -> tuple[Any, ...]:
        made = self.projection.row(added(entry_id, data, self.ts))
        return (entry_id, made.value, *made.columns, made.text.translate(ASCII_LOWER))


_encoder = msgspec.json.Encoder()  # as uwf/engine/events.py's (its defaults)
_WORKFLOW = b',"workflow":'
# A new entry's fields after its `queue.added`'s own, as QueueEntry's defaults spell them.
_UNTOUCHED = (b',"attempts":0,"lease":null,"nextEligibleAtMs":null,"parkedReason":null,'
              b'"events":1,"broker":null,"topicPrefix":null,"authToken":null,"lastSeq":0,'
              b'"receivedSeq":0,"undelivered":[]}')
