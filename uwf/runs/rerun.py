"""Continue a run (`run resume`) or run it again as a new one (`run rerun`).

`resume` is read-only by default: the next role, its rendered edge prompt and
the agent the config resolves, identical on repeat; `--once` and `--drive` hand
the run to the thread engine. `rerun` starts a new thread beside the original
(same workflow, prompt and repo) and links it (`run.rerun_linked`: generation
one past the original, origin pinned to the chain's first run). With
`incremental`, each step of the original whose inputs are unchanged -- the
role's definition, the rendered edge prompt, the previous output and the
resolved agent -- is taken over without running an agent; the first step that
differs runs live, and so does everything after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec

from uwf.cas.builtins import builtin_hash
from uwf.cas.store import Cas
from uwf.config.configfile import Config, load_config, resolve_agent
from uwf.config.settings import Settings
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Outcome, Views
from uwf.engine.ulids import new_ulid
from uwf.engine.viewspec import Query
from uwf.errors import Rejected, UwfError
from uwf.language.asking import is_ask
from uwf.language.moderator import END, NoTransition, status_of
from uwf.runs.decide import link, rerunnable
from uwf.runs.results import (
    ChosenAgent,
    DriveMode,
    Driven,
    NextStep,
    RecentStep,
    Rerun,
    Resumed,
)
from uwf.runs.service import damaged_nodes, get_run, record, state_path
from uwf.runs.state import RunState
from uwf.store import Store
from uwf.threads.asked import asked_again
from uwf.threads.events import (
    INPUTS_DIGEST_CHARS,
    ThreadEnded,
    ThreadStarted,
    ThreadStepped,
)
from uwf.threads.projection import ThreadState
from uwf.threads.routing import next_decision, route
from uwf.threads.service import chain
from uwf.threads.steps import StepState
from uwf.workflows.discovery import is_workflow_file

# -- resume --------------------------------------------------------------------------

def resume(store: Store, run_id: str, recent: int, config_path: Path) -> Resumed:
    """Where the run stands and what runs next; writes nothing. The configuration
    (`config_path`) is read only when the next step's agent is to be named."""
    views = store.read()
    run = get_run(views, run_id)
    now = store.clock()
    _refuse_missing(store.cas, run)
    thread = run.thread
    steps = [RecentStep(hash=node.hash, role=node.payload["role"], agent=node.payload["agent"])
             for node in chain(store.cas, thread.head, recent)] if recent else []
    result = Resumed(run=record(run, now, source=state_path(store)), next=None,
                     recent_steps=steps, next_actions=[])
    if thread.done:
        result.next_actions = [f"uwf run rerun {run_id}"]
        return result
    if thread.in_flight is not None:
        flight = thread.in_flight
        result.next = NextStep(role=flight.role, prompt=flight.edge_prompt, agent=flight.agent,
                               in_flight=True)
        result.next_actions = [f"wait for the step in flight (role {flight.role})"]
        return result
    try:
        workflow, decision = next_decision(store.cas, thread)
    except NoTransition as exc:
        result.blocked = exc.what
        result.next_actions = ["fix the workflow's graph and register it, then "
                               f"`uwf run rerun {run_id} --incremental --workflow NAME`"]
        return result
    if decision.ends:
        result.next = NextStep(role=END, prompt="", agent=None)
        result.next_actions = [f"uwf run resume {run_id} --once"]
        return result
    choice = resolve_agent(load_config(config_path), workflow["name"], decision.role, None)
    result.next = NextStep(role=decision.role, prompt=decision.prompt,
                           agent=None if choice is None else ChosenAgent(
                               name=choice.name, argv=choice.argv, source=choice.source))
    result.next_actions = (
        [f"configure an agent for role {decision.role} (defaultAgent or agentOverrides)"]
        if choice is None else [f"uwf run resume {run_id} --once",
                                f"uwf run resume {run_id} --drive"])
    return result


def drive(store: Store, run_id: str, *, once: bool, settings: Settings,
          agent: str | None = None, timeout: float = 3600.0) -> Driven:
    """Advance the run through the thread engine: one step, or to the end, with the
    agents of the configuration file `settings` name (the command's)."""
    from uwf.threads.stepping import run_thread, step_thread

    run = get_run(store.read(), run_id)
    if run.thread.done:
        raise Rejected(f"run {run_id} has ended", f"rerun it with `uwf run rerun {run_id}`")
    config = load_config(settings.config_path)
    if once:
        step_thread(store, run_id, agent, timeout, config, settings=settings)
    else:
        run_thread(store, run_id, agent=agent, timeout=timeout, config=config,
                   settings=settings)
    return Driven(run=record(get_run(store.read(), run_id), store.clock(),
                             source=state_path(store)),
                  drive=DriveMode(mode="once" if once else "drive"))


# -- rerun ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Reuse:
    """A step of the original taken over: its new StepNode and event."""

    head: str
    event: ThreadStepped


def rerun(store: Store, run_id: str, *, config_path: Path, reason: str = "",
          incremental: bool = False, workflow: str | None = None,
          workflow_path: Path | None = None) -> Rerun:
    """A new run of the same workflow (or `workflow`: a name, a hash, or a file at
    `workflow_path`, the command's resolution of it), prompt and repo, linked. An
    incremental rerun reads the configuration at `config_path` (the agents a step's
    inputs name)."""
    from uwf.workflows.service import put_workflow, resolve_workflow

    views = store.read()
    original = get_run(views, run_id)
    _check_rerunnable(store.cas, original, store.clock())
    if (workflow is not None and workflow_path is not None
            and is_workflow_file(workflow, workflow_path)):
        # A file is registered first, as `thread start FILE` does (after the checks, so a
        # refused rerun registers nothing).
        workflow = put_workflow(store, workflow_path).workflow
        views = store.read()
    prompt = str(store.cas.get(original.thread.start).payload["prompt"])
    workflow_hash, payload = (resolve_workflow(store.cas, views, workflow) if workflow
                              else (original.thread.workflow,
                                    store.cas.get(original.thread.workflow).payload))
    store.cas.ensure_builtins()
    start = store.cas.put(builtin_hash("StartNode"), {"workflow": workflow_hash,
                                                      "prompt": prompt})
    new_id = new_ulid(store.clock())
    linked = link(original, reason, incremental=incremental)
    started = ThreadStarted(workflow_hash, str(payload["name"]), start, original.thread.repo,
                            inputs_digest=prompt[:INPUTS_DIGEST_CHARS])
    fresh = ThreadState(new_id, workflow_hash, str(payload["name"]), start,
                        original.thread.repo, "", "")
    reused, ended = (_reusable(store, views, original, fresh, load_config(config_path))
                     if incremental else ([], False))
    subject = f"thread/{new_id}"
    # A step taken over that asked a person: the new run asks again, and waits.
    question = None if not reused else asked_again(
        store.cas, reused[-1].head, reused[-1].event.step_id, store.clock())

    def decide(views: Views, now: int) -> Outcome[None]:
        # Judged at the instant the link is recorded at, as `log verify` judges it.
        _check_rerunnable(store.cas, get_run(views, run_id), now)
        data: list[EventData] = [started, linked, *(step.event for step in reused)]
        if ended:
            data.append(ThreadEnded("end"))
        if question is not None:
            data.append(question)
        return Outcome([NewEvent(subject, item) for item in data], None)

    store.journal.write_at(decide)
    new = get_run(store.read(), new_id)
    return Rerun(run_id=new_id, rerun_of=run_id, origin_run_id=linked.origin_run_id,
                 generation=linked.generation, workflow=workflow_hash,
                 reused=[step.event.reused for step in reused if step.event.reused],
                 run=record(new, store.clock(), source=state_path(store)))


def _check_rerunnable(cas: Cas, run: RunState, now: int) -> None:
    rerunnable(run, now)
    _refuse_missing(cas, run)


def _refuse_missing(cas: Cas, run: RunState) -> None:
    """A run whose nodes are gone or damaged is neither resumed nor rerun: it fails
    closed."""
    run_id = run.thread.thread
    damage = damaged_nodes(cas, run)
    if damage["missing"]:
        raise Rejected(f"run {run_id} refers to nodes the CAS no longer holds: "
                       f"{', '.join(damage['missing'])}", f"see `uwf run show {run_id}`")
    if damage["corrupt"]:
        raise Rejected(f"run {run_id} refers to nodes damaged in the CAS (they do not hash "
                       f"to their names): {', '.join(damage['corrupt'])}",
                       f"see `uwf run show {run_id}`")


def _reusable(store: Store, views: Views, original: RunState, fresh: ThreadState,
              config: Config) -> tuple[list[_Reuse], bool]:
    """The original's steps the new run takes over, oldest first, and whether the new
    run then ends (its next target is `$END`), as a live step would end it."""
    cas = store.cas
    old_workflow = cas.get(original.thread.workflow).payload
    taken: list[_Reuse] = []
    state = fresh
    for node in chain(store.cas, original.thread.head):
        step = node.payload
        try:
            new_workflow, decision = next_decision(cas, state)
        except (NoTransition, UwfError):
            break
        role = decision.role
        if decision.ends or role != step["role"]:
            break
        if new_workflow["roles"].get(role) != old_workflow["roles"].get(role):
            break
        chosen = _chosen(views, node.hash)
        if chosen is None or chosen.edge_prompt != decision.prompt:
            break
        agent = resolve_agent(config, new_workflow["name"], role, None)
        if agent is None or agent.name != chosen.agent:
            break
        payload = {"start": state.start, "prev": state.head, "role": role,
                   "output": step["output"], "detail": step["detail"], "agent": step["agent"],
                   "edgePrompt": decision.prompt}
        head = cas.put(builtin_hash("StepNode"), payload)
        output = cas.get(step["output"]).payload
        event = ThreadStepped(new_ulid(store.clock()), head, role,
                              status_of(role, output), step["output"], reused=node.hash)
        taken.append(_Reuse(head, event))
        state = msgspec.structs.replace(state, head=head, steps=state.steps + 1)
        if is_ask(output):
            break  # a question: the new run asks it again, and its answer is the next input
    if not taken:
        return taken, False
    try:
        role, output = taken[-1].event.role, cas.get(taken[-1].event.output).payload
        _, decision = route(cas, state, role, output, state.head)
    except UwfError:
        return taken, False
    return taken, decision.role == END


def _chosen(views: Views, head: str) -> StepState | None:
    """What uwf chose for the step that produced `head` (following reused steps back
    to the step an agent really ran)."""
    seen: set[str] = set()
    current: str | None = head
    while current is not None and current not in seen:
        seen.add(current)
        rows: list[StepState] = views.query(Query("steps", (("head", "=", current),),
                                                  limit=1))
        if not rows:
            return None
        if rows[0].reused is None:
            return rows[0]
        current = rows[0].reused
    return None
