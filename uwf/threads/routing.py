"""The next-decision function: where a thread goes from its head (SPEC §6)."""

from __future__ import annotations

from typing import Any

from uwf.cas.store import Cas
from uwf.language.asking import TIMEOUT
from uwf.language.moderator import START, Decision, evaluate, status_of
from uwf.threads.projection import ThreadState


def last_step(cas: Cas, state: ThreadState) -> tuple[str, Any]:
    """The role and output at the thread's head (`$START` and None before any step), as
    the moderator reads them: a question answered carries its `answer`, one whose
    deadline passed has the status `$TIMEOUT`."""
    if state.head is None:
        return START, None
    step = cas.get(state.head).payload
    output = cas.get(step["output"]).payload
    asked = state.asked
    if asked is not None and isinstance(output, dict):
        if asked.answer is not None:
            output = {**output, "answer": cas.get(asked.answer).payload}
        elif asked.timed_out:
            output = {**output, "status": TIMEOUT}
    return step["role"], output


def history(cas: Cas, head: str | None) -> list[dict[str, Any]]:
    """Every step from the first to `head`, oldest first, as conditions see them:
    `{role, status, output, agent}` with the output's payload.

    The whole chain, via `prev`: a thread has a few hundred steps at most in
    practice (`thread run` stops at DEFAULT_MAX_STEPS), and the CAS keeps the nodes
    it read, so a `thread run` reads each node once.
    """
    steps: list[dict[str, Any]] = []
    current = head
    while current is not None:
        step = cas.get(current).payload
        output = cas.get(step["output"]).payload
        steps.append({"role": step["role"], "status": status_of(step["role"], output),
                      "output": output, "agent": step["agent"]})
        current = step.get("prev")
    steps.reverse()
    return steps


def route(cas: Cas, state: ThreadState, role: str, output: Any, head: str | None
          ) -> tuple[dict[str, Any], Decision]:
    """The workflow and the moderator's decision after `role` produced `output` in
    the StepNode `head` (None: `$START`)."""
    return route_from(cas, state.workflow, state.start, role=role, output=output, head=head)


def route_from(cas: Cas, workflow_hash: str, start: str, *, role: str, output: Any,
               head: str | None) -> tuple[dict[str, Any], Decision]:
    """`route` for the thread of Workflow `workflow_hash` and StartNode `start`."""
    workflow: dict[str, Any] = cas.get(workflow_hash).payload
    prompt = cas.get(start).payload["prompt"]
    return workflow, evaluate(workflow["graph"], role, output, prompt,
                              conditions=workflow.get("conditions"),
                              steps=lambda: history(cas, head))


def next_decision(cas: Cas, state: ThreadState) -> tuple[dict[str, Any], Decision]:
    """The workflow and the moderator's decision from the thread's head."""
    return route(cas, state, *last_step(cas, state), state.head)
