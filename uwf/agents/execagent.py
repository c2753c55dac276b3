"""`uwf-exec [--stdin] [--] CMD [ARGS...] THREAD ROLE`: wrap any CLI agent.

The assembled prompt (role, task, history, output contract) is passed to CMD as
its last argument (or on stdin with --stdin): `claude -p`, `codex exec`,
`aider --message` all fit. CMD's stdout is kept as the step's detail; the
output JSON is taken from its last ```json block (or YAML front matter) and
validated against the role's schema before the StepNode is written.

Config example:
    agents:
      claude: {command: uwf-exec, args: ["--", "claude", "-p"]}
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from uwf.agents.kit import agent_cli, context, submit
from uwf.agents.prompting import assemble_prompt, extract_output
from uwf.errors import Rejected, UsageError


def main(argv: list[str] | None = None) -> int:
    def body(thread: str, role: str, command: list[str]) -> str:
        use_stdin = False
        while command and command[0].startswith("--"):
            flag = command.pop(0)
            if flag == "--":
                break
            if flag == "--stdin":
                use_stdin = True
            else:
                raise UsageError(f"unknown uwf-exec option {flag}", "see `uwf-exec --help`")
        if not command:
            raise UsageError("uwf-exec needs the command of a CLI agent",
                             "set args such as [\"--\", \"claude\", \"-p\"]")
        # The default history (the last 20 steps, or UWF_HISTORY / historyLimit), never
        # all of it: the prompt must not grow with the thread.
        prompt = assemble_prompt(context(thread, role))
        try:
            done = subprocess.run(command if use_stdin else [*command, prompt],
                                  input=prompt if use_stdin else None,
                                  capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise Rejected(
                f"CLI agent {command[0]!r} not found", "install it or fix args"
            ) from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [""])[-1][:200]
            raise Rejected(f"{command[0]} exited with status {done.returncode}: {last}",
                           "see its output above")
        output: Any = extract_output(done.stdout)
        return submit(thread, role, output, done.stdout, agent=f"uwf-exec {command[0]}")

    return agent_cli("uwf-exec", body, argv, usage=__doc__ or "")

def entry() -> None:
    sys.exit(main())
