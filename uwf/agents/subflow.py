"""`uwf-subflow WORKFLOW THREAD ROLE`: a workflow as an agent.

Starts a child thread of WORKFLOW whose prompt is this step's edge prompt (or
the parent's prompt), runs it to its end with the configured agents, and submits
the child's last output as this step's output, with the child's terminal
StepNode as its detail.
"""

from __future__ import annotations

import sys

from uwf.agents.kit import context, submit, thread_and_role
from uwf.engine.errors import Rejected, UsageError, UwfError


def main(argv: list[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help"):
        sys.stdout.write(__doc__ or "")
        return 0 if arguments else 2
    try:
        thread, role, rest = thread_and_role(arguments)
        if len(rest) != 1:
            raise UsageError("uwf-subflow takes one WORKFLOW before THREAD ROLE",
                             "set args: [WORKFLOW]")
        from uwf.api.stepping import run_thread
        from uwf.api.store import Store
        from uwf.api.threads import find_repo, get_thread, start_thread

        ctx = context(thread, role)
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
        print(submit(thread, role, output, detail_ref=str(result["head"]),
                     agent=f"uwf-subflow {rest[0]}"))
        return 0
    except UwfError as exc:
        sys.stderr.write(f"uwf-subflow: error: {exc.line()}\n")
        return exc.exit_code


def entry() -> None:
    sys.exit(main())
