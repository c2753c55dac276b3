"""The run's transition table: what may be filed on a run (archive, unarchive, a
rerun's link) in which state.

A run is a thread; its own events share the thread's subject. What the thread
does is the thread's table (`uwf/threads/rules.py`); this one is the overlay an
operator files on top, `unarchived` or `archived`, and the link a rerun is born
with. Archiving ignores the run's lifecycle (retention archives running runs
too, with `--state running`); a rerun's link is written with its thread's start,
so it follows only a thread that is still idle, and only once, and names an original
that was not running at the link's instant (its lifecycle, `derived_of`: SPEC §7's
table over the thread's whole state, with the clock's one rule, a step in flight past
its deadline stalls). Read by `run archive` and `run rerun` (`uwf/runs/decide.py`),
the `runs` view and `log verify` (`uwf/runs/order.py`), which both fold a run's whole
state (`uwf/runs/state.py`) with `evolve`, over the thread's state the threads' `evolve`
folds from the same events.

Pure: no store, no clock, no I/O.
"""

from __future__ import annotations

import msgspec

from uwf.engine.events import GENESIS_PREV, Envelope, EventData
from uwf.runs.events import RunArchived, RunRerunLinked, RunUnarchived
from uwf.runs.state import Provenance, RunPhase, RunState, add_usage, title_of
from uwf.threads.events import ThreadStepped
from uwf.threads.rules import BEFORE_START
from uwf.threads.state import ThreadState

OVERLAYS = ("unarchived", "archived")
KINDS = ("archived", "unarchived", "rerun_linked")

# The table: an overlay -> the run events that may follow it -> the overlay after.
# A pair not here is refused by the commands and named by `log verify`.
TRANSITIONS: dict[str, dict[str, str]] = {
    "unarchived": {"archived": "archived", "rerun_linked": "unarchived"},
    "archived": {"unarchived": "unarchived"},
}
LINK_STATES = ("idle",)  # the thread states a rerun's link may follow

# Why a pair is not in the table (besides the thread's BEFORE_START).
ALREADY_ARCHIVED = "already-archived"
NOT_ARCHIVED = "not-archived"
LINKED_TWICE = "linked-twice"
LINK_LATE = "link-late"  # not with the thread's start: it moved on, or was archived
RERUN_OF_RUNNING = "rerun-of-running"  # a rerun's original was running at its instant
# Every code `refusal` and `rerun_refusal` return (tests/unit/test_refusals_named.py).
REFUSALS = (BEFORE_START, ALREADY_ARCHIVED, NOT_ARCHIVED, LINKED_TWICE, LINK_LATE,
            RERUN_OF_RUNNING)


_KIND: dict[type[EventData], str] = {
    RunArchived: "archived", RunUnarchived: "unarchived", RunRerunLinked: "rerun_linked",
}


def kind_of(data: EventData) -> str | None:
    """The table's name for a run event (None: not a run event)."""
    return _KIND.get(type(data))


def refusal(run: RunPhase, thread: str | None, kind: str) -> str | None:
    """Why `kind` may not follow `run` whose thread is in state `thread` (None: not
    started), or None when it may."""
    if thread is None:
        return BEFORE_START
    if kind == "rerun_linked":
        if run.linked:
            return LINKED_TWICE
        if thread not in LINK_STATES:
            return LINK_LATE
    if kind in TRANSITIONS[run.overlay]:
        return None
    return {"archived": ALREADY_ARCHIVED, "unarchived": NOT_ARCHIVED}.get(kind, LINK_LATE)


def problem(run: RunPhase, thread: str | None, data: EventData, subject: str) -> str | None:
    """What `log verify` says of the run event `data` on `subject` (None: allowed)."""
    kind = kind_of(data)
    why = None if kind is None else refusal(run, thread, kind)
    if why is None:
        return None
    if why == BEFORE_START:
        return f"{data.type} before {subject} started"
    if why == ALREADY_ARCHIVED:
        return f"{subject} archived while already archived"
    if why == NOT_ARCHIVED:
        return f"{subject} unarchived while not archived"
    if why == LINKED_TWICE:
        return f"{subject} linked as a rerun twice"
    return f"{subject} linked as a rerun while {run.overlay if thread in LINK_STATES else thread}"


def next_run(run: RunPhase, data: EventData) -> RunPhase:
    """The run after `data`: the table's target, or, for an event it refuses, what the
    event says all the same (so each problem is named once)."""
    kind = kind_of(data)
    if kind == "rerun_linked":
        return run._replace(linked=True)
    if kind is None:
        return run
    return run._replace(overlay=TRANSITIONS[run.overlay].get(kind, kind))


def derive(thread: ThreadState) -> str:
    """SPEC §7's lifecycle table over a thread's state, first match wins."""
    if thread.in_flight is not None:
        return "running"  # `stalled` once past its deadline: see `derived_of`
    if thread.state == "blocked":
        return "blocked"
    if thread.state == "waiting":
        return "waiting"  # for an answer to its head's question
    if thread.last_failure is not None:
        return "failed"
    if thread.state == "ended":
        return "completed"
    if thread.state == "killed":
        return "cancelled"
    if thread.steps > 0:
        return "running"
    return "queued"


def derived_of(thread: ThreadState, now_ms: int) -> str:
    """The derived lifecycle at `now_ms`: a step in flight past its deadline stalls."""
    flight = thread.in_flight
    if flight is not None and flight.deadline_ms < now_ms:
        return "stalled"
    return derive(thread)


def rerun_refusal(original: ThreadState | None, at: int) -> str | None:
    """Why a rerun of the run whose thread is `original` (None: not in the log) may not
    be linked at `at`: its original is running then."""
    if original is not None and derived_of(original, at) == "running":
        return RERUN_OF_RUNNING
    return None


_replace = msgspec.structs.replace


def evolve(run: RunState | None, event: Envelope, thread: ThreadState | None,
           source: str = GENESIS_PREV) -> RunState | None:
    """The run after `event` (None: its thread not started), over its whole state:
    its overlay and link as the table says (`next_run`; an event the table refuses as
    it says, so each problem is named once), its thread's state after the same event
    (`thread`: the threads' `evolve`), the rest from the event. `source` is the
    record's running digest after `event` (the `runs` view's `fingerprint`; `log
    verify`, which keeps none, leaves the default). The `runs` view is this folded,
    `log verify` folds it too."""
    data = event.data
    kind = kind_of(data)
    if kind is not None:
        if run is None:  # before its thread began: `log verify` reports it
            return None
        if isinstance(data, RunRerunLinked):
            provenance = Provenance(data.rerun_of, data.rerun_of_repo, data.origin_run_id,
                                    data.generation, data.reason, data.incremental)
            return _replace(run, provenance=provenance, source_fingerprint=source)
        if next_run(run.phase, data).overlay == "archived":
            return _replace(run, archived=True, archived_at=event.ts,
                            archive_reason=data.reason,
                            source_fingerprint=source)
        return _replace(run, archived=False, archived_at=None, archive_reason=None,
                        source_fingerprint=source)
    if thread is None:
        return None
    if run is None:
        inputs = getattr(data, "inputs_digest", "")
        return RunState(thread, title_of(inputs), inputs, source_fingerprint=source)
    if isinstance(data, ThreadStepped):
        return _replace(run, thread=thread,
                        reused_steps=run.reused_steps + int(data.reused is not None),
                        usage=run.usage if data.usage is None else add_usage(
                            run.usage, data.usage), source_fingerprint=source)
    return _replace(run, thread=thread, source_fingerprint=source)
