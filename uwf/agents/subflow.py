"""`uwf-subflow WORKFLOW THREAD ROLE`: a workflow as an agent.

Starts a child thread of WORKFLOW whose prompt is this step's edge prompt (or
the parent's prompt), runs it to its end with the configured agents, and submits
the child's last output as this step's output, with the child's terminal
StepNode as its detail.
"""

from __future__ import annotations

import sys

from uwf.agents.kit import agent_cli, context, submit
from uwf.errors import Rejected, UsageError


def main(argv: list[str] | None = None) -> int:
    def body(thread: str, role: str, rest: list[str]) -> str:
        if len(rest) != 1:
            raise UsageError("uwf-subflow takes one WORKFLOW before THREAD ROLE",
                             "set args: [WORKFLOW]")
        from uwf.api.stepping import run_thread
        from uwf.api.store import Store
        from uwf.api.threads import find_repo, get_thread, start_thread

        ctx = context(thread, role, history_limit=0)
        store = Store.open()
        parent = get_thread(store.read(), thread)
        child = start_thread(store, rest[0], ctx["edgePrompt"] or ctx["prompt"],
                             parent.repo or find_repo())
        result = run_thread(store, child["thread"])
        final = get_thread(store.read(), child["thread"])
        if final.state != "ended" or final.head is None:
            raise Rejected(f"child thread {child['thread']} did not reach $END",
                           f"inspect it with `uwf thread log {child['thread']}`")
        step = store.cas.get(final.head).payload
        output = store.cas.get(step["output"]).payload
        return submit(thread, role, output, detail_ref=str(result["head"]),
                      agent=f"uwf-subflow {rest[0]}")

    return agent_cli("uwf-subflow", body, argv, usage=__doc__ or "")

def entry() -> None:
    sys.exit(main())
