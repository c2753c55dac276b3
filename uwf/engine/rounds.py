"""A round of commands written as one unit (the resident writer's batch mode).

`write_round` runs the write protocol of `Journal.write_at` (uwf/engine/journal.py)
once for many commands: one exclusive section, one tail check, then each command
decided in turn against a `Memory` (states the caller holds as Python values, kept
at the log's head: each command sees every earlier command's events of the round),
its events chained after the one before and folded into that memory at once; then
ONE append of every line of the round (one write(2)), ONE views commit (one SQLite
transaction, the rows of every entity the round changed, each checkpoint moved once:
at once, or with `defer` for many rounds later, `flush`), the section left. The fsync
is the caller's (the writer's syncer: one for many rounds).

Deferred rows leave the views behind the log for a while, which they may always be:
a reader catches them up from the log before it reads (and so sees every line the
writer acknowledged), and `flush` is a compare-and-set of their checkpoints, so rows
a reader or another writer folded meanwhile are let go, never written twice.

A refusal (`UwfError` from a command's decide) is that command's result and spoils
none of the others': nothing of it was folded. Anything else that fails (the append,
a bug in a fold) fails the whole round before its lines are written, or, after, says
the memory may be stale (`Memory.forget`): it is read again from the views, and the
round's callers get no result (the writer answers them with the failure).

The file lock stays the protocol: a process that does not use the writer appends
under the same lock; the round's tail check sees its lines (the log's head differs
from the memory's), catches the views up and has the memory read what they changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from uwf.engine.events import (
    FORMAT_VERSION,
    Envelope,
    LogRepaired,
    NewEvent,
    StoreCreated,
    digest,
    encode_line,
)
from uwf.engine.fold import Key
from uwf.engine.log import Checkpoint, LogSession
from uwf.engine.viewspec import Row
from uwf.errors import UwfError

if TYPE_CHECKING:
    from uwf.engine.journal import Journal, Outcome, Views

Decide = Callable[["Views", int], "Outcome[Any]"]


class Memory(Protocol):
    """What a round decides against: states held in memory, valid at `head`."""

    head: Checkpoint | None  # None: not loaded (or no longer trusted)
    unsaved: Unsaved | None  # rows of rounds the views do not have yet (deferred)

    def catch_up(self, journal: Journal, head: Checkpoint) -> None:
        """Be valid at `head` (the views are caught up with it): read what moved."""
        ...

    def views(self, head: Checkpoint) -> Views:
        """Read-only views over the memory (and the views for what it does not hold)."""
        ...

    def state(self, key: Key) -> Any:
        """An entity's state as the memory holds it (`MISSING`: not held)."""
        ...

    def change(self, states: Mapping[Key, Any]) -> None:
        """The new states of a command's fold."""
        ...

    def forget(self) -> None:
        """Distrust what is held (its unsaved rows let go): the next round reads it
        again."""
        ...

    def settle(self) -> None:
        """The round's rows are in the views (what it held of other views may go)."""
        ...


class _Known(Mapping[Key, Any]):
    """The memory as the fold's `known` (states as of the round's running head)."""

    def __init__(self, memory: Memory) -> None:
        self._state = memory.state

    def __getitem__(self, key: Key) -> Any:
        state = self._state(key)
        if state is MISSING:
            raise KeyError(key)
        return state

    def get(self, key: Key, default: Any = None) -> Any:
        state = self._state(key)  # one look, not Mapping's __getitem__ and its KeyError
        return default if state is MISSING else state

    def __contains__(self, key: object) -> bool:
        return self._state(key) is not MISSING  # type: ignore[arg-type]

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Unsaved:
    """Rounds' rows not yet in the views (deferred: `write_round(defer=True)`): the
    views' checkpoint they follow, each changed entity's latest state and the row the
    views hold of it, the stream entries."""

    def __init__(self, start: Checkpoint) -> None:
        self.start = start
        self.changed: dict[Key, Any] = {}
        self.before: dict[Key, Row | None] = {}
        self.streams: list[tuple[str, int]] = []
        self.rounds = 0


def write_round(journal: Journal, decides: Sequence[Decide], memory: Memory, *,
                defer: bool = False) -> list[Any | UwfError]:
    """Each command's result (an `UwfError`: its refusal), the round's lines appended
    (not yet durable: `log.sync` is the caller's) and the views committed once, or,
    with `defer`, their rows kept in `memory.unsaved` for a later `flush`."""
    journal._not_deciding("write")
    with journal.log.exclusive() as session:
        return decide_round(journal, session, decides, memory, defer=defer)


def decide_round(journal: Journal, session: LogSession, decides: Sequence[Decide],
                 memory: Memory, *, defer: bool = False,
                 line_digest: Callable[[bytes], str] = digest) -> list[Any | UwfError]:
    """`write_round` in an exclusive section the caller holds (the resident writer's
    round: uwf/writer/server.py). `line_digest`: `events.digest` or the same digest
    taken faster (a process that runs long: hashlib's SHA-256, whose import a command
    line would pay, uwf/writer/server.py)."""
    head = _at_head(journal, session, memory)
    if memory.head != head:
        memory.catch_up(journal, head)
    known = _Known(memory)
    results: list[Any | UwfError] = []
    raws: list[bytes] = []
    unsaved = memory.unsaved or Unsaved(head)
    projections = journal.projections
    names = set(projections)
    # Every event a round folds is new (its seq past every view's checkpoint): no view
    # has folded it, so one `since` of zeros serves every call (`Fold.apply`).
    since = dict.fromkeys(projections, 0)
    views = memory.views(head)  # one for the round: it reads the memory as it moves
    local = journal._local
    fold = journal.fold
    before = unsaved.before
    changed = unsaved.changed
    streams = unsaved.streams
    clock = journal.clock
    try:
        for decide in decides:
            now = clock()
            views.head = head
            local.deciding = True
            try:
                outcome = decide(views, now)
            except UwfError as exc:
                results.append(exc)
                continue
            finally:
                local.deciding = False
            events = outcome.events
            if events:
                if head.seq == 0:
                    events = [NewEvent("store", StoreCreated(format=FORMAT_VERSION)),
                              *events]
                made, lines, last = envelopes(journal, head, events, now,
                                              line_digest=line_digest)
                states = fold.prefetch(made, known)
                for key, state in states.items():
                    if key not in before:  # the row the views hold (at `start`)
                        before[key] = None if state is None else \
                            projections[key[0]].row(state)
                for envelope in made:
                    fold.apply(states, envelope, since, names, known)
                memory.change(states)
                changed.update(states)
                streams.extend([(envelope.subject, envelope.seq) for envelope in made])
                raws.extend(lines)
                head = Checkpoint(made[-1].seq, last)
            if outcome.then is not None:
                views.head = head
                results.append(outcome.then(views))
            else:
                results.append(outcome.result)
        if raws:
            memory.head = session.append(raws)  # one write(2) of the round's lines
            unsaved.rounds += 1
            memory.unsaved = unsaved
            if not defer:
                flush(journal, memory)
    except BaseException:
        memory.forget()  # what it holds may be ahead of the log now
        raise
    return results


def envelopes(journal: Journal, head: Checkpoint, events: Sequence[NewEvent], ms: int, *,
              line_digest: Callable[[bytes], str] | None = None,
              last_digest: bool = True
              ) -> tuple[list[Envelope], list[bytes], str]:
    """The events as the lines that follow `head`, stamped `ms` (`Journal.stamps`):
    their envelopes, their bytes, chained, and the
    last line's digest (a round's new head) — or, without `last_digest`, the digest its
    `prev` holds, the caller's append or checkpoint taking the last one once."""
    new_ulid, new_ulids = _minting()
    chain = digest if line_digest is None else line_digest  # `events.digest` by default
    ts = journal.stamps(ms)
    count = len(events)
    redact = journal.redact is not None
    if count == 1 and not redact:  # a call of the writer's: one event, no list of ids
        event = events[0]
        data = event.data
        envelope = Envelope(head.seq + 1, new_ulid(ms), ts, data.type, event.subject,
                            (1, 1), data, head.digest)
        raw = encode_line(envelope)
        return [envelope], [raw], chain(raw) if last_digest else head.digest
    ids = [new_ulid(ms)] if count == 1 else new_ulids(ms, count)
    made: list[Envelope] = []
    raws: list[bytes] = []
    prev = head.digest
    seq = head.seq
    chained = count if last_digest else count - 1
    for index, event in enumerate(events):
        data = journal._redacted(event.data) if redact else event.data
        envelope = Envelope(seq + index + 1, ids[index], ts, data.type, event.subject,
                            (index + 1, count), data, prev)
        raw = encode_line(envelope)
        if index < chained:
            prev = chain(raw)
        made.append(envelope)
        raws.append(raw)
    return made, raws, prev


_MINT: list[Any] = []  # ulids' minting functions, imported once on the first write


def _minting() -> Any:
    """`ulids.new_ulid` and `new_ulids`, imported on the first line made (a read mints no
    id, and an import statement in `envelopes` cost a lookup every call)."""
    if not _MINT:
        from uwf.engine.ulids import new_ulid, new_ulids

        _MINT.extend((new_ulid, new_ulids))
    return _MINT


def flush(journal: Journal, memory: Memory) -> bool:
    """Commit the rows `memory.unsaved` holds, in one views transaction moving every
    checkpoint from where they were to the memory's head; False when the views had
    moved meanwhile (a reader or a writer of another process folded the log: the
    rows are let go, the views catch up from the log as ever)."""
    unsaved, memory.unsaved = memory.unsaved, None
    if unsaved is None or memory.head is None:
        return True
    expected: dict[str, Checkpoint | None] = dict.fromkeys(journal._folded, unsaved.start)
    try:
        done = journal.views.commit(
            journal.fold.rows(unsaved.changed, expected, unsaved.before), expected,
            memory.head, streams=unsaved.streams)
    except UwfError:
        done = False
    memory.settle()
    return done


def _at_head(journal: Journal, session: LogSession, memory: Memory) -> Checkpoint:
    """The log's head, the views caught up with it (as `Journal.write_at` enters), or
    behind it by the memory's unsaved rows only (the log's tail is the memory's own)."""
    own = getattr(session, "own_head", None)  # the resident writer's: uwf/writer/owned.py
    if own is not None and memory.head is not None and own() == memory.head:
        return memory.head  # the tail is the memory's own line: nothing to look at
    tail = session.tail()
    if tail is not None and tail == memory.head:
        # The log's last whole line is the memory's own: no line was written since,
        # and the memory, not the views, is what the round decides on (their commit
        # is a compare-and-set: a reader that folded meanwhile is let be). A torn
        # line after it is still cut and recorded, as every writer does.
        return _recorded(journal, session, *session.recover())
    memory.unsaved = None  # the log moved under it: the views catch up from it
    memory.settle()
    return enter(journal, session, tail)


def enter(journal: Journal, session: LogSession, tail: Checkpoint | None,
          behind: Checkpoint | None = None) -> Checkpoint:
    """The write protocol's entry, in the exclusive section (`Journal.write_at` and a
    round): the log's head, the views caught up with it, a torn tail cut and recorded.
    `tail` is the session's: when every view's checkpoint is it (or `behind`, where the
    caller holds the fold from there to `tail`: uwf/engine/held.py), nothing is read."""
    checkpoints = journal.views.checkpoints()
    current = tail is not None and len(checkpoints) == len(journal._folded) and (
        all(checkpoint == tail for checkpoint in checkpoints.values())
        or (behind is not None and all(cp == behind for cp in checkpoints.values())))
    if not current:
        # Views fold only acknowledged lines; if the log lost one of them, the tail is
        # evidence, not a torn write: refuse before recovery cuts it.
        for checkpoint in set(checkpoints.values()):
            journal._check_match(checkpoint)
    head, repairs = session.recover()
    if not current:
        head = journal.refresh()
    return _recorded(journal, session, head, repairs)


def _recorded(journal: Journal, session: LogSession, head: Checkpoint,
              repairs: Sequence[LogRepaired]) -> Checkpoint:
    """The head after each repair `recover` made is recorded, alone in its batch."""
    for repair in repairs:
        head, _ = journal._append(session, head, [NewEvent("store", repair)], journal.clock())
    return head
