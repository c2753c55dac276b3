"""`uwf thread start|show|list|kill|log|fork`: threads as events over CAS nodes.

A thread is a StartNode plus a chain of StepNodes (each names its `prev`); the
`threads` view holds each thread's head. Step and run live in `stepping.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from uwf.api.store import Store
from uwf.api.workflows import resolve_workflow
from uwf.cas.store import Node, builtin_hash
from uwf.engine.events import NewEvent
from uwf.engine.journal import Outcome, Views
from uwf.engine.viewstore import Query
from uwf.errors import NotFound, Rejected, UsageError
from uwf.projections.thread_events import ThreadEnded, ThreadStarted
from uwf.projections.threads import ThreadState
from uwf.workflow.moderator import status_of


def find_repo(explicit: str | None = None) -> str:
    """`--repo PATH`, else the git top level of the working directory, else it."""
    if explicit:
        return str(Path(explicit).expanduser().resolve())
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return str(folder)
    return str(here)


def get_thread(views: Views, thread: str) -> ThreadState:
    state: ThreadState | None = views.get("threads", thread)
    if state is None:
        raise NotFound(f"no thread {thread}", "list them with `uwf thread list --all`")
    return state


def head_of(state: ThreadState) -> str:
    """The seed's head: the last StepNode, or the StartNode before the first step."""
    return state.head or state.start


def summary(state: ThreadState) -> dict[str, Any]:
    """The seed's StepOutput: {workflow, thread, head, done}."""
    return {"workflow": state.workflow, "thread": state.thread, "head": head_of(state),
            "done": state.done}


def start_thread(
    store: Store, workflow: str, prompt: str, repo: str | None = None
) -> dict[str, str]:
    """Create a thread (a StartNode and `thread.started`); no step runs."""
    from ulid import ULID

    if not prompt.strip():
        raise UsageError("the prompt is empty", "give the task with -p")
    workflow_hash, payload = resolve_workflow(store, store.read(), workflow)
    store.cas.ensure_builtins()
    start = store.cas.put(builtin_hash("StartNode"), {"workflow": workflow_hash, "prompt": prompt})
    thread = str(ULID.from_timestamp(store.clock()))
    started = ThreadStarted(workflow_hash, str(payload["name"]), start, find_repo(repo))
    return store.journal.write(lambda _views: Outcome(
        [NewEvent(f"thread/{thread}", started)], {"workflow": workflow_hash, "thread": thread}))


def show_thread(store: Store, thread: str) -> dict[str, Any]:
    return summary(get_thread(store.read(), thread))


def list_threads(store: Store, include_ended: bool = False, limit: int | None = None,
                 offset: int = 0) -> list[dict[str, Any]]:
    """Active threads (all with --all), oldest first: the seed's ThreadListItem.

    An indexed read: the cost follows the rows printed, not the threads ever created.
    """
    where = () if include_ended else (("open", "=", 1),)
    rows = []
    for state in store.read().query(Query("threads", where, limit=limit, offset=offset)):
        item = {"thread": state.thread, "workflow": state.workflow, "head": head_of(state)}
        if include_ended:
            item["done"] = state.done
        rows.append(item)
    return rows


def kill_thread(store: Store, thread: str, reason: str = "") -> dict[str, Any]:
    """End a thread now (`thread.ended`, reason killed); its history stays."""

    def decide(views: Views) -> Outcome[dict[str, Any]]:
        state = get_thread(views, thread)
        if state.done:
            raise Rejected(f"thread {thread} has already ended", "nothing to kill")
        ended = {**summary(state), "done": True}
        return Outcome([NewEvent(f"thread/{thread}", ThreadEnded("killed", reason))], ended)

    return store.journal.write(decide)


def chain(store: Store, head: str | None, limit: int | None = None) -> list[Node]:
    """The StepNodes from the first (or the `limit`-th last) to `head`, via `prev`."""
    nodes: list[Node] = []
    current = head
    while current is not None and (limit is None or len(nodes) < limit):
        node = store.cas.get(current)
        nodes.append(node)
        current = node.payload.get("prev")
    nodes.reverse()
    return nodes


def iter_log(store: Store, thread: str) -> Iterator[dict[str, Any]]:
    """One record per step, oldest first: role, status, output, detail, agent."""
    state = get_thread(store.read(), thread)
    for number, node in enumerate(chain(store, state.head), 1):
        step = node.payload
        output = store.cas.get(step["output"]).payload
        record = {
            "step": number,
            "hash": node.hash,
            "role": step["role"],
            "status": status_of(step["role"], output),
            "output": output,
            "detail": step["detail"],
            "agent": step["agent"],
        }
        for extra in ("edgePrompt", "startedAtMs", "completedAtMs"):
            if extra in step:
                record[extra] = step[extra]
        yield record


def fork_thread(store: Store, thread: str, at: str) -> dict[str, Any]:
    """A new thread whose head is an earlier step of `thread` (same StartNode)."""
    from ulid import ULID

    state = get_thread(store.read(), thread)
    steps = chain(store, state.head)
    hashes = [node.hash for node in steps]
    if at not in hashes:
        raise NotFound(f"{at} is not a step of thread {thread}",
                       f"see its steps with `uwf thread log {thread}`")
    new = str(ULID.from_timestamp(store.clock()))
    kept = steps[: hashes.index(at) + 1]
    visits: dict[str, int] = {}
    for node in kept:
        visits[node.payload["role"]] = visits.get(node.payload["role"], 0) + 1
    event = ThreadStarted(state.workflow, state.name, state.start, state.repo, head=at,
                          fork_of=thread, steps=len(kept), visits=visits)
    result = {"workflow": state.workflow, "thread": new, "head": at, "forkOf": thread}
    return store.journal.write(lambda _views: Outcome([NewEvent(f"thread/{new}", event)], result))
