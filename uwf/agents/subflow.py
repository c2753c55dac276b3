"""`uwf-subflow [--max-steps N] WORKFLOW THREAD ROLE`: a workflow as an agent.

Starts a child thread of WORKFLOW whose prompt is this step's edge prompt (or
the parent's prompt), runs it to its end with the configured agents, and submits
the child's last output as this step's output, with the child's terminal
StepNode as its detail.

The child may take at most N steps (default 200, as `uwf thread run`): a child
that has not reached $END by then fails this step, and stays to inspect.

Config example:
    agents:
      review: {command: uwf-subflow, args: [review]}
      long:   {command: uwf-subflow, args: [--max-steps, "1000", solve-issue]}
"""

from __future__ import annotations

import os
import sys

from uwf.agents.kit import agent_cli, context, submit
from uwf.api.limits import DEFAULT_MAX_STEPS
from uwf.errors import Rejected, UsageError

_ARGS = "set args: [WORKFLOW] or [--max-steps, N, WORKFLOW]"


def _arguments(rest: list[str]) -> tuple[str, int]:
    """WORKFLOW and the child's step limit from `[--max-steps N] WORKFLOW`."""
    max_steps = DEFAULT_MAX_STEPS
    if rest[:1] == ["--max-steps"]:
        if len(rest) < 2 or not rest[1].isdigit() or int(rest[1]) < 1:
            shown = repr(rest[1]) if len(rest) > 1 else "nothing"
            raise UsageError(f"--max-steps must be 1 or more, not {shown}", _ARGS)
        max_steps, rest = int(rest[1]), rest[2:]
    if len(rest) != 1:
        raise UsageError("uwf-subflow takes one WORKFLOW before THREAD ROLE", _ARGS)
    return rest[0], max_steps


def main(argv: list[str] | None = None) -> int:
    def body(thread: str, role: str, rest: list[str]) -> str:
        workflow, max_steps = _arguments(rest)
        from uwf.api.secrets import load_redactor
        from uwf.api.stepping import run_thread
        from uwf.api.store import Store
        from uwf.api.threads import find_repo, get_thread, start_thread

        ctx = context(thread, role, history_limit=0)
        store = Store.open(redact=load_redactor(os.environ))
        parent = get_thread(store.read(), thread)
        child = start_thread(store, workflow, ctx["edgePrompt"] or ctx["prompt"],
                             parent.repo or find_repo())
        child_id = child["thread"]
        result = run_thread(store, child_id, max_steps=max_steps)
        final = get_thread(store.read(), child_id)
        if not result["done"] and result["steps"] >= max_steps:
            raise Rejected(
                f"child thread {child_id} did not reach $END within {max_steps} steps",
                f"continue it with `uwf thread run {child_id}`, or raise --max-steps")
        if final.state != "ended" or final.head is None:
            raise Rejected(f"child thread {child_id} did not reach $END",
                           f"inspect it with `uwf thread log {child_id}`")
        step = store.cas.get(final.head).payload
        output = store.cas.get(step["output"]).payload
        return submit(thread, role, output, detail_ref=str(result["head"]),
                      agent=f"uwf-subflow {workflow}")

    return agent_cli("uwf-subflow", body, argv, usage=__doc__ or "")

def entry() -> None:
    sys.exit(main())
