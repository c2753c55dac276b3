"""A write's views commit held for the next write's (a step's start rides with its result).

A write that acknowledges nothing (`Journal.write_at(..., hold=True)`: a step's start,
which is not fsynced on its own either) need not commit its fold at once. Its lines are
in the log; its fold (the new states, the rows the views hold of them, its stream
entries) is held by the journal, and the next write of this journal that may carry it
(`carry=True`: a step's result, whose decide reads its states by key only) starts its
own fold from those states and commits both in ONE views transaction, its checkpoints
moved from where the held fold found them. Any other write commits the held rows first,
on their own (what every write did before), so a decide that queries the views sees
them.

A held fold is used only while nothing moved: the log's last line is still the held
write's own and every view's checkpoint is still where the held fold started (no other
process appended, no reader caught the views up). Otherwise it is let go, and the views
are merely behind the log, which they may always be: every read and every write catches
them up from the log first (so `thread show` during a running step prints the step in
flight, as before, whether or not this process has committed it). The held rows are
this process's only, never on disk: a crash loses nothing but a commit a reader redoes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from uwf.engine.fold import Key
from uwf.engine.log import Checkpoint, LogSession
from uwf.engine.rounds import enter
from uwf.engine.viewspec import Row
from uwf.errors import UwfError

if TYPE_CHECKING:
    from uwf.engine.journal import Journal


class Held:
    """A fold not yet committed: the checkpoint every view was at (`start`), the log's
    head after the write (`head`), the new states, the rows the views hold of them (at
    `start`), and the stream index's new entries."""

    __slots__ = ("before", "head", "start", "states", "streams")

    def __init__(self, start: Checkpoint, head: Checkpoint, states: dict[Key, Any],
                 before: dict[Key, Row | None], streams: list[tuple[str, int]]) -> None:
        self.start = start
        self.head = head
        self.states = states
        self.before = before
        self.streams = streams

    def unheld(self, states: Mapping[Key, Any]) -> dict[Key, Any]:
        """The states of entities the held fold did not change."""
        before = self.before
        return {key: state for key, state in states.items() if key not in before}

    def current(self, tail: Checkpoint | None, checkpoints: Mapping[str, Checkpoint],
                folded: int) -> bool:
        """Still usable: the log ends with the held write's line, and each of the
        `folded` views' checkpoints is still the one the held fold started from."""
        return tail == self.head and len(checkpoints) == folded and all(
            checkpoint == self.start for checkpoint in checkpoints.values())


def commit_held(journal: Journal, held: Held) -> None:
    """A held fold's rows committed alone; the views caught up from the log if that
    fails (they must be at the log's head before a decide reads them)."""
    expected: dict[str, Checkpoint | None] = dict.fromkeys(journal._folded, held.start)
    try:
        if journal.views.commit(journal.fold.rows(held.states, expected, held.before),
                                expected, held.head, streams=held.streams):
            return
    except UwfError:
        pass
    journal.refresh()


def entered(journal: Journal, session: LogSession, *, carry: bool
            ) -> tuple[Checkpoint, Held | None]:
    """`rounds.enter` for one write: the log's head (the views caught up with it, or
    behind it by a held fold only), and that held fold when the write `carry`s it (a
    write that does not has it committed first: its decide may query the views)."""
    held, journal._held = journal._held, None
    tail = session.tail()
    held = held if held is not None and held.head == tail else None
    head = enter(journal, session, tail, None if held is None else held.start)
    if held is not None and not held.current(head, journal.views.checkpoints(),
                                             len(journal._folded)):
        held = None  # a reader caught the views up, or a repair was recorded
    if held is not None and not carry:
        commit_held(journal, held)
        held = None
    return head, held
