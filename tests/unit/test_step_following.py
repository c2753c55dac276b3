"""A step begun from what the step before it left (issue 30: uwf/threads/following.py):
the thread's state, version and the moderator's decision from its head, so it neither
reads its thread again nor renders its edge prompt twice. When the thread moved since
(another step, another process), the start's stated version is refused and the step is
decided again from the thread as it is: never from the stale head or decision."""

from __future__ import annotations

from typing import Any

from tests.conftest import EXAMPLE
from uwf.config.configfile import Config, WorkflowConfig
from uwf.store import Store
from uwf.threads.following import Following
from uwf.threads.results import StepContext
from uwf.threads.service import get_thread, start_thread
from uwf.threads.stepping import step_thread
from uwf.workflows.service import put_workflow

CONFIG = Config(WorkflowConfig(), None, None)


def agent(ctx: StepContext) -> tuple[Any, str]:
    role = ctx.role["name"]
    if role == "planner":
        return {"status": "ready", "plan": "check the password"}, "planned"
    if role == "developer":
        return {"status": "done", "files": ["login.py"], "summary": "fixed"}, "coded"
    return {"status": "rejected", "comments": "add a test"}, "reviewed"


def step(store: Store, thread: str, known: Following | None = None) -> Following:
    left: list[Following] = []
    step_thread(store, thread, config=CONFIG, in_process=agent, left=left, known=known,
                settings=store.settings)
    return left[-1]


def test_a_step_begun_from_what_its_predecessor_left_takes_its_decision(
        store: Store) -> None:
    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    planned = step(store, thread)
    assert planned.version == store.journal.version(f"thread/{thread}")
    assert planned.decision is not None
    assert planned.decision.role == "developer"
    assert planned.head == planned.state.head == get_thread(store.read(), thread).head
    coded = step(store, thread, planned)
    assert coded.state.head is not None
    step_node = store.cas.get(coded.state.head).payload
    assert (step_node["role"], step_node["prev"]) == ("developer", planned.head)
    # The edge prompt is the decision's, rendered once (by the planner's result).
    assert step_node["edgePrompt"] == planned.decision.prompt


def test_a_step_begun_from_a_stale_predecessor_decides_again(store: Store) -> None:
    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    planned = step(store, thread)
    coded = step(store, thread)  # the thread moves on without `planned`'s caller
    # `planned` says the head is the planner's step and the developer is next: both
    # stale. The start's version is refused, and the step decided from the thread now.
    reviewed = step(store, thread, planned)
    assert reviewed.state.head is not None
    step_node = store.cas.get(reviewed.state.head).payload
    assert (step_node["role"], step_node["prev"]) == ("reviewer", coded.head)
    assert reviewed.state.steps == 3
