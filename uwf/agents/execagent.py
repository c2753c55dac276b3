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

from uwf.agents.kit import context, submit, thread_and_role
from uwf.agents.prompting import assemble_prompt, extract_output
from uwf.engine.errors import Rejected, UsageError, UwfError


def main(argv: list[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help"):
        sys.stdout.write(__doc__ or "")
        return 0 if arguments else 2
    try:
        thread, role, command = thread_and_role(arguments)
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
        ctx = context(thread, role)
        prompt = assemble_prompt(ctx)
        argv_run = command if use_stdin else [*command, prompt]
        try:
            done = subprocess.run(argv_run, input=prompt if use_stdin else None,
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
        print(submit(thread, role, output, done.stdout, agent=f"uwf-exec {command[0]}"))
        return 0
    except UwfError as exc:
        sys.stderr.write(f"uwf-exec: error: {exc.line()}\n")
        return exc.exit_code


def entry() -> None:
    sys.exit(main())
