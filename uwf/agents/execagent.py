"""`uwf-exec [--stdin] [--] CMD [ARGS...] THREAD ROLE`: wrap any CLI agent.

The assembled prompt (role, task, history, output contract) is passed to CMD as
its last argument (or on stdin with --stdin): `claude -p`, `codex exec`,
`aider --message` all fit. CMD's stdout is kept as the step's detail; the
output JSON is taken from its last ```json block (or YAML front matter) and
validated against the role's schema before the StepNode is written. CMD runs
with this process's environment over the config's `.env`.

Config example:
    agents:
      claude: {command: uwf-exec, args: ["--", "claude", "-p"]}

uwf-claude, uwf-codex, uwf-cursor and uwf-hermes are uwf-exec with the command
line filled in (uwf/agents/presets.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from uwf.agents.kit import agent_cli, context, environment, submit
from uwf.agents.prompting import assemble_prompt, extract_output
from uwf.errors import Rejected, UsageError


def run_cli_agent(thread: str, role: str, command: list[str], *, agent: str,
                  env: Mapping[str, str], use_stdin: bool = False,
                  missing_hint: str = "install it or fix args") -> str:
    """Run `command` with the step's prompt appended (or on its stdin), submit the
    output found in its stdout with that stdout as detail; the StepNode hash.

    `env` is the CLI agent's whole environment (and where the kit reads its own
    settings); `missing_hint` is the advice when `command[0]` cannot be run.
    """
    # The default history (the last 20 steps, or UWF_HISTORY / historyLimit), never
    # all of it: the prompt must not grow with the thread.
    prompt = assemble_prompt(context(thread, role, env=env))
    try:
        done = subprocess.run(command if use_stdin else [*command, prompt],
                              input=prompt if use_stdin else None, env=dict(env),
                              capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise Rejected(f"CLI agent {command[0]!r} not found", missing_hint) from None
    except PermissionError:
        raise Rejected(f"CLI agent {command[0]!r} is not executable", missing_hint) from None
    except OSError as exc:  # E2BIG: a prompt beyond the system's limit on one argument
        raise Rejected(f"cannot run CLI agent {command[0]!r}: {exc.strerror or exc}",
                       "pass the prompt on stdin (uwf-exec --stdin) or shorten the history"
                       ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1][:200]
        raise Rejected(f"{command[0]} exited with status {done.returncode}: {last}",
                       "see its output above")
    output: Any = extract_output(done.stdout)
    return submit(thread, role, output, done.stdout, agent=agent, env=env)


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
        return run_cli_agent(thread, role, command, agent=f"uwf-exec {command[0]}",
                             env=environment(), use_stdin=use_stdin)

    return agent_cli("uwf-exec", body, argv, usage=__doc__ or "")


def entry() -> None:
    sys.exit(main())
