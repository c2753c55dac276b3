"""A subject's stream: its events in log order, found through the stream index (the
view store's `STREAMS`: each event's subject and seq, kept with the views) and read
by seq from the log, so reading a thread's or a queue entry's events costs its
events, not the log written since it began.

A subject's **version** is the seq of its last event (0: it has none). A write may
state the versions it decided on (`Journal.write(decide, expected={subject:
version})`); the journal compares them inside the writers' section, where nothing
can move, and refuses the write with `Conflict` when a subject has moved. The last
seq rather than a count: it names the very event the decision saw, it is what
`read_subject(after=...)` takes to read what came since, and the index answers it
from its key without counting.

The index may be behind the log (a write whose views could not follow, a store
written by an older uwf): events past its checkpoint are read from the log's end,
complete batches only, as a fold reads them. So answers are exact either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from uwf.engine.events import Envelope
from uwf.engine.log import Checkpoint, EventLog
from uwf.engine.viewspec import ViewStore
from uwf.errors import Conflict, Corrupt

Decode = Callable[[bytes], Envelope]


class Streams:
    """Subjects' streams over a log and the stream index its views keep; each answer
    takes the index's checkpoint, matched with the log by the caller."""

    def __init__(self, log: EventLog, views: ViewStore, decode: Decode) -> None:
        self.log = log
        self.views = views
        self.decode = decode

    def read(self, indexed: Checkpoint, subject: str, after: int = 0, *,
             reverse: bool = False) -> Iterator[Envelope]:
        """`subject`'s events with seq > `after`, oldest first (newest first with
        `reverse`)."""
        # The index read after its checkpoint may hold more (a commit in between): what
        # lies past the checkpoint comes from the log, so each event is yielded once.
        seqs = [seq for seq in self.views.stream(subject, after, reverse=reverse)
                if seq <= indexed.seq]
        recent = self._recent(subject, max(after, indexed.seq))
        if reverse:
            yield from reversed(recent)
        for seq in seqs:
            yield self._event_at(subject, seq)
        if not reverse:
            yield from recent

    def version(self, indexed: Checkpoint, subject: str) -> int:
        """The seq of `subject`'s last event (0: none)."""
        recent = self._recent(subject, indexed.seq)
        return max(recent[-1].seq if recent else 0, self.views.version(subject))

    def check(self, indexed: Checkpoint, expected: Mapping[str, int],
              head: Checkpoint | None = None) -> None:
        """Refuse (Conflict) when a subject's version is not the one a write expects;
        `head`, the log's: an index at it has every event (no log read after it)."""
        for subject, want in expected.items():
            have = (self.views.version(subject) if indexed == head
                    else self.version(indexed, subject))
            if have != want:
                raise Conflict(f"{subject} has moved since the command read it (it "
                               f"expected version {want}; the log is at {have}): nothing "
                               "was written", "read it again, then retry")

    def _event_at(self, subject: str, seq: int) -> Envelope:
        raw = self.log.line(seq)
        envelope = None if raw is None else self.decode(raw)
        if envelope is None or envelope.seq != seq or envelope.subject != subject:
            raise Corrupt(f"views do not match the log at seq {seq} (the stream index has "
                          f"it as an event of {subject})", "run `uwf registry rebuild`")
        return envelope

    def _recent(self, subject: str, after: int) -> list[Envelope]:
        """`subject`'s events after `after` read from the log, in complete batches."""
        found: list[Envelope] = []
        batch: list[Envelope] = []
        for line in self.log.read(after):
            envelope = self.decode(line.raw)
            if envelope.subject == subject:
                batch.append(envelope)
            k, n = envelope.batch
            if k == n:
                found.extend(batch)
                batch.clear()
        return found
