"""Bounded costs on long threads: `agent_context` gives the last 20 steps by default
(UWF_HISTORY, the config's historyLimit and the caller can change that), reads only
those StepNodes, and says when it left some out; uwf-exec and uwf-llm send that
bounded history; uwf-subflow stops a child that never ends after the step limit.

Long threads are built with in-process agents (`run_thread(..., in_process=...)`),
which is fast; the agents under test then run as real processes on the same store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from tests.conftest import Cli
from tests.e2e.test_agents import FakeLLM, Reply, completion
from tests.threadkit import Kit, as_before_but_failed, make_kit, mock_config, one_line_error
from uwf.config.configfile import Config, WorkflowConfig
from uwf.config.limits import DEFAULT_HISTORY, DEFAULT_MAX_STEPS
from uwf.config.settings import Settings
from uwf.errors import NotFound, Rejected, UsageError
from uwf.payload import to_payload
from uwf.store import Store
from uwf.threads.agent import agent_context
from uwf.threads.results import StepContext, ThreadRan
from uwf.threads.service import chain, get_thread, list_threads, start_thread
from uwf.threads.stepping import run_thread
from uwf.workflows.service import put_workflow

# One role that never finishes: every step routes back to the worker.
LOOP = {
    "name": "loop",
    "description": "A worker that never reaches $END",
    "roles": {
        "worker": {
            "description": "Works one more round", "goal": "You work in rounds.",
            "capabilities": [], "procedure": "Do one more round.",
            "output": 'JSON: {"status": "again", "round": N}',
            "meta": {"type": "object", "required": ["status"],
                     "properties": {"status": {"const": "again"},
                                    "round": {"type": "integer"}}},
        },
    },
    "graph": {
        "$START": {"_": {"role": "worker", "prompt": "{{prompt}}"}},
        "worker": {"again": {"role": "worker", "prompt": "Round {{round}} done; go on"}},
    },
}

# A parent whose one role is played by a sub-workflow.
PARENT = {
    "name": "delegate-loop",
    "description": "Delegates to the loop workflow",
    "roles": {
        "delegate": {
            "description": "Runs loop as a sub-workflow", "goal": "Delegate.",
            "capabilities": [], "procedure": "Run the child workflow.",
            "output": "The child's final output",
            "meta": {"type": "object", "required": ["status"]},
        },
    },
    "graph": {"$START": {"_": "delegate"}, "delegate": {"again": "$END"}},
}

NO_CONFIG = Config(WorkflowConfig(), None, None)


def worker(ctx: StepContext) -> tuple[Any, str]:
    """The in-process agent: round n for the n-th step."""
    return {"status": "again", "round": ctx.steps + 1}, ""


def write_yaml(path: Path, document: Any) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False), "utf-8")
    return path


def loop_thread(store: Store, tmp_path: Path, steps: int) -> str:
    """A thread of `loop` with `steps` steps taken (in-process)."""
    put_workflow(store, write_yaml(tmp_path / "loop.yaml", LOOP))
    thread = start_thread(store, "loop", "Count the rounds", str(tmp_path),
                          settings=store.settings).thread
    result = run_thread(store, thread, max_steps=steps, config=NO_CONFIG, in_process=worker,
                        settings=store.settings)
    assert (result.steps, result.done) == (steps, False)
    return thread



def rounds(ctx: StepContext | dict[str, Any]) -> list[int]:
    """The rounds in a context's history: from `agent_context`, or `agent context --json`."""
    return [entry["output"]["round"] for entry in to_payload(ctx)["history"]]


# -- agent_context --------------------------------------------------------------------

def test_default_context_of_100_steps_holds_the_last_20(store: Store, tmp_path: Path) -> None:
    thread = loop_thread(store, tmp_path, 100)
    head = get_thread(store.read(), thread).head
    ctx = agent_context(store, thread, "worker", settings=store.settings)
    assert DEFAULT_HISTORY == 20
    assert len(ctx.history) == 20
    assert rounds(ctx) == list(range(81, 101))  # the last 20, oldest first
    assert ctx.history[-1].step == head
    assert (ctx.steps, ctx.history_truncated) == (100, True)
    assert ctx.visits == {"worker": 100}
    assert ctx.edge_prompt == "Round 100 done; go on"

    everything = agent_context(store, thread, "worker", "all", settings=store.settings)
    assert rounds(everything) == list(range(1, 101))
    assert everything.history_truncated is False
    assert rounds(agent_context(store, thread, "worker", 5,
                                settings=store.settings)) == [96, 97, 98, 99, 100]
    none = agent_context(store, thread, "worker", 0, settings=store.settings)
    assert (none.history, none.steps, none.history_truncated) == ([], 100, True)
    assert agent_context(store, thread, "worker", 500,
                         settings=store.settings).history_truncated is False


def test_default_context_reads_only_the_last_20_step_nodes(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The older layout (UWF_NODES=loose): each step's nodes are files, so one can go.
    store.settings = msgspec.structs.replace(store.settings, node_records=False)
    thread = loop_thread(store, tmp_path, 100)
    steps = [node.hash for node in chain(store.cas, get_thread(store.read(), thread).head)]
    assert len(steps) == 100
    fresh = Store.open(tmp_path / "store")  # an empty node cache: every read is counted
    read: list[str] = []
    original = fresh.cas.get

    def counting(hash_: str, fresh_read: bool = False) -> Any:
        read.append(hash_)
        return original(hash_, fresh_read)

    monkeypatch.setattr(fresh.cas, "get", counting)
    agent_context(fresh, thread, "worker", settings=fresh.settings)
    assert set(read) & set(steps) == set(steps[-20:])
    assert len(read) < 2 * 20 + 10  # 20 StepNodes, their outputs, and a few more
    fresh.close()

    # So an old step's node can go (a pruned CAS, say) without breaking the default.
    store.cas.remove(steps[0])
    assert rounds(agent_context(store, thread, "worker",
                                settings=store.settings)) == list(range(81, 101))
    with pytest.raises(NotFound, match=steps[0]):
        agent_context(store, thread, "worker", "all", settings=store.settings)


def test_history_default_from_env_and_config(store: Store, tmp_path: Path) -> None:
    thread = loop_thread(store, tmp_path, 30)
    seven = Config(WorkflowConfig(history_limit=7), None, None)
    assert len(agent_context(store, thread, "worker", config=seven,
                             settings=store.settings).history) == 7
    assert len(agent_context(store, thread, "worker", 2, config=seven,
                             settings=store.settings).history) == 2
    every = Config(WorkflowConfig(history_limit="all"), None, None)
    assert len(agent_context(store, thread, "worker", config=every,
                             settings=store.settings).history) == 30

    # The config file, read when no config is given.
    config_file = tmp_path / "config" / "uwf" / "config.yaml"
    config_file.parent.mkdir(parents=True)
    config_file.write_text("historyLimit: 4\n")
    assert rounds(agent_context(store, thread, "worker",
                                settings=store.settings)) == [27, 28, 29, 30]

    # UWF_HISTORY wins over the config; the caller wins over both. It comes from the
    # environment of the settings given (the entry point's), not this process's.
    def history(value: str) -> Settings:
        return store.settings.with_environ(UWF_HISTORY=value)

    def context(value: str, *args: Any, **kwargs: Any) -> StepContext:
        return agent_context(store, thread, "worker", *args, settings=history(value), **kwargs)

    assert len(context("3").history) == 3
    assert len(context("3", config=seven).history) == 3
    assert len(context("3", 1).history) == 1
    assert len(context("all").history) == 30
    assert context("0").history == []

    for bad in ("many", "-1", "2.5"):
        with pytest.raises(UsageError, match="UWF_HISTORY"):
            context(bad)
    for wrong in (-1, "some"):
        with pytest.raises(UsageError, match="history limit"):
            agent_context(store, thread, "worker", wrong, settings=store.settings)  # type: ignore[arg-type]
    config_file.write_text("historyLimit: -1\n")
    with pytest.raises(Rejected, match="historyLimit: must be a number of steps"):
        agent_context(store, thread, "worker", settings=store.settings)


# -- the CLI --------------------------------------------------------------------------

def cli_loop(cli: Cli, tmp_path: Path, steps: int) -> tuple[Kit, str]:
    """A kit whose store has a `loop` thread of `steps` steps (taken in-process)."""
    kit = make_kit(cli, tmp_path, mock=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("UWF_DURABILITY", "none")
        store = Store.open(kit.home)
        thread = loop_thread(store, tmp_path, steps)
        store.close()
    return kit, thread


def test_cli_context_is_bounded_by_default(cli: Cli, tmp_path: Path) -> None:
    kit, thread = cli_loop(cli, tmp_path, 25)
    ctx = kit.ok("agent", "context", thread, "worker")
    assert rounds(ctx) == list(range(6, 26))
    assert (ctx["steps"], ctx["historyTruncated"]) == (25, True)
    assert rounds(kit.ok("agent", "context", thread, "worker", "--history", "2")) == [24, 25]
    kit.write_config({"historyLimit": 3})
    assert rounds(kit.ok("agent", "context", thread, "worker")) == [23, 24, 25]
    cli.env["UWF_HISTORY"] = "all"
    assert len(kit.ok("agent", "context", thread, "worker")["history"]) == 25
    cli.env["UWF_HISTORY"] = "lots"
    one_line_error(kit.uwf("agent", "context", thread, "worker"), 2,
                   "UWF_HISTORY must be an integer, not 'lots'")


# -- uwf-exec and uwf-llm -------------------------------------------------------------

def test_exec_prompt_holds_the_bounded_history(cli: Cli, tmp_path: Path) -> None:
    kit, thread = cli_loop(cli, tmp_path, 25)
    answer = json.dumps({"status": "again", "round": 0})
    stub = kit.agent("echo-cli", f'''
        sys.stdout.write(sys.argv[-1] + "\\n```json\\n" + {answer!r} + "\\n```\\n")
    ''')
    kit.write_config({"agents": {"exec": {"command": "uwf-exec", "args": ["--", str(stub)]}},
                      "defaultAgent": "exec"})

    def prompt_lines() -> list[str]:
        kit.ok("thread", "step", thread)
        prompt: str = kit.payload(kit.log(thread)[-1]["detail"])
        return [line for line in prompt.splitlines()
                if line.startswith(("- worker", "## Previous steps"))]

    lines = prompt_lines()
    assert lines[0] == "## Previous steps (the last 20 of 25)"
    assert len(lines) == 1 + 20
    assert lines[1] == '- worker (again): {"status": "again", "round": 6}'
    cli.env["UWF_HISTORY"] = "2"  # reaches the agent through uwf's environment
    assert prompt_lines() == ["## Previous steps (the last 2 of 26)",
                              '- worker (again): {"status": "again", "round": 25}',
                              '- worker (again): {"status": "again", "round": 0}']


def test_llm_prompt_holds_the_bounded_history(cli: Cli, tmp_path: Path) -> None:
    kit, thread = cli_loop(cli, tmp_path, 30)
    fake = FakeLLM()
    fake.serve()
    try:
        kit.write_config({
            "providers": {"local": {"baseUrl": fake.base_url, "apiKeyEnv": "LLM_TEST_KEY"}},
            "models": {"main": {"provider": "local", "name": "main-model"}},
            "agents": {"llm": {"command": "uwf-llm"}},
            "defaultAgent": "llm", "defaultModel": "main",
        })
        cli.env["LLM_TEST_KEY"] = "sk-test"
        fake.replies.append(Reply(200, completion('```json\n{"status": "again"}\n```')))
        kit.ok("thread", "step", thread)
    finally:
        assert fake.server is not None
        fake.server.shutdown()
        fake.server.server_close()
    [request] = fake.requests
    user = request["body"]["messages"][1]["content"]
    history = [line for line in user.splitlines() if line.startswith("- worker")]
    assert len(history) == 20
    assert "## Previous steps (the last 20 of 30)" in user
    assert history[0] == '- worker (again): {"status": "again", "round": 11}'


# -- uwf-subflow ----------------------------------------------------------------------

def test_subflow_fails_when_the_child_hits_its_step_limit(cli: Cli, tmp_path: Path) -> None:
    kit = make_kit(cli, tmp_path, mock=False)
    mock = kit.mock_script({"worker": [{"status": "again"}]}, "loop-mock.yaml")
    kit.write_config(mock_config(
        mock, agents={"mock": {"command": "uwf-mock", "args": [str(mock)]},
                      "sub": {"command": "uwf-subflow", "args": ["--max-steps", "3", "loop"]}},
        agentOverrides={"delegate-loop": {"delegate": "sub"}}))
    kit.put_workflow(write_yaml(tmp_path / "loop.yaml", LOOP))
    kit.put_workflow(write_yaml(tmp_path / "parent.yaml", PARENT))
    parent = kit.start("delegate-loop", "Count forever")
    before = kit.show(parent)
    line = one_line_error(kit.step(parent, timeout=120), 1, "step failed (exit)", "uwf-subflow",
                          "did not reach $END within 3 steps")
    as_before_but_failed(kit, parent, before, "exit")
    [child] = [t["thread"] for t in kit.ok("thread", "list") if t["thread"] != parent]
    assert f"continue it with `uwf thread run {child}`, or raise --max-steps" in line
    assert kit.show(child)["done"] is False  # it stays, to inspect or continue
    assert len(kit.log(child)) == 3


def test_subflow_default_limit_is_thread_runs_default(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """With no --max-steps, a child that loops forever stops after DEFAULT_MAX_STEPS
    (the child's steps run in-process here, so that 200 of them are quick)."""
    from uwf.agents import subflow
    from uwf.threads import stepping

    put_workflow(store, write_yaml(tmp_path / "loop.yaml", LOOP))
    put_workflow(store, write_yaml(tmp_path / "parent.yaml", PARENT))
    parent = start_thread(store, "delegate-loop", "Count forever", str(tmp_path),
                          settings=store.settings).thread
    limits: list[int | None] = []
    original = stepping.run_thread

    def in_process(store: Store, thread: str, *, max_steps: int | None = None,
                   **_: Any) -> ThreadRan:
        limits.append(max_steps)
        return original(store, thread, max_steps=max_steps, config=NO_CONFIG,
                        in_process=worker, settings=store.settings)

    monkeypatch.setattr(stepping, "run_thread", in_process)
    assert subflow.main(["loop", parent, "delegate"]) == 1
    assert limits == [DEFAULT_MAX_STEPS]
    assert DEFAULT_MAX_STEPS == 200
    error = capsys.readouterr().err
    assert error.startswith("uwf-subflow: error: child thread ")
    assert f"did not reach $END within {DEFAULT_MAX_STEPS} steps" in error
    [child] = [t.thread for t in list_threads(store) if t.thread != parent]
    assert child in error
    state = get_thread(store.read(), child)
    assert (state.steps, state.done) == (DEFAULT_MAX_STEPS, False)


@pytest.mark.parametrize("args", [["--max-steps"], ["--max-steps", "0", "loop"],
                                  ["--max-steps", "x", "loop"], ["--max-steps", "3"]])
def test_subflow_refuses_a_bad_max_steps(args: list[str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from uwf.agents import subflow

    assert subflow.main([*args, "01J7K9M2XNPQR5VWBCDF8G3H4T", "delegate"]) == 2
    assert "uwf-subflow: error:" in capsys.readouterr().err
