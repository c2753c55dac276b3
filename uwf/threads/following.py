"""What a step's result knows of the step after it (uwf/threads/stepping.py): the
moderator asked again from the new head -- `$END` ends the thread in the result's batch
-- and, for `thread run`'s next step, that decision with the thread's state and version
as the result's write left them, so the next step neither reads its thread again before
its start nor asks the moderator (and renders the edge prompt) a second time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uwf.cas.store import Cas
from uwf.engine.events import EventData, NewEvent
from uwf.language.asking import is_ask
from uwf.language.moderator import END, Decision, NoTransition
from uwf.threads.asked import asked
from uwf.threads.events import ThreadEnded
from uwf.threads.projection import ThreadState
from uwf.threads.routing import route_from

if TYPE_CHECKING:
    from uwf.threads.plan import Plan


@dataclass(frozen=True)
class Following:
    """The thread as a step's last write left it: its state, its version (the seq of
    its last event; None when not known) and the moderator's decision from its head
    `head` (None: not taken). A start that states this version is refused if the
    thread moved since (`Conflict`), and then reads it again."""

    state: ThreadState
    version: int | None = None
    decision: Decision | None = None
    head: str | None = None

    def decision_for(self, state: ThreadState) -> Decision | None:
        """The decision, when `state` is at the head it was taken from with no question
        pending: the moderator's answer is a function of the head alone then (the
        thread's workflow and StartNode never move)."""
        if self.decision is None or state.head != self.head or state.asked is not None:
            return None
        return self.decision


def after(cas: Cas, plan: Plan, output: Any, head: str, now: int
          ) -> tuple[list[NewEvent], Decision | None]:
    """Step 8: ask the moderator again (from the new StepNode `head`); `$END` ends
    the thread in the same batch. A question ($ASK) is recorded instead: the thread
    waits for its answer (its schema a node, before the event that names it). The
    decision too, for the next step (None: a question, or no transition)."""
    subject = f"thread/{plan.thread}"
    if is_ask(output):
        return [NewEvent(subject, asked(cas, plan.step_id, plan.decision.role, output,
                                        now))], None
    try:
        _, decision = route_from(cas, plan.workflow, plan.start, role=plan.decision.role,
                                 output=output, head=head)
    except NoTransition:
        return [], None  # the next step finds no transition and blocks the thread
    data: list[EventData] = [ThreadEnded("end")] if decision.role == END else []
    return [NewEvent(subject, item) for item in data], decision
