"""The agent kit as a Python library: an agent in a few lines.

    from uwf.agents.kit import run

    def plan(ctx):
        return {"status": "ready", "plan": ctx["edgePrompt"]}, "my notes"

    run(plan)

`run` reads `THREAD ROLE` from argv (as `uwf thread step` calls agents), loads
the config's `.env` into the environment (as the seed's agent kit does at start),
gives the handler the context, submits what it returns, and prints the StepNode
hash.

Run by `uwf thread step`, the kit reads the context from and writes the nodes to the
step's staging folder (UWF_STEP_DIR, uwf/threads/staging.py), never the store; run
by hand, without it, it works on the store (UWF_HOME).

Every setting the kit reads (UWF_STEP_DIR, UWF_HOME, UWF_HISTORY, UWF_STEP_STARTED_MS, API keys)
comes from `environment()`: the process environment over the config's `.env`, so
an agent started by hand sees what one started by `uwf thread step` sees.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from uwf.errors import UsageError, UwfError

Handler = Callable[[dict[str, Any]], tuple[Any, str]]


def environment() -> dict[str, str]:
    """This process's environment over the `.env` beside the config file (a variable
    already set wins): the environment `uwf thread step` gives its agents."""
    from uwf.config.env import with_dotenv
    from uwf.config.settings import config_path

    return with_dotenv(os.environ, config_path(os.environ).parent / ".env")


def load_dotenv() -> None:
    """Put the config's `.env` values that are not already set into `os.environ`.

    The seed's start-up step for an agent process, so that its own code and the
    programs it starts see the API keys; `run` calls it. Library functions never
    do: they take `environment()` instead.
    """
    for name, value in environment().items():
        os.environ.setdefault(name, value)


def _staged(env: Mapping[str, str]) -> Any:
    """The staging folder `uwf thread step` gave this agent (UWF_STEP_DIR), or None
    (an agent run by hand works on the store, as `uwf agent context|submit` do);
    secrets are masked in what is submitted there too."""
    if not env.get("UWF_STEP_DIR"):
        return None
    from uwf.config.secrets import load_redactor
    from uwf.config.settings import config_path
    from uwf.engine.clock import clock_from
    from uwf.threads.staging import open_staged

    # The clock and the config file alone (UWF_NOW, UWF_CONFIG): the store's settings
    # (`Settings.from_env`) would load its log's modules, which a staged agent never uses.
    return open_staged(env, clock_from(None, env), load_redactor(env, config_path(env)))


def _store(env: Mapping[str, str]) -> Any:
    """The store uwf ran this agent on (`UWF_HOME`), with this process's settings;
    secrets in what the agent submits are masked before they reach the CAS, as the
    CLI masks them."""
    from uwf.config.secrets import load_redactor
    from uwf.config.settings import process_settings
    from uwf.features import FEATURES
    from uwf.store import Store

    settings = process_settings(env.get("UWF_HOME"))
    return Store.open(settings=settings, redact=load_redactor(env, settings.config_path),
                      features=FEATURES)


def context(thread: str, role: str,
            history_limit: int | Literal["all"] | None = None, *,
            env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The step's context: role, schema, prompt, edge prompt, history, head.

    `history` holds the last `history_limit` steps (0: none; "all": every one);
    None gives the default: UWF_HISTORY, else the config's historyLimit, else 20.
    Settings come from `env`, by default `environment()`.
    """
    env = environment() if env is None else env
    staged = _staged(env)
    if staged is not None:
        from uwf.threads.staging import staged_context

        return staged_context(staged, thread, role, history_limit)
    # Only an agent run by hand reads the store: a staged one (under `uwf thread
    # step`) never imports it, nor the thread service it comes through.
    from uwf.payload import to_payload
    from uwf.threads.agent import agent_context

    store = _store(env)
    context: dict[str, Any] = to_payload(agent_context(store, thread, role, history_limit,
                                                       settings=store.settings, env=env))
    return context


def submit(thread: str, role: str, output: Any, detail: str = "", *,
           detail_ref: str | None = None, agent: str | None = None,
           env: Mapping[str, str] | None = None, usage: Any = None) -> str:
    """Store the output (validated), its detail and the StepNode; return its hash.

    `usage` (`{inputTokens, outputTokens, cost}`), or a top-level `usage` field of the
    output, is what the step spent: kept in the detail, summed per run.
    Settings come from `env`, by default `environment()`.
    """
    env = environment() if env is None else env
    started = env.get("UWF_STEP_STARTED_MS")
    started_ms = int(started) if started and started.isdigit() else None
    agent = agent or os.path.basename(sys.argv[0]) or "python"
    staged = _staged(env)
    if staged is not None:
        from uwf.threads.staging import staged_submit

        return staged_submit(staged, thread, role, output, detail, detail_ref=detail_ref,
                             agent=agent, started_at_ms=started_ms,
                             completed_at_ms=staged.cas.clock(), usage=usage)
    from uwf.threads.agent import submit_step

    return submit_step(
        _store(env), thread, role, output, detail, detail_ref=detail_ref,
        agent=agent, started_at_ms=started_ms, usage=usage,
    )


def thread_and_role(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """The agent protocol: `<command> <args...> <thread-id> <role>`."""
    if len(argv) < 2:
        raise UsageError("an agent is called as `<agent> [args...] THREAD ROLE`",
                         "run it through `uwf thread step`")
    return argv[-2], argv[-1], list(argv[:-2])


Body = Callable[[str, str, list[str]], str]


def agent_cli(name: str, body: Body, argv: Sequence[str] | None = None,
              usage: str | None = None) -> int:
    """The shell of an agent command: `[args...] THREAD ROLE` in, one hash out.

    `body(thread, role, args)` does the work and returns the StepNode hash; a
    UwfError becomes one line on stderr and its exit code. With `usage`, no
    arguments or -h prints it.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if usage is not None and (not arguments or arguments[0] in ("-h", "--help")):
        sys.stdout.write(usage)
        return 0 if arguments else 2
    try:
        thread, role, rest = thread_and_role(arguments)
        print(body(thread, role, rest))
        return 0
    except UwfError as exc:
        sys.stderr.write(f"{name}: error: {exc.line()}\n")
        return exc.exit_code


def run(handler: Handler, argv: Sequence[str] | None = None, name: str | None = None,
        history_limit: int | Literal["all"] | None = None) -> int:
    """Run `handler` as an agent: context in, (output, detail) out, hash printed.

    The agent's entry point: it first loads the config's `.env` into `os.environ`
    (`load_dotenv`), so the handler finds its API keys there however it was started.
    """
    prog = name or os.path.basename(sys.argv[0]) or "agent"

    def body(thread: str, role: str, _args: list[str]) -> str:
        load_dotenv()
        output, detail = handler(context(thread, role, history_limit))
        return submit(thread, role, output, detail, agent=prog)

    return agent_cli(prog, body, argv)
