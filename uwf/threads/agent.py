"""`uwf agent context|submit`: the agent kit's two halves, for any language.

An agent reads its context (role, schema, prompts, history), does its work,
then submits its output: uwf validates it, writes the output, detail and
StepNode nodes, and prints the StepNode hash. Submitting never moves the head;
`uwf thread step` does that after its checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uwf.cas.store import Cas
from uwf.config.configfile import Config
from uwf.config.limits import DEFAULT_HISTORY
from uwf.config.settings import Settings
from uwf.engine.journal import Views
from uwf.errors import NotFound, Rejected, UsageError
from uwf.language.moderator import NoTransition, status_of
from uwf.payload import UNSET
from uwf.store import Store
from uwf.threads.attempts import previous_attempts
from uwf.threads.projection import ThreadState
from uwf.threads.results import HistoryLimit, HistoryStep, StepContext
from uwf.threads.routing import next_decision
from uwf.threads.service import chain, get_thread, question_of
from uwf.threads.stepnodes import StepFacts, write_step


def _role(cas: Cas, state: ThreadState, role: str) -> dict[str, Any]:
    workflow = cas.get(state.workflow).payload
    if role not in workflow["roles"]:
        raise NotFound(f'workflow "{state.name}" has no role {role!r}',
                       f"roles: {', '.join(workflow['roles'])}")
    definition: dict[str, Any] = workflow["roles"][role]
    return definition


def _history_limit(settings: Settings, requested: HistoryLimit = None,
                   config: Config | None = None, env: Mapping[str, str] | None = None
                   ) -> int | None:
    """How many steps of history to give (None: all of them).

    `requested` wins when given; else `UWF_HISTORY` (a number, or `all`) from `env`
    (default: the environment of `settings` over the config's `.env`, as an agent
    sees it); else the config's `historyLimit` (`config`, or the config file when
    None); else DEFAULT_HISTORY. A bad value is a usage error.
    """
    value: int | str | None = requested
    if value is None:
        if env is None:
            from uwf.config.env import with_dotenv

            env = with_dotenv(settings.environ, settings.env_file)
        raw = env.get("UWF_HISTORY", "").strip()
        if raw.lower() == "all":
            return None
        if raw:
            from uwf.config.env import env_number

            return int(env_number("UWF_HISTORY", DEFAULT_HISTORY, integer=True, environ=env))
        if config is None:
            from uwf.config.configfile import load_config

            config = load_config(settings.config_path)
        value = config.settings.history_limit
        if value is None:
            return DEFAULT_HISTORY
    if value == "all":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"history limit must be a number of steps (0 or more) or 'all', "
                         f"not {value!r}", "give a number or 'all'")
    return value


def agent_context(
    store: Store, thread: str, role: str, history_limit: HistoryLimit = None, *,
    settings: Settings, config: Config | None = None, env: Mapping[str, str] | None = None,
    given: tuple[Views, ThreadState] | None = None,
) -> StepContext:
    """Everything an agent needs for one step of `thread` as `role`.

    `history` lists the last steps, oldest first: `history_limit` of them (0: none;
    "all": every one), by default `UWF_HISTORY` (from `env`, else the environment of
    `settings`, the command's, over the config's `.env`, as an agent sees it), else
    the config's `historyLimit` (from `config`, or the file `settings` name), else
    DEFAULT_HISTORY (20).
    Only those StepNodes are read, so the cost of a context does not grow with the
    thread. `steps` counts every step; `historyTruncated` says that `history` has
    fewer. Each step gives its `detail` as a hash, never the node: a detail is a
    transcript or a child thread, often large. `given`: the views to read and the
    thread's state in them (a step's, as its start's write left them), instead of the
    store's views caught up with the log.
    """
    limit = _history_limit(settings, history_limit, config, env)
    if given is None:
        views = store.read()
        state = get_thread(views, thread)
    else:
        views, state = given
    definition = _role(store.cas, state, role)
    prompt = store.cas.get(state.start).payload["prompt"]
    edge_prompt = ""
    step_id = None
    if state.in_flight is not None and state.in_flight.role == role:
        edge_prompt, step_id = state.in_flight.edge_prompt, state.in_flight.step_id
    elif not state.done:
        try:
            _, decision = next_decision(store.cas, state)
            if decision.role == role:
                edge_prompt = decision.prompt
        except NoTransition:
            pass
    history = []
    for node in chain(store.cas, state.head, limit):
        output = store.cas.get(node.payload["output"]).payload
        history.append(HistoryStep(role=node.payload["role"],
                                   status=status_of(node.payload["role"], output),
                                   output=output, step=node.hash, agent=node.payload["agent"],
                                   detail=node.payload["detail"]))
    return StepContext(
        thread=thread, workflow=state.workflow, workflow_name=state.name,
        role={"name": role, **definition, "schema": store.cas.get(definition["meta"]).payload},
        prompt=prompt, edge_prompt=edge_prompt, history=history, head=state.head,
        start=state.start, step_id=step_id, steps=state.steps,
        history_truncated=len(history) < state.steps, visits=state.visits,
        question=question_of(store.cas, state) or UNSET,
        previous_attempts=previous_attempts(views, state, role) or UNSET)


def submit_step(
    store: Store,
    thread: str,
    role: str,
    output: Any,
    detail: str | None = None,
    *,
    detail_ref: str | None = None,
    agent: str = "manual",
    started_at_ms: int | None = None,
    edge_prompt: str | None = None,
    usage: Any = None,
    cas: Cas | None = None,
) -> str:
    """Validate `output`, write output/detail/StepNode nodes; return the StepNode hash.

    The nodes go to `cas` (a command's gathered nodes, written with its result:
    `Cas.pending`), by default the store's own (loose files).

    `detail` is text stored as a Text node; `detail_ref` instead names an existing
    node (a sub-workflow's terminal StepNode, say). `usage` (`{inputTokens,
    outputTokens, cost}`), given here or as a top-level `usage` field of `output`
    that the role's schema does not declare, is taken out of the output and kept
    in the detail's front matter (uwf/threads/usage.py).
    """
    views = store.read()
    state = get_thread(views, thread)
    if state.done:
        raise Rejected(f"thread {thread} has ended", "nothing to submit to")
    definition = _role(store.cas, state, role)
    if edge_prompt is None and state.in_flight is not None and state.in_flight.role == role:
        edge_prompt = state.in_flight.edge_prompt
    facts = StepFacts(state.start, state.head, role, definition["meta"], edge_prompt,
                      tuple(previous_attempts(views, state, role)))
    return write_step(cas or store.cas, facts, output, detail, detail_ref=detail_ref,
                      agent=agent,
                      started_at_ms=started_at_ms, completed_at_ms=store.clock(),
                      usage=usage)
