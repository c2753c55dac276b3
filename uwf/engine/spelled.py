"""A write's events spelled by the command that made them: the lines, view rows and
stream entries the journal would make of `Outcome.events`, made faster by a command
that knows its events' one shape (`queue add --batch`: uwf/queue/batch.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from uwf.engine.log import Checkpoint, LogSession
from uwf.engine.viewspec import Changes, StreamEntries, ViewStore
from uwf.errors import UwfError


class Spelled(msgspec.Struct, frozen=True):
    """The lines after a head (without newlines, chained from the head's digest), the
    rows every view holds once they are folded, and their stream entries: exactly what
    the journal's envelopes and fold make of the same events at the same instant
    (tests/unit/test_batch_bytes.py)."""

    lines: list[bytes]
    changes: Changes
    streams: StreamEntries

    def append(self, session: LogSession, views: ViewStore,
               expected: Mapping[str, Checkpoint | None], refresh: Callable[[], Any]
               ) -> Checkpoint:
        """Append the lines and commit the rows as the journal's `_append` does its
        events' (the views at `expected`, the head the lines follow): the new head. A
        commit that fails leaves the views stale (the lines are in the log: the next
        read catches them up); one that finds them moved catches them up (`refresh`)."""
        head = session.append(self.lines)
        try:
            if not views.commit(self.changes, expected, head, streams=self.streams):
                refresh()
        except UwfError:
            pass
        return head


# Given the head the lines follow and the instant (epoch ms) they are stamped, the
# spelling, or None to let the journal make them of the events (a case it does not know).
Speller = Callable[[Checkpoint, int], Spelled | None]
