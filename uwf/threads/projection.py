"""The `threads` view: each thread's head, progress, step in flight and state, as the
thread's `evolve` (`uwf.threads.rules`) leaves its whole state (`uwf.threads.state`)."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from uwf.engine.events import Envelope
from uwf.engine.projection import StructProjection
from uwf.engine.viewspec import ColumnValue
from uwf.threads.planned import PLANNED, Evolve
from uwf.threads.rules import THREAD_KINDS, evolve
from uwf.threads.state import (
    FAILURE_MESSAGE_CHARS,
    Asked,
    InFlight,
    LastFailure,
    ThreadState,
)

__all__ = ["FAILURE_MESSAGE_CHARS", "Asked", "InFlight", "LastFailure", "ThreadState",
           "ThreadsProjection"]


def thread_key(_projection: object, event: Envelope) -> str:
    """The thread an event changes: its subject's id (the `threads` and the `runs` views'
    `key`, one function, so a full replay takes it once for both: uwf/engine/bulkfold.py)."""
    return event.subject.removeprefix("thread/")


class ThreadsProjection(StructProjection):
    name: ClassVar[str] = "threads"
    # 6: waiting, and the head's question; 7: no `repo` and `created_at` columns (no read
    # filters or orders threads by them: `run list` does, from the runs view)
    version: ClassVar[int] = 7
    event_types: ClassVar[frozenset[str]] = frozenset(t.type for t in THREAD_KINDS)
    state_type: ClassVar[type[msgspec.Struct]] = ThreadState
    # `thread list` reads open (not ended) threads in creation (key) order, one index
    # range however many threads ended; `--status`, `--workflow NAME` and `--workflow
    # HASH` are index ranges too. Counts per state are kept. Only the columns those
    # reads use are kept: each index costs every write and a replay's load.
    columns: ClassVar[tuple[str, ...]] = ("state", "open", "name", "workflow")
    types: ClassVar[tuple[str, ...]] = ("text", "int", "text", "text")
    indexes: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("open", "key"), ("state", "key"), ("name", "key"), ("workflow", "key"))
    counted: ClassVar[tuple[str, ...]] = ("state",)
    indexes_on_read: ClassVar[bool] = True  # listings' only: made by the first one

    def column_values(self, state: ThreadState) -> tuple[ColumnValue, ...]:
        return (state.state, 0 if state.done else 1, state.name, state.workflow)

    key = thread_key

    def apply(self, state: ThreadState | None, event: Envelope) -> ThreadState | None:
        return evolve(state, event)

    def planned(self, event_type: str) -> Evolve | None:
        """`apply` for events of one type, spelled out for a full replay (None: `apply`
        itself): uwf/threads/planned.py."""
        return PLANNED.get(event_type)
