"""Writes' views commits held in the writing process: one commit for many writes.

The views may always be behind the log (every read and every write catches them up from
it first), so a write need not commit its fold at once. Its lines are in the log; its
fold (the new states, the rows the views hold of them at `start`, the stream entries)
is held by the journal (`Held`), and the journal's next write starts its own fold from
those states (its decide reads them first, by key) and adds to them. The held rows go
into the views in ONE transaction, its checkpoints moved from `start` (compare-and-set)
to the last held write's head:

- when `Journal.hold_writes` writes are held (the folder store: `HOLD_WRITES`);
- when a decide queries, counts or scans the views (`Views`: a query sees every row);
- when this process reads through its journal (`refresh`, the stream index, `reader`)
  or closes its store (`Journal.flush`);
- when a write finds that the log's tail is not its journal's last write (another
  process appended: this write commits its fold at once, as do the ones after it until
  STREAK of them in a row found the tail their own: writers that take turns never
  lag the views, nor make each other fold the log).

A held fold is used only while nothing moved: the log's last line is still the held
write's own and every view's checkpoint is still where the held fold started (no other
process appended, no reader caught the views up). Otherwise it is let go, and the views
are merely behind the log. A write that acknowledges nothing (`Journal.write_at(...,
hold=True)`: a step's start, not fsynced on its own either) is held whatever came before
it, so its result's write commits both.

The held rows are this process's only, never on disk: a process killed (kill -9) before
their commit loses nothing but a commit that the next reader or writer redoes from the
log (the lines were appended, and acknowledged only once fsynced, before any of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from uwf.engine.filelog import _FileSession
from uwf.engine.fold import Key
from uwf.engine.log import Checkpoint, LogSession
from uwf.engine.rounds import _recorded, enter
from uwf.engine.viewspec import Row
from uwf.errors import Conflict, UwfError

if TYPE_CHECKING:
    from uwf.engine.journal import Journal

# Writes the folder store holds before it commits their fold (a reader of another
# process folds at most these many commands' lines from the log to catch up).
HOLD_WRITES = 32
# Writes in a row that found the log's tail their journal's own before one holds its
# fold: processes that take turns (a lease here, a complete there) commit at once.
STREAK = 2
# States read from the views kept for the next writes while nothing else moves them.
SEEN = 4096
ABSENT: Any = object()  # not held (None is a state: the entity is gone)


class Held:
    """A fold not yet committed: the checkpoint every view was at (`start`), the log's
    head after the last held write (`head`), the new states, the rows the views hold of
    them (at `start`), the stream index's new entries, and how many writes it holds.
    Empty (`start == head`): the views are at this journal's last write. `seen`: states
    read from the views at `start` (of entities the fold did not change), so the next
    writes read them once while the views stay where they are (up to SEEN of them)."""

    __slots__ = ("before", "head", "seen", "start", "states", "streak", "streams", "writes")

    def __init__(self, start: Checkpoint, head: Checkpoint) -> None:
        self.start = start
        self.head = head
        self.states: dict[Key, Any] = {}
        self.before: dict[Key, Row | None] = {}
        self.streams: list[tuple[str, int]] = []
        self.writes = 0
        self.seen: dict[Key, Any] = {}
        self.streak = 0  # writes in a row that found the log's tail their journal's own

    def state(self, key: Key) -> Any:
        """The entity's state as of `head` when held or seen, else ABSENT."""
        state = self.states.get(key, ABSENT)
        return self.seen.get(key, ABSENT) if state is ABSENT else state

    def saw(self, key: Key, state: Any) -> None:
        """A state read from the views (at `start`), not held."""
        seen = self.seen
        if len(seen) >= SEEN:
            seen.clear()
        seen[key] = state

    def unheld(self, states: Mapping[Key, Any]) -> dict[Key, Any]:
        """The states of entities the held fold did not change."""
        before = self.before
        return {key: state for key, state in states.items() if key not in before}

    def add(self, head: Checkpoint, states: Mapping[Key, Any],
            before: Mapping[Key, Row | None], streams: list[tuple[str, int]]) -> None:
        """One more write's fold (`before`: the rows of the entities not held before)."""
        self.states.update(states)
        self.before.update(before)
        self.streams.extend(streams)
        self.head = head
        self.writes += 1

    def settled(self) -> None:
        """The held rows are in the views: they are at `head` now."""
        self.start = self.head
        if len(self.seen) + len(self.states) > SEEN:
            self.seen.clear()
        self.seen.update(self.states)
        self.states = {}
        self.before = {}
        self.streams = []
        self.writes = 0

    def current(self, tail: Checkpoint | None, checkpoints: Mapping[str, Checkpoint],
                folded: int) -> bool:
        """Still usable: the log ends with the held write's line, and each of the
        `folded` views' checkpoints is still the one the held fold started from."""
        return tail == self.head and len(checkpoints) == folded and \
            checkpoints == dict.fromkeys(checkpoints, self.start)  # compared in C


def commit_held(journal: Journal, held: Held) -> bool:
    """A held fold's rows committed (then `held` is empty at its head); False when the
    views would not take them (they moved: the fold is the log's to redo)."""
    if not held.writes:
        return True
    expected: dict[str, Checkpoint | None] = dict.fromkeys(journal._folded, held.start)
    try:
        done = journal.views.commit(journal.fold.rows(held.states, expected, held.before),
                                    expected, held.head, streams=held.streams)
    except UwfError:
        done = False
    if done:
        held.settled()
    return done


def settle(journal: Journal, held: Held) -> None:
    """Inside a write's section: the views at the held fold's head, its rows committed,
    or, when that fails, folded again from the log (the section's head is `held.head`)."""
    if not commit_held(journal, held):
        journal.refresh()
        held.settled()


def versions(journal: Journal, held: Held, expected: Mapping[str, int]) -> None:
    """`Streams.check` over the views at `held.start` and the held stream entries after
    them: refuse (Conflict) when a subject's version is not the one a write expects."""
    last: dict[str, int] = {}
    for subject, seq in held.streams:
        last[subject] = seq
    for subject, want in expected.items():
        have = last.get(subject)
        if have is None:
            have = journal.views.version(subject)
        if have != want:
            raise Conflict(f"{subject} has moved since the command read it (it expected "
                           f"version {want}; the log is at {have}): nothing was written",
                           "read it again, then retry")


def entered(journal: Journal, session: LogSession) -> tuple[Checkpoint, Held | None]:
    """`rounds.enter` for one write: the log's head (the views caught up with it, or
    behind it by this journal's held fold only), and that held fold when it is still
    usable (the log's tail is its last write, the views where it started)."""
    held = journal.take_held()
    if held is not None and isinstance(session, _FileSession):
        # The log's last line still this process's own, no note: no scan, no recovery.
        own = session.own()
        if own is not None and own == held.head and held.current(
                own, journal.views.checkpoints(), len(journal._folded)):
            return own, held
    tail = session.tail()
    # The views where the held fold started: nothing to read or fold (one look at their
    # checkpoints), only a torn tail after it to cut and record.
    if held is not None and held.head == tail and held.current(
            tail, journal.views.checkpoints(), len(journal._folded)):
        head, repairs = session.recover()
        if not repairs:
            return head, held
        return _recorded(journal, session, head, repairs), None
    # A reader caught the views up, another process appended, or nothing is held.
    return enter(journal, session, tail), None
