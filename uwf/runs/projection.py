"""The `runs` view: the run index (SPEC §7). A run is a thread; its record is the
thread's state plus what operators filed on it (archive, rerun provenance).

The lifecycle is classified in the run's rules (`uwf.runs.rules.derive`: SPEC §7's
table, first match wins, over the thread's folded state, and `derived_of`: the clock's
rule, a step in flight past its deadline is `stalled`), which `log verify` judges a
rerun by too; `lifecycle` adds the archive overlay (`archived`, with the derived one
kept).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import msgspec

from uwf.engine.events import GENESIS_PREV, Envelope, digest, encode_line
from uwf.engine.projection import StructProjection
from uwf.engine.viewspec import ColumnValue
from uwf.runs.events import RUN_EVENTS, RunArchived, RunRerunLinked, RunUnarchived
from uwf.runs.rules import derive, derived_of, evolve
from uwf.runs.state import RunState, add_usage
from uwf.threads.events import THREAD_EVENTS, ThreadStarted, ThreadStepped
from uwf.threads.projection import ThreadsProjection, ThreadState, thread_key

_replace = msgspec.structs.replace
# The `deadline` column of a run with no step in flight: after any clock reading, so
# `running` is `deadline >= now` and `stalled` is `deadline < now`, one index range.
NO_DEADLINE = 2**62


def derived_at(run: RunState, now_ms: int) -> str:
    """The derived lifecycle at `now_ms`: a step in flight past its deadline stalls."""
    return derived_of(run.thread, now_ms)


def lifecycle(run: RunState, now_ms: int) -> str:
    """What a run shows: `archived` over the derived lifecycle."""
    return "archived" if run.archived else derived_at(run, now_ms)


def fingerprint(previous: str, event: Envelope) -> str:
    """The next running digest: the first 32 hex characters of SHA-256 over the previous
    one and the event's line as uwf writes it (for an event written by this version,
    its line in the log byte for byte). (`as_envelope`, inlined: a replay takes one per
    thread event.)"""
    line = encode_line(Envelope(event.seq, event.id, event.ts, event.type, event.subject,
                                event.batch, event.data, event.prev))
    return digest(previous.encode() + b"\n" + line)


_UNFOLDED = object()  # `apply_over`: no thread state given, fold it
# The thread events that move a run already recorded (`RunsProjection.planned_over`):
# all but its start.
_THREAD_TYPES = frozenset(t.type for t in THREAD_EVENTS)
_MOVES = _THREAD_TYPES - {ThreadStarted.type}


class RunsProjection(StructProjection):
    name: ClassVar[str] = "runs"
    # 5: waiting, the thread's question (threads view 6); 6 (threads view 7): no
    # `origin` column and no index of `updated_at` (no read filters by the one; the
    # retention's `updated_at < cutoff` goes by `archived`'s index, as SQLite plans it):
    # each index costs every replay and write
    version: ClassVar[int] = 6
    event_types: ClassVar[frozenset[str]] = frozenset(
        t.type for t in (*THREAD_EVENTS, *RUN_EVENTS))
    state_type: ClassVar[type[msgspec.Struct]] = RunState
    # Every listing is ordered by (created_at, key), and every filter is an index
    # range in that order, so a page costs what it returns.
    columns: ClassVar[tuple[str, ...]] = (
        "derived", "archived", "deadline", "created_at", "updated_at", "repo", "workflow",
        "workflow_hash")
    types: ClassVar[tuple[str, ...]] = (
        "text", "int", "int", "text", "text", "text", "text", "text")
    indexes: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("created_at", "key"), ("derived", "created_at", "key"), ("derived", "deadline"),
        ("archived", "created_at", "key"), ("repo", "created_at", "key"),
        ("workflow", "created_at", "key"), ("workflow_hash", "created_at", "key"))
    counted: ClassVar[tuple[str, ...]] = ("derived", "archived", "repo")
    indexes_on_read: ClassVar[bool] = True  # listings' only: made by the first one
    text: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self._threads = ThreadsProjection()

    key = thread_key  # the thread's own

    def column_values(self, state: RunState) -> tuple[ColumnValue, ...]:
        thread = state.thread
        flight = thread.in_flight
        return (derive(thread), int(state.archived),
                NO_DEADLINE if flight is None else flight.deadline_ms, thread.created_at,
                thread.updated_at, thread.repo, thread.name, thread.workflow)

    def search_text(self, state: RunState) -> str:
        thread = state.thread
        words = [thread.thread, thread.name, thread.workflow, state.title, thread.repo,
                 derive(thread), state.inputs_digest]
        if state.archived:
            words.append("archived")
        return "\n".join(words)

    # A run's record holds its thread's state, which the `threads` view folds from the
    # same events: a fold of both views takes it from there (`apply_over`), so each
    # thread event is folded into a thread once, not twice.
    extends: ClassVar[str] = ThreadsProjection.name

    def apply(self, state: RunState | None, event: Envelope) -> RunState | None:
        return self.apply_over(state, event, _UNFOLDED)

    def planned_over(self, event_type: str) -> Callable[[RunState | None, Envelope, object],
                                                      RunState | None] | None:
        """`apply_over` for events of one type, for a full replay (None: `apply_over`
        itself): a thread event, the run's `evolve` (spelled out for one that moves a
        run already recorded) with its running digest by hashlib's SHA-256 (OpenSSL's:
        about 4 times faster over a line than CPython's own, which `digest` uses so
        that a command need not load OpenSSL)."""
        if event_type not in _THREAD_TYPES:
            return None
        from hashlib import sha256

        apply_over = self.apply_over
        encode = msgspec.json.Encoder().encode  # `encode_line`'s, without its call
        # `fingerprint`, spelled out in each function below (a call less an event).

        if event_type not in _MOVES:  # a start: the record made (or a thread started again)
            def begun(state: RunState | None, event: Envelope, thread_after: object
                      ) -> RunState | None:
                if not isinstance(thread_after, ThreadState):
                    return None
                previous = GENESIS_PREV if state is None else state.source_fingerprint
                line = encode(Envelope(event.seq, event.id, event.ts, event.type,
                                       event.subject, event.batch, event.data, event.prev))
                return evolve(state, event, thread_after, sha256(
                    b"%s\n%s" % (previous.encode(), line)).hexdigest()[:32])
            return begun

        def moved(state: RunState | None, event: Envelope, thread_after: object
                  ) -> RunState | None:
            if state is None or type(thread_after) is not ThreadState:
                return apply_over(state, event, thread_after)
            # `evolve` of a thread event (no run event) over a run recorded, spelled out.
            line = encode(Envelope(event.seq, event.id, event.ts, event.type, event.subject,
                                   event.batch, event.data, event.prev))
            return _replace(state, thread=thread_after, source_fingerprint=sha256(
                b"%s\n%s" % (state.source_fingerprint.encode(), line)).hexdigest()[:32])

        def stepped(state: RunState | None, event: Envelope, thread_after: object
                    ) -> RunState | None:
            if state is None or type(thread_after) is not ThreadState:
                return apply_over(state, event, thread_after)
            data: ThreadStepped = event.data
            line = encode(Envelope(event.seq, event.id, event.ts, event.type, event.subject,
                                   event.batch, data, event.prev))
            source = sha256(b"%s\n%s" % (state.source_fingerprint.encode(), line)
                            ).hexdigest()[:32]
            if data.usage is None and data.reused is None:
                return _replace(state, thread=thread_after, source_fingerprint=source)
            usage = state.usage if data.usage is None else add_usage(state.usage, data.usage)
            return _replace(state, thread=thread_after,
                            reused_steps=state.reused_steps + int(data.reused is not None),
                            usage=usage, source_fingerprint=source)

        return stepped if event_type == ThreadStepped.type else moved

    def apply_over(self, state: RunState | None, event: Envelope,
                   thread_after: object) -> RunState | None:
        """`apply`, given the thread's state after `event` (a ThreadState or None) as the
        threads view folded it from the same events (`_UNFOLDED`: fold it here): the
        run's `evolve`, with the event taken into the record's running digest
        (`fingerprint`) in the same copy of the record."""
        thread: object
        if isinstance(event.data, RunArchived | RunUnarchived | RunRerunLinked):
            thread = None if state is None else state.thread
        else:
            thread = (self._threads.apply(None if state is None else state.thread, event)
                      if thread_after is _UNFOLDED else thread_after)
        if not isinstance(thread, ThreadState):
            return None
        source = fingerprint(GENESIS_PREV if state is None else state.source_fingerprint,
                             event)
        return evolve(state, event, thread, source)
