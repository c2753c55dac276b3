"""`uwf thread start|show|list|kill|log|fork`: threads as events over CAS nodes.

A thread is a StartNode plus a chain of StepNodes (each names its `prev`); the
`threads` view holds each thread's head. Step and run live in `stepping.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from uwf.cas.builtins import builtin_hash
from uwf.cas.hashing import is_hash
from uwf.cas.nodes import Node
from uwf.cas.store import Cas
from uwf.config.repo import find_repo, search_folders
from uwf.config.settings import Settings
from uwf.engine.clock import format_ts
from uwf.engine.events import EventData, NewEvent
from uwf.engine.journal import Journal, Outcome, Views
from uwf.engine.ulids import new_ulid
from uwf.engine.viewspec import Query
from uwf.errors import Corrupt, NotFound, UsageError, UwfError
from uwf.ids import ULID_PATTERN, check_ulid
from uwf.language.moderator import status_of
from uwf.payload import UNSET
from uwf.store import Store
from uwf.threads.attempts import attempts, last_failure, telling
from uwf.threads.decide import kill
from uwf.threads.events import INPUTS_DIGEST_CHARS, ThreadStarted
from uwf.threads.projection import ThreadState
from uwf.threads.results import (
    Forked,
    LogRecord,
    Question,
    Started,
    StepInFlight,
    ThreadRow,
    ThreadShown,
    ThreadSummary,
)
from uwf.threads.routing import next_decision
from uwf.threads.steps import StepState
from uwf.threads.terms import OPEN_STATES, STATES
from uwf.workflows.discovery import use_workflow

# A thread id is a ULID; the CLI declares the same pattern on its THREAD arguments.
THREAD_ID_PATTERN = ULID_PATTERN
STATUSES = STATES
# `thread list --status` also takes `active`, the word for idle and running together
# (what a thread's state was called before a step in flight got one of its own).
STATUS_ALIASES = {"active": OPEN_STATES}
# The `status` `thread list` shows for a thread whose head node is not in the CAS, or
# is there but damaged (it does not hash to its name): `thread show` fails closed on it.
HEAD_DAMAGE = ("missing", "corrupt")


def check_thread_id(thread: str) -> None:
    """Refuse what cannot be a thread id, before looking it up (a usage error, exit 2)."""
    check_ulid(thread, "a thread id", "copy the id from `uwf thread list --all`")


def get_thread(views: Views, thread: str) -> ThreadState:
    check_thread_id(thread)
    state: ThreadState | None = views.get("threads", thread)
    if state is None:
        raise NotFound(f"no thread {thread}", "list them with `uwf thread list --all`")
    return state


def head_of(state: ThreadState) -> str:
    """The seed's head: the last StepNode, or the StartNode before the first step."""
    return state.head or state.start


def summary(state: ThreadState) -> ThreadSummary:
    """The seed's StepOutput: {workflow, thread, head, done}."""
    return ThreadSummary(workflow=state.workflow, thread=state.thread, head=head_of(state),
                         done=state.done)


def current_role(cas: Cas, state: ThreadState) -> str | None:
    """The role the thread is at: the step in flight, else (active) where the moderator
    routes from the head, else (blocked) the role `thread.blocked` named; None when the
    thread is done, routes to `$END`, or the moderator cannot decide (no edge, a
    missing or damaged node): a description, never an error."""
    if state.done:
        return None
    if state.in_flight is not None:
        return state.in_flight.role
    if state.state == "blocked":
        return state.blocked_role
    if state.state == "waiting" and state.asked is not None:
        return state.asked.role
    try:
        _, decision = next_decision(cas, state)
    except UwfError:  # NoTransition (no edge, no condition holds), a missing node, ...
        return None
    return None if decision.ends else decision.role


def in_flight(state: ThreadState) -> StepInFlight | None:
    """The step in flight, as `thread show` and the run record give it: its role, the
    agent uwf resolved for it and when it started (None when there is none)."""
    flight = state.in_flight
    if flight is None:
        return None
    return StepInFlight(role=flight.role, agent=flight.agent, started_at=flight.started_at)


def describe(cas: Cas, state: ThreadState) -> ThreadShown:
    """The seed's StepOutput plus `status` (the view's state) and `currentRole`,
    `inFlight` while a step is in flight (status `running`), and `lastFailure` while
    the last attempt is one that failed."""
    return ThreadShown(workflow=state.workflow, thread=state.thread, head=head_of(state),
                       done=state.done, status=state.state,
                       current_role=current_role(cas, state),
                       in_flight=in_flight(state) or UNSET,
                       question=question_of(cas, state) or UNSET,
                       last_failure=last_failure(state) or UNSET)


def question_of(cas: Cas, state: ThreadState) -> Question | None:
    """The head's question as the surfaces show it (None: the head asked none)."""
    asked = state.asked
    if asked is None:
        return None
    try:
        schema: Any = cas.get(asked.answer_schema).payload
        value: Any = UNSET if asked.answer is None else cas.get(asked.answer).payload
    except NotFound:  # a damaged store: the question still shows, its nodes as hashes
        schema, value = asked.answer_schema, asked.answer or UNSET
    return Question(
        step_id=asked.step_id, role=asked.role, question=asked.question,
        answer_schema=schema, asked_at=asked.asked_at,
        due_at=UNSET if asked.deadline_ms is None else format_ts(asked.deadline_ms),
        answer=value, answered_at=asked.answered_at or UNSET,
        answered_by=asked.answered_by or UNSET, timed_out=asked.timed_out or UNSET)


def with_status(store: Store, result: ThreadSummary) -> ThreadShown:
    """A step's output (`result`) with the thread's `status`, `currentRole` and
    `inFlight` as the command leaves it."""
    shown = describe(store.cas, get_thread(store.read(), result.thread))
    shown.head, shown.done = result.head, result.done
    return shown


def start_thread(
    store: Store, workflow: str, prompt: str, repo: str | None = None, *, settings: Settings
) -> Started:
    """Create a thread (a StartNode and `thread.started`); no step runs.

    `workflow` is a registered name, a Workflow hash, or a workflow file, which is
    registered first (as `uwf workflow put` does): one command from YAML to a thread.
    A name is also looked for in `.workflows/` and `.workflow/` folders, from the working
    folder (or `repo`) up to the repo's top (uwf.workflows.discovery): `source` then
    names the file used. `settings`: the command's, which `repo`, a workflow's path
    and the working folder are resolved with.
    """
    if not prompt.strip():
        raise UsageError("the prompt is empty", "give the task with -p")
    # A path it cannot use is refused before any node is put.
    repo_path = find_repo(repo, settings)
    chosen = use_workflow(store, workflow, search_folders(repo, settings),
                          path=settings.path(workflow))
    workflow_hash, payload = chosen.hash, chosen.payload
    store.cas.ensure_builtins()
    start = store.cas.put(builtin_hash("StartNode"), {"workflow": workflow_hash, "prompt": prompt})
    thread = new_ulid(store.clock())
    started = ThreadStarted(workflow_hash, str(payload["name"]), start, repo_path,
                            inputs_digest=prompt[:INPUTS_DIGEST_CHARS])
    result = Started(workflow=workflow_hash, thread=thread,
                     source=UNSET if chosen.file is None else chosen.file,
                     store_version=UNSET if chosen.store_version is None
                     else chosen.store_version)
    return store.journal.write(lambda _views: Outcome(
        [NewEvent(f"thread/{thread}", started)], result))


def show_thread(store: Store, thread: str) -> ThreadShown:
    """Where a thread is: the seed's StepOutput, `status` and `currentRole`, and its last
    attempts when one of them failed or was reused.

    Fails closed when the head node is missing from the CAS (or damaged): a thread
    whose head is gone cannot be stepped, so it is not shown as live.
    """
    views = store.read()
    state = get_thread(views, thread)
    head = head_of(state)
    try:
        store.cas.get(head)
    except NotFound:
        raise Corrupt(f"thread {thread}'s head {head} is missing from the CAS",
                      "restore that node from a backup (`json-cas verify --all` lists what "
                      "else is damaged), or kill the thread") from None
    shown = describe(store.cas, state)
    tried = attempts(views, thread)
    if telling(tried):
        shown.attempts = tried
    return shown


def head_damage(cas: Cas, head: str) -> str | None:
    """`missing` or `corrupt` when the head node cannot be read (as `show_thread` finds
    it), else None."""
    try:
        cas.get(head)
    except NotFound:
        return "missing"
    except Corrupt:
        return "corrupt"
    return None


def damage_line(rows: list[ThreadRow]) -> str | None:
    """What `thread list` says on stderr of the damaged rows it shows (None: none)."""
    damaged = [row for row in rows if row.status in HEAD_DAMAGE]
    if not damaged:
        return None
    first = damaged[0]
    what = ("is missing from the CAS" if first.status == "missing"
            else "is damaged in the CAS (it does not hash to its name)")
    more = (f" (and {len(damaged) - 1} more thread{'s' if len(damaged) > 2 else ''} shown "
            "as missing or corrupt)" if len(damaged) > 1 else "")
    return (f"thread {first.thread}'s head {first.head} {what}{more}; restore that "
            "node from a backup (`json-cas verify --all` lists what else is damaged), or "
            "kill the thread")


def list_threads(store: Store, include_ended: bool = False, limit: int | None = None,
                 offset: int = 0, *, workflow: str | None = None,
                 statuses: Iterable[str] = ()) -> list[ThreadRow]:
    """Threads oldest first: the seed's ThreadListItem plus `status` and `currentRole`.

    Open threads (idle, running, blocked) by default; every thread with `include_ended`;
    exactly the given `statuses` when any are given (`active`: idle and running).
    `workflow` is a registered name (threads of any version of it) or a Workflow hash
    (threads of that version).
    An indexed read, and `currentRole` reads CAS nodes of the returned page only: the
    cost follows the rows printed, not the threads ever created. A thread whose head
    node is missing or damaged is listed with `status` `missing` or `corrupt` (and no
    `currentRole`), never as healthy: `show_thread` fails closed on it.
    """
    given = tuple(statuses)
    if unknown := [status for status in given
                   if status not in STATUSES and status not in STATUS_ALIASES]:
        raise UsageError(f"unknown status {unknown[0]!r}",
                         "give idle, running, active, waiting, blocked, ended or killed")
    wanted = tuple(dict.fromkeys(
        state for status in given for state in STATUS_ALIASES.get(status, (status,))))
    views = store.read()
    where: list[tuple[str, str, Any]] = []
    if wanted:
        where.append(("state", "in", wanted))
    elif not include_ended:
        where.append(("open", "=", 1))
    if workflow is not None:
        where.append(_workflow_term(views, workflow))
    # `done` is the seed's field for lists that may hold ended threads.
    with_done = include_ended or any(status in ("ended", "killed") for status in wanted)
    rows = []
    for state in views.query(Query("threads", tuple(where), limit=limit, offset=offset)):
        damage = head_damage(store.cas, head_of(state))
        rows.append(ThreadRow(
            thread=state.thread, workflow=state.workflow, head=head_of(state),
            done=state.done if with_done else UNSET, status=damage or state.state,
            current_role=None if damage else current_role(store.cas, state),
            in_flight=UNSET if damage else in_flight(state) or UNSET,
            question=(state.asked.question if state.asked is not None
                      and state.state == "waiting" else UNSET)))
    return rows


def _workflow_term(views: Views, ref: str) -> tuple[str, str, str]:
    """`--workflow`: a registered name matches the threads' `name`, a hash their
    `workflow` (a name wins over a hash of the same spelling)."""
    if views.get("workflows", ref) is not None:
        return ("name", "=", ref)
    if is_hash(ref):
        return ("workflow", "=", ref)
    raise NotFound(f"no workflow named {ref!r}",
                   "list them with `uwf workflow list`, or give a workflow hash")


def kill_thread(journal: Journal, thread: str, reason: str = "") -> ThreadShown:
    """End a thread now (`thread.ended`, reason killed); its history stays."""

    def decide(views: Views) -> Outcome[ThreadShown]:
        state = get_thread(views, thread)
        event = kill(state, reason)
        ended = ThreadShown(workflow=state.workflow, thread=thread, head=head_of(state),
                            done=True, status="killed", current_role=None)
        return Outcome([NewEvent(f"thread/{thread}", event)], ended)

    return journal.write(decide)


def chain(cas: Cas, head: str | None, limit: int | None = None) -> list[Node]:
    """The StepNodes from the first (or the `limit`-th last) to `head`, via `prev`."""
    nodes: list[Node] = []
    current = head
    while current is not None and (limit is None or len(nodes) < limit):
        node = cas.get(current)
        nodes.append(node)
        current = node.payload.get("prev")
    nodes.reverse()
    return nodes


def iter_log(store: Store, thread: str) -> Iterator[LogRecord]:
    """One record per step, oldest first: role, status, output, detail, agent."""
    state = get_thread(store.read(), thread)
    for number, node in enumerate(chain(store.cas, state.head), 1):
        step = node.payload
        output = store.cas.get(step["output"]).payload
        yield LogRecord(step=number, hash=node.hash, role=step["role"],
                        status=status_of(step["role"], output), output=output,
                        detail=step["detail"], agent=step["agent"],
                        edge_prompt=step.get("edgePrompt", UNSET),
                        started_at_ms=step.get("startedAtMs", UNSET),
                        completed_at_ms=step.get("completedAtMs", UNSET),
                        previous_attempts=step.get("previousAttempts", UNSET))


def fork_thread(store: Store, thread: str, at: str) -> Forked:
    """A new thread whose head is an earlier step of `thread` (same StartNode)."""
    state = get_thread(store.read(), thread)
    steps = chain(store.cas, state.head)
    hashes = [node.hash for node in steps]
    if at not in hashes:
        raise NotFound(f"{at} is not a step of thread {thread}",
                       f"see its steps with `uwf thread log {thread}`")
    new = new_ulid(store.clock())
    kept = steps[: hashes.index(at) + 1]
    visits: dict[str, int] = {}
    for node in kept:
        visits[node.payload["role"]] = visits.get(node.payload["role"], 0) + 1
    prompt = str(store.cas.get(state.start).payload["prompt"])
    event = ThreadStarted(state.workflow, state.name, state.start, state.repo, head=at,
                          fork_of=thread, steps=len(kept), visits=visits,
                          inputs_digest=prompt[:INPUTS_DIGEST_CHARS])
    result = Forked(workflow=state.workflow, thread=new, head=at, fork_of=thread)
    events: list[EventData] = [event]
    again = _asked_again(store, at)
    if again is not None:  # forked at a question: the fork asks it again, and waits
        events.append(again)
    return store.journal.write(lambda _views: Outcome(
        [NewEvent(f"thread/{new}", data) for data in events], result))


def _asked_again(store: Store, head: str) -> EventData | None:
    """The question the step `head` asks, asked again (uwf/threads/questions.py), as the
    step that wrote it (its id in the `steps` view)."""
    from uwf.threads.asked import asked_again

    now = store.clock()
    rows: list[StepState] = store.read().query(Query("steps", (("head", "=", head),),
                                                     limit=1))
    return asked_again(store.cas, head, rows[0].step_id if rows else new_ulid(now), now)
