"""What phase 1 of a step (uwf/threads/stepping.py) decided: the value phases 2 and 3,
and the modules they use (checks, following, inprocess), read."""

from __future__ import annotations

from dataclasses import dataclass

from uwf.config.configfile import AgentChoice
from uwf.language.moderator import Decision
from uwf.threads.projection import ThreadState


@dataclass(frozen=True)
class Plan:
    """What phase 1 decided for a step."""

    thread: str
    step_id: str
    head: str | None
    decision: Decision
    agent: AgentChoice
    started_ms: int
    repo: str
    start: str  # the thread's StartNode and Workflow: a step in flight never moves them
    workflow: str
    # The thread as the start's write left it (from its fold): what an in-process
    # agent's context is read from, with no catch-up of its own.
    state: ThreadState | None = None
