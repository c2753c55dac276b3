"""`uwf thread step|run`: one atomic step, the seed's nine steps, as three phases.

1. Under the lock: check the thread, take over a step stranded past its deadline
   (`abandoned`), ask the moderator for the next role, resolve the agent, and
   record `thread.step_started` -- so a concurrent step of the thread is refused.
2. Without the lock: run the agent (no shell, its own process group, a timeout
   that kills the group) and read one StepNode hash from its stdout.
3. Under the lock: accept the StepNode only if it exists, is a StepNode, starts
   at the thread's StartNode, follows the current head, is the chosen role, and
   its output validates against the role's schema. Otherwise `thread.step_failed`
   with the reason; the head stays where it was.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from uwf.cas.store import Cas
from uwf.config.configfile import AgentChoice, Config, load_config, resolve_agent
from uwf.config.env import with_dotenv
from uwf.config.limits import MAX_TIMEOUT_S
from uwf.config.secrets import secret_values
from uwf.config.settings import Settings
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome, Views
from uwf.engine.retry import while_unavailable
from uwf.engine.ulids import new_ulid
from uwf.errors import (
    Conflict,
    Corrupt,
    NotFound,
    Rejected,
    StoreBusy,
    StoreUnavailable,
    UsageError,
    UwfError,
)
from uwf.language.moderator import Decision, NoTransition, status_of
from uwf.store import Store
from uwf.threads import decide
from uwf.threads.agentproc import agent_environment, masked, spawn
from uwf.threads.checks import Failure, check_step, refused_node
from uwf.threads.decide import DEADLINE_GRACE_MS, deadline, finish, take_over
from uwf.threads.events import (
    ThreadBlocked,
    ThreadEnded,
    ThreadStepFailed,
    ThreadStepped,
    ThreadStepStarted,
)
from uwf.threads.following import Following, after
from uwf.threads.plan import Plan
from uwf.threads.projection import ThreadState
from uwf.threads.questions import time_out_thread
from uwf.threads.results import ThreadRan, ThreadSummary
from uwf.threads.routing import last_step, next_decision
from uwf.threads.rules import AFTER_END, refusal
from uwf.threads.service import get_thread, summary, with_status
from uwf.threads.usage import step_usage

if TYPE_CHECKING:
    from uwf.engine.clock import Clock
    from uwf.threads.inprocess import InProcessAgent

DEFAULT_TIMEOUT = 3600.0
# Once its agent has ended, a step's nodes are brought in and its end recorded, each
# tried again for this long while the store is unavailable (a server restarting):
# left unrecorded, the step would stay in flight and hold its thread until its
# deadline. Both together stay well inside the deadline's grace after the timeout.
RECORD_RETRY_S = DEADLINE_GRACE_MS / 3000
T = TypeVar("T")


class StepFailed(Rejected):
    """The step ran but its result was refused; recorded as `thread.step_failed`."""



def step_thread(
    store: Store,
    thread: str,
    agent: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    config: Config | None = None,
    *,
    in_process: InProcessAgent | None = None,
    on_agent: Callable[[subprocess.Popen[bytes]], None] | None = None,
    left: list[Following] | None = None, known: Following | None = None,
    settings: Settings,
) -> ThreadSummary:
    """Run one step of `thread`; the seed's {workflow, thread, head, done}.

    `on_agent` is given the agent's process as soon as it runs, so a host running
    steps in threads (`uwf worker`) can kill its process group from another thread.
    `left`, when given, gets the thread as the step left it (read in the step's last
    write, so a caller need not read the views again); `known`, what an earlier step's
    `left` got: the thread this step begins from, unless it moved since. `settings`: the
    command's outside world (its environment, config file, where nodes go)."""
    if not 0 < timeout <= MAX_TIMEOUT_S:  # also refuses nan
        raise UsageError(f"timeout must be more than 0 and at most {MAX_TIMEOUT_S:,} s, "
                         f"not {timeout}", "give a shorter timeout")
    config = config or load_config(settings.config_path)
    # The `.env` is read again to run the agent and to mask its output: one that cannot
    # be read is refused here, before a step is recorded that nothing would finish.
    with_dotenv({}, config.env_file)
    plan = _begin(store, thread, agent, timeout, config, in_process=in_process is not None,
                  known=known, where=config.path or settings.config_path)
    if plan is None:  # the moderator said $END: nothing to run
        return _left(Following(get_thread(store.read(), thread)), left)
    # The step's new nodes are gathered here, then written with its result (one write,
    # one fsync: uwf.cas.records), unless loose files are asked for (UWF_NODES=loose).
    cas: Cas = store.cas
    nodes: Callable[[], Sequence[tuple[str, bytes]]] = tuple
    if settings.node_records:
        cas, pending = store.cas.pending()
        nodes = pending.records
    try:
        if in_process is not None:
            from uwf.threads.inprocess import run_in_process

            hash_or_failure = run_in_process(store, cas, plan, in_process, settings=settings)
        else:
            hash_or_failure = _run_agent(store, cas, plan, timeout=timeout, config=config,
                                         settings=settings, on_agent=on_agent)
    except (KeyboardInterrupt, SystemExit):
        # Interrupted (Ctrl-C, SIGTERM): the agent is gone; say so now rather than
        # leave the step in flight until its deadline.
        with contextlib.suppress(Exception):
            _finish(store, cas, plan, Failure("interrupted", "the step was interrupted; its "
                                              "agent was killed"), config,
                    environ=settings.environ, retry_for=0)
        raise
    done = _finish(store, cas, plan, hash_or_failure, config, environ=settings.environ,
                   nodes=nodes)
    if cas is not store.cas:  # its nodes are in the log now
        store.cas.adopt(cas)
    return _left(done, left)


def _left(done: Following, left: list[Following] | None) -> ThreadSummary:
    if left is not None:
        left.append(done)
    return summary(done.state)


def run_thread(
    store: Store,
    thread: str,
    *,
    agent: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_steps: int | None = None,
    config: Config | None = None,
    in_process: InProcessAgent | None = None,
    settings: Settings,
) -> ThreadRan:
    """Step until the thread is done, waits for an answer, or `max_steps` steps were
    taken: where it stopped, with its status, and the steps taken."""
    config = config or load_config(settings.config_path)
    result = summary(get_thread(store.read(), thread))
    taken = 0
    known: Following | None = None
    while not result.done and (max_steps is None or taken < max_steps):
        left: list[Following] = []
        result = step_thread(store, thread, agent, timeout, config, in_process=in_process,
                             left=left, known=known, settings=settings)
        taken += 1
        if store.steps is not None:
            store.steps(taken, max_steps or 0)
        known = left[-1]
        if known.state.state == "waiting":
            break  # a question: nothing runs until it is answered (or its deadline)
    return ThreadRan(**msgspec.structs.asdict(with_status(store, result)), steps=taken)


# -- phase 1 ---------------------------------------------------------------------

@dataclass(frozen=True)
class _Next:
    """What a step's beginning needs that does not depend on the log's head, gathered
    before the writers' section from the thread at one version: the moderator's
    decision (or why there is none) and the agent to run."""

    workflow: dict[str, Any]
    decision: Decision | None
    blocked: ThreadBlocked | None
    error: UwfError | None
    agent: AgentChoice | None


def _begin(store: Store, thread: str, agent_flag: str | None, timeout: float, config: Config,
           *, in_process: bool = False, known: Following | None = None, where: Path
           ) -> Plan | None:
    """Record `thread.step_started` (or the thread's end, or why it is blocked). The
    moderator and the agent are chosen before the writers' section, from the thread as
    the views show it; the write states that version (`expected`), so a thread moved
    meanwhile is read and decided again. The start is not fsynced on its own (it
    acknowledges nothing: the result's fsync covers it), its fold held for the
    result's views commit (`hold`: uwf/engine/held.py).

    A start the store lost contact with may have been committed all the same (a server
    restarting ends the connection after its COMMIT): it is tried again while the store
    is unavailable, and a try that finds the earlier one's step in flight takes it as
    its own, rather than leave a step nothing would finish holding the thread until its
    deadline. `where`: the config file a thread with no agent is told to set one in."""
    planned: list[Plan] = []  # the last start decided: it may be in the log
    begin = partial(_begin_once, store, thread, agent_flag, timeout, config,
                    in_process=in_process, planned=planned, known=known, where=where)
    try:
        return begin()
    except StoreUnavailable:
        if not planned:
            raise
    return while_unavailable(begin, RECORD_RETRY_S)


def _begin_once(store: Store, thread: str, agent_flag: str | None, timeout: float,
                config: Config, *, in_process: bool, planned: list[Plan],
                known: Following | None, where: Path) -> Plan | None:
    subject = f"thread/{thread}"
    given = None if planned else known  # a retry reads the thread again
    for _attempt in range(20):
        # The version first: the state read after it is at least as new, so a write that
        # states it is refused if the decision was made on anything later. Both from the
        # views just caught up with the log (the stream index commits with them); a
        # version behind the log's (a write not yet folded) is refused in the write. Or
        # both as the previous step's last write left them (`known`), tried once.
        if given is not None and given.version is not None:
            state, version = given.state, given.version
        else:
            views = store.read()
            version = store.journal.views.version(subject)
            state = get_thread(views, thread)
        given = None
        flight = state.in_flight
        mine = [plan for plan in planned if flight is not None and plan.step_id == flight.step_id]
        if mine:
            return mine[0]  # an earlier try's start was committed
        if refusal(state.phase, "step_started") == AFTER_END:
            take_over(state, store.clock(), max_timeout_s=MAX_TIMEOUT_S)  # says it ended
        if state.state == "waiting":
            if decide.time_out(state, store.clock()) is None:
                raise decide.waiting(state)
            time_out_thread(store.journal, thread)  # its deadline passed: on by its $TIMEOUT edge
            continue
        gathered = _next(store.cas, state, agent_flag, config, in_process=in_process,
                         decided=None if known is None else known.decision_for(state))
        try:
            result = store.journal.write_at(
                partial(_decide_begin, thread=thread, gathered=gathered, timeout=timeout,
                        where=where, planned=planned, state=state),
                expected={subject: version}, sync=False, hold=True)
        except Conflict:
            continue  # the thread moved since it was read: decide again
        if isinstance(result, UwfError):
            raise result
        return result
    raise StoreBusy(f"thread {thread} kept moving while its step was being decided",
                    "retry")


def _decide_begin(views: Views, now: int, *, thread: str, gathered: _Next, timeout: float,
                  where: Path, planned: list[Plan], state: ThreadState
                  ) -> Outcome[Plan | UwfError | None]:
    """Inside the writers' section, at the version the step was gathered at (`state`,
    not read again: the write states its version): take over a stranded step, then
    record what was gathered. A blocked thread's event is written, then its reason
    raised. The deadline of a step in flight is judged at the instant the writers'
    section was entered."""
    if views.known is not None:  # the fold starts from it too
        views.known[("threads", thread)] = state
    subject = f"thread/{thread}"
    abandoned = take_over(state, now, max_timeout_s=MAX_TIMEOUT_S)
    events = [] if abandoned is None else [NewEvent(subject, abandoned)]
    decision = gathered.decision
    if decision is None:
        if gathered.blocked is not None:
            events.append(NewEvent(subject, gathered.blocked))
        return Outcome(events, gathered.error)
    if decision.ends:
        events.append(NewEvent(subject, ThreadEnded("end")))
        return Outcome(events, None)
    choice = gathered.agent
    if choice is None:
        message = (f'no agent configured for workflow "{gathered.workflow["name"]}" '
                   f'role "{decision.role}"')
        events.append(NewEvent(subject, ThreadBlocked("no-agent", message, decision.role)))
        return Outcome(events, Rejected(
            message, f"set defaultAgent or agentOverrides in {where}, or pass --agent"))
    step_id = new_ulid(now)
    views.absent("steps", (f"{thread}/{step_id}",))  # minted just now
    events.append(NewEvent(subject, ThreadStepStarted(
        step_id, decision.role, decision.prompt, choice.name, deadline(now, timeout),
        None if abandoned is None else abandoned.step_id)))
    plan = Plan(thread, step_id, state.head, decision, choice, now, state.repo, state.start,
                state.workflow)
    planned.append(plan)
    return Outcome(events, then=lambda views: replace(plan, state=get_thread(views, thread)))


def _next(cas: Cas, state: ThreadState, agent_flag: str | None, config: Config, *,
          in_process: bool, decided: Decision | None = None) -> _Next:
    """`decided`: the moderator's decision from the head, when taken already (following.py)."""
    try:
        workflow, decision = ((cas.get(state.workflow).payload, decided)
                              if decided is not None else next_decision(cas, state))
    except NoTransition as exc:  # no edge for the status, or no condition holds or one failed
        last_role, _ = last_step(cas, state)
        return _Next({}, None, ThreadBlocked("no-transition", exc.what, last_role, exc.status),
                     exc, None)
    except NotFound as exc:
        raise Rejected(f"thread {state.thread} refers to a missing node: {exc.what}",
                       "run `uwf log verify`") from None
    if decision.ends:
        return _Next(workflow, decision, None, None, None)
    choice = (AgentChoice(agent_flag or "in-process", [], "in-process") if in_process
              else resolve_agent(config, workflow["name"], decision.role, agent_flag))
    return _Next(workflow, decision, None, None, choice)


# -- phase 2 ---------------------------------------------------------------------

def _run_agent(store: Store, cas: Cas, plan: Plan, *, timeout: float, config: Config,
               settings: Settings, on_agent: Callable[[subprocess.Popen[bytes]], None] | None = None
               ) -> str | Failure:
    from uwf.threads import staging
    from uwf.threads.agent import agent_context

    env = agent_environment(settings, store.root, config)
    env.update({
        "UWF_THREAD": plan.thread,
        "UWF_ROLE": plan.decision.role,
        "UWF_EDGE_PROMPT": plan.decision.prompt,
        "UWF_STEP_ID": plan.step_id,
        "UWF_STEP_STARTED_MS": str(plan.started_ms),
    })
    if store.now:  # the agent's uwf calls keep the same fixed clock
        env["UWF_NOW"] = store.now
    # The agent reads its context from, and writes its nodes to, a staging folder of
    # its own (uwf/threads/staging.py), never the store; the history is what its
    # settings (UWF_HISTORY, the config's historyLimit) ask for.
    try:
        context = agent_context(store, plan.thread, plan.decision.role, settings=settings,
                                config=config, env=env)
        staged = staging.stage(context, store.cas, store.clock, settings.environ)
    except UwfError as exc:
        return Failure("spawn", f"the step's context cannot be staged: {exc.what}")
    folder = staged.folder
    env[staging.STEP_DIR] = str(folder)
    try:
        # An agent runs in a process group of its own, killed as one on timeout. A step
        # run by an agent (uwf-subflow) stays in its parent's group instead, so the
        # parent's timeout reaches the whole tree.
        result = spawn([*plan.agent.argv, plan.thread, plan.decision.role], env=env,
                       cwd=plan.repo if os.path.isdir(plan.repo) else None, timeout=timeout,
                       nested="UWF_STEP_ID" in settings.environ,
                       secrets=secret_values(settings.environ, config),
                       on_agent=on_agent)
        if isinstance(result, str):
            try:
                while_unavailable(lambda: staging.bring_in(folder, cas, result),
                                   RECORD_RETRY_S)
            except (Corrupt, Rejected) as exc:
                hidden = secret_values(settings.environ, config)
                return Failure("invalid", masked(f"its nodes cannot be taken in: "
                                                  f"{exc.what}", hidden))
            except StoreUnavailable as exc:  # recorded when the store answers again
                return Failure("unavailable", f"its nodes could not be taken in: "
                                              f"{exc.what}")
        return result
    finally:
        staging.remove(staged)


# -- phase 3 ---------------------------------------------------------------------

# A step's result as recorded: the error to raise (a failed step), the thread as it left it.
_Finished = tuple[StepFailed | None, Following]
_Judged = tuple[list[NewEvent], StepFailed | None, Decision | None]


def _result(clock: Clock, cas: Cas, plan: Plan, result: str | Failure,
            secrets: Callable[[], list[str]]) -> _Judged:
    """The events that record the step's result, the error it raises (a failed step)
    and the moderator's decision from its new head (uwf/threads/following.py): decided
    before the writers' section, from the step's plan and its nodes (a step in flight
    holds its thread: its head, StartNode and workflow cannot move)."""
    subject = f"thread/{plan.thread}"
    at = plan.head or plan.start

    def failed(failure: Failure) -> _Judged:
        message = masked(failure.message, secrets())  # read only for a failure
        node = None if isinstance(result, Failure) else refused_node(cas, plan, result)
        return ([NewEvent(subject, ThreadStepFailed(
                    plan.step_id, plan.decision.role, failure.reason, message,
                    failure.exit_status, failure.stderr, node))],
                StepFailed(f"step failed ({failure.reason}): {message}",
                           f"the head stays at {at}"), None)

    failure = result if isinstance(result, Failure) else check_step(cas, plan, result)
    if failure is not None:
        return failed(failure)
    assert isinstance(result, str)
    step = cas.get(result).payload
    try:  # what the agent spent, from its detail (uwf/threads/usage.py)
        usage = step_usage(cas, step)
    except Rejected as exc:
        return failed(Failure("usage", exc.what))
    output_hash = step["output"]
    output = cas.get(output_hash).payload
    status = status_of(plan.decision.role, output)
    events: list[NewEvent] = [NewEvent(subject, ThreadStepped(
        plan.step_id, result, plan.decision.role, status, output_hash, usage=usage))]
    following, decision = after(cas, plan, output, result, clock())
    return events + following, None, decision


def _finish(store: Store, cas: Cas, plan: Plan, result: str | Failure, config: Config, *,
            environ: Mapping[str, str],
            nodes: Callable[[], Sequence[tuple[str, bytes]]] = tuple,
            retry_for: float = RECORD_RETRY_S) -> Following:
    """Record the step's result: inside the writers' section only the check that the
    step is still the one in flight, the append (with the step's new nodes, when it is
    accepted) and the fold."""
    secrets = partial(secret_values, environ, config)
    judged: list[tuple[_Judged, Sequence[tuple[str, bytes]]]] = []

    def judge() -> tuple[_Judged, Sequence[tuple[str, bytes]]]:
        # Once, inside the retries: checking the StepNode reads the CAS, which a server
        # restarting may not answer yet (the step would stay in flight, unrecorded).
        if not judged:
            events, error, decision = _result(store.clock, cas, plan, result, secrets)
            # A refused StepNode the failure names is kept: written with it.
            kept = error is None or getattr(events[0].data, "node", None) is not None
            judged.append(((events, error, decision), nodes() if kept else ()))
        return judged[0]

    tries = 0

    def write() -> _Finished:
        nonlocal tries
        tries += 1
        (events, error, decision), records = judge()
        head = result if isinstance(result, str) and error is None else None

        def record(views: Views) -> Outcome[_Finished]:
            finish(get_thread(views, plan.thread), plan.step_id)  # refused once taken over
            # The state is read inside the writers' section, from the views just folded;
            # the thread's version is the seq of the write's last line, one of its events.
            return Outcome(events, then=lambda views: (error, Following(
                get_thread(views, plan.thread), views.head.seq, decision, head)))

        try:
            return store.journal.write(record, nodes=records, carry=True)
        except Rejected:
            # A write the store lost contact with may have been committed all the same
            # (the connection dropped after its COMMIT): retried, its step is no longer
            # in flight. Then what the earlier try recorded is this step's result.
            earlier = _recorded_result(store, plan) if tries > 1 else None
            if earlier is None:
                raise
            return earlier

    error, done = while_unavailable(write, retry_for)
    if error is not None:
        raise error
    return done


def _recorded_result(store: Store, plan: Plan) -> _Finished | None:
    """The result the log holds for step `plan.step_id` (its `thread.stepped` or
    `thread.step_failed`), or None when it has none."""
    for envelope in store.journal.read_subject(f"thread/{plan.thread}", reverse=True):
        data = envelope.data
        if isinstance(data, ThreadStepped | ThreadStepFailed) and data.step_id == plan.step_id:
            state = get_thread(store.read(), plan.thread)
            return None if isinstance(data, ThreadStepped) else StepFailed(
                f"step failed ({data.reason}): {data.message}",
                f"the head stays at {state.head or state.start}"), Following(state)
        if isinstance(data, ThreadStepStarted) and data.step_id == plan.step_id:
            return None  # back to where the step began: nothing recorded for it
    return None

