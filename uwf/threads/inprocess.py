"""Phase 2 of a step (uwf/threads/stepping.py) run by an agent in this process: a
Python callable given the step's context, for embedding uwf in Python programs and for
benchmarks of the engine itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uwf.cas.store import Cas
from uwf.config.settings import Settings
from uwf.errors import UwfError
from uwf.payload import UNSET
from uwf.store import Store
from uwf.threads.agent import agent_context
from uwf.threads.checks import Failure
from uwf.threads.results import StepContext
from uwf.threads.stepnodes import StepFacts, write_step

if TYPE_CHECKING:
    from uwf.threads.plan import Plan

# An agent run in this process: (output, detail) from the step's context.
InProcessAgent = Callable[[StepContext], tuple[Any, str]]


def run_in_process(store: Store, cas: Cas, plan: Plan, agent: InProcessAgent, *,
                   settings: Settings) -> str | Failure:
    """The StepNode `agent` gives for the step `plan` began, its nodes put in `cas`; or
    why it failed (`exit`: the agent's output refused, say)."""
    role = plan.decision.role
    try:
        # The views are read as they are, with the thread as the start's write left it:
        # they are caught up to just before the start (its fold is held for the result's
        # commit: uwf/engine/held.py) or after it; what is read from them, the thread's
        # earlier failed attempts (its steps rows), is the same either way.
        given = None if plan.state is None else (store.journal.reader(), plan.state)
        context = agent_context(store, plan.thread, role, history_limit=0, given=given,
                                settings=settings)
        # What `submit_step` would read again is in the context and the plan: the step
        # in flight holds its thread (start, head, workflow), read once here.
        attempts = context.previous_attempts
        facts = StepFacts(plan.start, plan.head, role, context.role["meta"],
                          plan.decision.prompt, () if attempts is UNSET else tuple(attempts))
        output, detail = agent(context)
        return write_step(cas, facts, output, detail, agent=plan.agent.name,
                          started_at_ms=plan.started_ms, completed_at_ms=store.clock())
    except UwfError as exc:
        return Failure("exit", exc.line())
