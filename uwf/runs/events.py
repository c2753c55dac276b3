"""The run registry's events: the archive overlay and rerun provenance (SPEC §7).

A run is a thread, so a run's own events share its subject `thread/<id>`; the
thread's events say what it did, these say how operators filed it.
"""

from __future__ import annotations

from typing import ClassVar

from uwf.engine.events import EventData


class RunArchived(EventData, frozen=True):
    """The run is filed away: hidden by `--include-archived false`, never deleted."""

    type: ClassVar[str] = "run.archived"
    reason: str = ""


class RunUnarchived(EventData, frozen=True):
    """The archive mark is cleared: the run shows its derived lifecycle again."""

    type: ClassVar[str] = "run.unarchived"
    reason: str = ""


class RunRerunLinked(EventData, frozen=True):
    """This run (the subject) reruns `rerun_of`: generation one past it, and the
    chain's first run as origin, pinned however long the chain grows."""

    type: ClassVar[str] = "run.rerun_linked"
    rerun_of: str
    rerun_of_repo: str
    origin_run_id: str
    generation: int
    reason: str = ""
    incremental: bool = False


RUN_EVENTS: tuple[type[EventData], ...] = (RunArchived, RunUnarchived, RunRerunLinked)
