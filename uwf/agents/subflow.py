"""`uwf-subflow [--max-steps N] WORKFLOW THREAD ROLE`: a workflow as an agent.

Starts a child thread of WORKFLOW whose prompt is this step's edge prompt (or
the parent's prompt), runs it to its end with the configured agents, and submits
the child's last output as this step's output, with the child's terminal
StepNode as its detail.

The child may take at most N steps (default 200, as `uwf thread run`): a child
that has not reached $END by then fails this step, and stays to inspect.

Subflows nest at most D deep (`--max-depth D`, default 8): a subflow started
inside D others (a workflow whose role is played by a subflow of itself) fails
its step at once, naming the depth, instead of recursing without bound. The
depth reaches nested subflows through the environment (UWF_SUBFLOW_DEPTH), as
they run in agent processes started by this one.

Config example:
    agents:
      review: {command: uwf-subflow, args: [review]}
      long:   {command: uwf-subflow, args: [--max-steps, "1000", solve-issue]}
      deep:   {command: uwf-subflow, args: [--max-depth, "3", solve-issue]}
"""

from __future__ import annotations

import os
import sys

from uwf.agents.kit import agent_cli, context, submit
from uwf.config.limits import DEFAULT_MAX_STEPS, DEFAULT_SUBFLOW_DEPTH
from uwf.errors import Rejected, UsageError

_ARGS = "set args: [WORKFLOW], with [--max-steps, N] or [--max-depth, D] before it"
DEPTH_VAR = "UWF_SUBFLOW_DEPTH"  # how many subflows the current process runs inside


def _arguments(rest: list[str]) -> tuple[str, int, int]:
    """WORKFLOW, the child's step limit and the nesting limit from `[--max-steps N]
    [--max-depth D] WORKFLOW`."""
    limits = {"--max-steps": DEFAULT_MAX_STEPS, "--max-depth": DEFAULT_SUBFLOW_DEPTH}
    while rest[:1] and rest[0] in limits:
        if len(rest) < 2 or not rest[1].isdigit() or int(rest[1]) < 1:
            shown = repr(rest[1]) if len(rest) > 1 else "nothing"
            raise UsageError(f"{rest[0]} must be 1 or more, not {shown}", _ARGS)
        limits[rest[0]], rest = int(rest[1]), rest[2:]
    if len(rest) != 1:
        raise UsageError("uwf-subflow takes one WORKFLOW before THREAD ROLE", _ARGS)
    return rest[0], limits["--max-steps"], limits["--max-depth"]


def _depth() -> int:
    """How many subflows this one runs inside (0: it is the outermost)."""
    text = os.environ.get(DEPTH_VAR, "0")
    return int(text) if text.isdigit() and len(text) < 6 else 0


def main(argv: list[str] | None = None) -> int:
    def body(thread: str, role: str, rest: list[str]) -> str:
        workflow, max_steps, max_depth = _arguments(rest)
        depth = _depth()
        if depth >= max_depth:
            raise Rejected(f"subflow nesting depth {max_depth} reached ({workflow})",
                           "raise --max-depth in the agent's args, or end the recursion")
        if os.environ.get("UWF_STEP_DIR") and not os.environ.get("UWF_HOME"):
            raise Rejected("uwf-subflow starts its child thread in the store, and this "
                           "step's store is on a database server, whose credentials "
                           "agents never get", "play the role with an agent that is not "
                           "a subflow, or run the workflow on a folder store")
        from uwf.config.repo import find_repo
        from uwf.config.secrets import load_redactor
        from uwf.config.settings import process_settings
        from uwf.features import FEATURES
        from uwf.store import Store
        from uwf.threads.service import get_thread, start_thread
        from uwf.threads.stepping import run_thread

        ctx = context(thread, role, history_limit=0)
        # The child's agents inherit the depth through the environment they are given;
        # this process's own is left alone, so `main` can run again (or in threads).
        settings = process_settings().with_environ(**{DEPTH_VAR: str(depth + 1)})
        store = Store.open(settings=settings, features=FEATURES,
                           redact=load_redactor(os.environ, settings.config_path))
        parent = get_thread(store.read(), thread)
        child = start_thread(store, workflow, ctx["edgePrompt"] or ctx["prompt"],
                             parent.repo or find_repo(None, settings), settings=settings)
        child_id = child.thread
        result = run_thread(store, child_id, max_steps=max_steps, settings=settings)
        final = get_thread(store.read(), child_id)
        if not result.done and result.steps >= max_steps:
            raise Rejected(
                f"child thread {child_id} did not reach $END within {max_steps} steps",
                f"continue it with `uwf thread run {child_id}`, or raise --max-steps")
        if final.state != "ended" or final.head is None:
            raise Rejected(f"child thread {child_id} did not reach $END",
                           f"inspect it with `uwf thread log {child_id}`")
        step = store.cas.get(final.head).payload
        output = store.cas.get(step["output"]).payload
        return submit(thread, role, output, detail_ref=result.head,
                      agent=f"uwf-subflow {workflow}")

    return agent_cli("uwf-subflow", body, argv, usage=__doc__ or "")

def entry() -> None:
    sys.exit(main())
