"""What an in-process step reads (issue 30): the thread once before a run's first start
(a later step's start begins from the thread its predecessor's result left), one views
commit a run (the writes' folds held: uwf/engine/held.py), no steps query while the thread
has no failure to name, no node it gathered hashed again by its checks, and the agent's
output validated against its role's schema once; the views it leaves are a replay's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE
from tests.viewkit import replays_alike
from uwf.cas import nodes
from uwf.cas import store as cas_store
from uwf.config.configfile import Config, WorkflowConfig
from uwf.engine.held import HOLD_WRITES
from uwf.store import Store
from uwf.threads.results import StepContext
from uwf.threads.service import start_thread
from uwf.threads.stepping import run_thread
from uwf.workflows.service import put_workflow

CONFIG = Config(WorkflowConfig(), None, None)
STEPS = 6


def agent(ctx: StepContext) -> tuple[Any, str]:
    role = ctx.role["name"]
    visit = ctx.visits.get(role, 0)
    if role == "planner":
        return {"status": "ready", "plan": "check the password"}, "planned"
    if role == "developer":
        return {"status": "done", "files": ["login.py"], "summary": f"round {visit}"}, "coded"
    return {"status": "rejected", "comments": f"round {visit}: add a test"}, "reviewed"


def test_a_step_reads_its_thread_once_commits_once_and_no_attempts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_DURABILITY", "none")
    store = Store.open(tmp_path / "s")
    put_workflow(store, EXAMPLE)
    thread = start_thread(store, "solve-issue", "Fix the login bug", settings=store.settings).thread
    run_thread(store, thread, in_process=agent, max_steps=1, config=CONFIG,
               settings=store.settings)  # warm
    statements: list[str] = []
    db = store.views._connect(create=False)  # type: ignore[attr-defined]
    db.set_trace_callback(statements.append)
    hashed: list[str] = []
    real = nodes.content_hash

    def counted(node: Any) -> Any:
        hashed.append(node.hash)
        return real(node)

    monkeypatch.setattr(cas_store, "content_hash", counted)
    validated: list[str] = []
    problems = cas_store.Cas.problems

    def validating(cas: cas_store.Cas, type_hash: str, payload: Any) -> list[str]:
        validated.append(type_hash)
        return problems(cas, type_hash, payload)

    monkeypatch.setattr(cas_store.Cas, "problems", validating)
    ran = run_thread(store, thread, in_process=agent, max_steps=STEPS, config=CONFIG,
                     settings=store.settings)
    db.set_trace_callback(None)
    assert ran.steps == STEPS
    thread_reads = [s for s in statements if re.match(r'SELECT value FROM "v_threads"', s)]
    # Before the run's first start (the gathered thread) only: a later step begins from
    # the thread as the step before it left it (its result's write knows its state and
    # version: uwf/threads/following.py), the start decides on the gathered thread, the
    # result's section (is the step still the one in flight) on the state the start's
    # held fold made (uwf/engine/held.py), the agent's context and the loop on the
    # states the writes folded. Two more a run: where it begins, and the status it ends
    # with. None of them reaches the views file: this process wrote the thread last
    # and nothing else moved the views, so its held fold has the states it wrote and
    # read (uwf/engine/held.py).
    assert thread_reads == [], thread_reads
    # The start's fold rides with the result's, and a run's writes are held together
    # (uwf/engine/held.py): one views commit for the run's 2 x STEPS writes, when the
    # run reads the status it ends with.
    assert 2 * STEPS < HOLD_WRITES
    assert statements.count("COMMIT") == 1, statements.count("COMMIT")
    # No failure since the last step: no page of the thread's steps is read.
    assert not [s for s in statements if 'FROM "v_steps" WHERE' in s]
    # The step's new nodes (output, detail, StepNode) are read back from what it
    # gathered, never hashed again: only nodes already in the store are, once each (the
    # details the agent repeats, "coded" and "reviewed", put by the steps before).
    assert len(hashed) == len(set(hashed)) <= 2, hashed
    # The output against its role's schema once a step (before it is put: its put and
    # the step's checks know it valid), the detail and StepNode against theirs once each.
    assert len(validated) == 3 * STEPS, validated
    store.close()
    replays_alike(tmp_path / "s")
