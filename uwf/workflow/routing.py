"""The next-decision function: where a thread goes from its head (SPEC §6)."""

from __future__ import annotations

from typing import Any

from uwf.cas.store import Cas
from uwf.projections.threads import ThreadState
from uwf.workflow.moderator import START, Decision, evaluate


def last_step(cas: Cas, state: ThreadState) -> tuple[str, Any]:
    """The role and output at the thread's head (`$START` and None before any step)."""
    if state.head is None:
        return START, None
    step = cas.get(state.head).payload
    return step["role"], cas.get(step["output"]).payload


def route(cas: Cas, state: ThreadState, role: str, output: Any
          ) -> tuple[dict[str, Any], Decision]:
    """The workflow and the moderator's decision after `role` produced `output`."""
    workflow: dict[str, Any] = cas.get(state.workflow).payload
    prompt = cas.get(state.start).payload["prompt"]
    return workflow, evaluate(workflow["graph"], role, output, prompt)


def next_decision(cas: Cas, state: ThreadState) -> tuple[dict[str, Any], Decision]:
    """The workflow and the moderator's decision from the thread's head."""
    return route(cas, state, *last_step(cas, state))
