"""Writing lines straight into a log, as a buggy or hostile writer (or another
process) would: chained correctly, but past the journal and its views."""

from __future__ import annotations

from collections.abc import Sequence

from uwf.engine.events import Envelope, EventData, NewEvent, digest, encode_line
from uwf.engine.log import Checkpoint, EventLog

TS = "2026-11-25T00:00:00.000Z"


def ulid(number: int) -> str:
    return f"01JD{number:022d}"


def envelopes(head: Checkpoint, events: Sequence[NewEvent]) -> list[Envelope]:
    """`events` as one batch chained after `head`."""
    out = []
    prev = head.digest
    for index, event in enumerate(events):
        envelope = Envelope(head.seq + index + 1, ulid(head.seq + index + 1), TS,
                            event.data.type, event.subject, (index + 1, len(events)),
                            event.data, prev)
        prev = digest(encode_line(envelope))
        out.append(envelope)
    return out


def append(log: EventLog, *events: NewEvent | tuple[str, EventData]) -> Checkpoint:
    """Append `events` as one batch under the writers' section; the new head."""
    batch = [e if isinstance(e, NewEvent) else NewEvent(*e) for e in events]
    with log.exclusive() as session:
        head, _ = session.recover()
        return session.append([encode_line(e) for e in envelopes(head, batch)])
