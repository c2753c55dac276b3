"""Every acceptance check of `uwf thread step`, one agent script each.

Each refused step must exit 1 with one error line naming the reason, record
`thread.step_failed` with that reason, leave the head where it was, and leave
the thread able to take its next step.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.threadkit import (
    Kit,
    as_before_but_failed,
    kill_quietly,
    make_kit,
    one_line_error,
    wait_dead,
    wait_for,
)

VALID_PLAN = '{"status": "ready", "plan": "p"}'


def setup(cli: Cli, tmp_path: Path, steps: int = 0) -> tuple[Kit, str]:
    """solve-issue registered, a thread started and stepped `steps` times with uwf-mock."""
    kit = make_kit(cli, tmp_path)
    kit.put_workflow()
    thread = kit.start()
    for _ in range(steps):
        kit.ok("thread", "step", thread)
    return kit, thread


def refused(kit: Kit, thread: str, agent: Path, reason: str, role: str, *fragments: str,
            timeout: str | None = None) -> str:
    """Step with `agent`; assert the refusal, the event, the unmoved head; then recover."""
    before = kit.show(thread)
    args = ["--agent", str(agent)] + (["--timeout", timeout] if timeout else [])
    line = one_line_error(kit.step(thread, *args), 1, f"step failed ({reason})", *fragments)
    assert line.startswith("uwf: error: ")
    assert f"the head stays at {before['head']}" in line
    failed = kit.events("thread.step_failed")
    assert len(failed) == 1, failed
    event = failed[0]
    assert event["subject"] == f"thread/{thread}"
    assert event["data"]["reason"] == reason
    assert event["data"]["role"] == role
    for fragment in fragments:
        assert fragment in event["data"]["message"]
    events = kit.events("thread.")
    assert events[-1] == event  # nothing after the failure: no stepped, no ended
    started = events[-2]
    assert started["type"] == "thread.step_started"
    assert started["data"]["stepId"] == event["data"]["stepId"]
    assert started["data"]["role"] == role
    as_before_but_failed(kit, thread, before, reason)
    # Nothing is left in flight: the next step (uwf-mock) is accepted on the old head.
    after = kit.ok("thread", "step", thread)
    log = kit.log(thread)
    assert log[-1]["hash"] == after["head"]
    assert log[-1]["role"] == role
    assert (log[-2]["hash"] if len(log) > 1 else kit.payload(after["head"])["start"]) == \
        before["head"]
    return line


def test_wrong_type_a_text_node(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("text", 'print(put_cli("Text", "I am only text"))\n')
    text_type = kit.schema_hash("Text")
    line = refused(kit, thread, agent, "wrong-type", "planner", "is not a StepNode", text_type)
    assert kit.payload(line.split("step failed (wrong-type): ")[1].split()[0]) == \
        "I am only text"


def test_wrong_start(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("wrong-start", f'''
        ctx = context()
        other = put_cli("StartNode", {{"workflow": ctx["workflow"], "prompt": "another task"}})
        out = put_cli(ctx["role"]["meta"], {VALID_PLAN})
        step = {{"start": other, "prev": ctx["head"], "role": ROLE, "output": out,
                "detail": put_cli("Text", "d"), "agent": "forger"}}
        print(put_cli("StepNode", step))
    ''')
    start = kit.show(thread)["head"]
    refused(kit, thread, agent, "wrong-start", "planner", f"the thread's StartNode {start}")


def test_wrong_start_from_another_thread(cli: Cli, tmp_path: Path) -> None:
    """A StepNode of another thread's start, written straight into a folder store."""
    kit, thread = setup(cli, tmp_path)
    other = kit.start(prompt="A different thread")
    agent = kit.agent("borrow", f'''
        ctx = context()
        out = put(ctx["role"]["meta"], {VALID_PLAN})
        step = {{"start": {kit.show(other)["head"]!r}, "prev": None, "role": ROLE,
                "output": out, "detail": put("Text", "d"), "agent": "borrow"}}
        print(put("StepNode", step))
    ''')
    refused(kit, thread, agent, "wrong-start", "planner")


@pytest.mark.parametrize("how", ["kit", "cli"])
def test_an_agent_submits_only_its_own_step(cli: Cli, tmp_path: Path, how: str) -> None:
    """The staging folder holds one thread's step as one role: the kit and `uwf agent
    submit` refuse another thread or role, naming both (the agent then fails)."""
    kit, thread = setup(cli, tmp_path)
    other = kit.start(prompt="A different thread")
    body = (f"THREAD = {other!r}\nprint(submit({VALID_PLAN}))\n" if how == "kit" else
            "print(submit_cli({'status': 'done', 'files': []}, role='developer'))\n")
    line = refused(kit, thread, kit.agent(how, body), "exit", "planner",
                   f"is thread {thread} as planner")
    assert (f"not {other} as planner" if how == "kit" else
            f"not {thread} as developer") in line


def test_a_node_altered_in_the_staging_folder_is_invalid(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("alter", f'''
        import glob
        step = submit({VALID_PLAN})
        for path in glob.glob(os.path.join(os.environ["UWF_STEP_DIR"], "cas", "*", "*.json")):
            node = json.load(open(path))
            if node["payload"] == {VALID_PLAN}:
                node["payload"]["plan"] = "something else"
                json.dump(node, open(path, "w"))
        print(step)
    ''')
    refused(kit, thread, agent, "invalid", "planner", "does not hash to its name")


def test_a_staged_node_against_its_schema_is_invalid(cli: Cli, tmp_path: Path) -> None:
    """A node named rightly whose payload its type refuses (a StepNode without fields)."""
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("unfit", '''
        from uwf.cas.hashing import node_hash
        from uwf.cas.builtins import builtin_hash
        kind, payload = builtin_hash("StepNode"), {"role": ROLE}
        name = node_hash(kind, payload)
        folder = os.path.join(os.environ["UWF_STEP_DIR"], "cas", name[:2])
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name + ".json"), "w") as out:
            json.dump({"type": kind, "payload": payload, "timestamp": 0}, out)
        print(name)
    ''')
    refused(kit, thread, agent, "invalid", "planner", "payload does not match type")


def test_stale_prev(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path, steps=1)
    head = kit.show(thread)["head"]
    agent = kit.agent("stale", '''
        ctx = context()
        assert ctx["head"] is not None
        out = put(ctx["role"]["meta"], {"status": "done", "files": ["a.py"]})
        step = {"start": ctx["start"], "prev": None, "role": ROLE, "output": out,
                "detail": put("Text", "d"), "agent": "stale"}
        print(put("StepNode", step))
    ''')
    refused(kit, thread, agent, "stale-prev", "developer", f"the head is {head}")


def test_replaying_an_old_step_is_stale(cli: Cli, tmp_path: Path) -> None:
    """An agent that prints the StepNode of the step before (prev null, head moved on)."""
    kit, thread = setup(cli, tmp_path, steps=1)
    first = kit.show(thread)["head"]
    replay = kit.agent("replay", f'print({first!r})\n')
    refused(kit, thread, replay, "stale-prev", "developer", f"the head is {first}")


def test_wrong_role(cli: Cli, tmp_path: Path) -> None:
    """A developer's StepNode when the moderator chose the planner (written straight
    into a folder store: the staging folder refuses another role)."""
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("developer-too-soon", '''
        ctx = context()
        workflow = json.loads(sh("json-cas", "get", ctx["workflow"]))["payload"]
        out = put(workflow["roles"]["developer"]["meta"], {"status": "done", "files": ["x.py"]})
        step = {"start": ctx["start"], "prev": ctx["head"], "role": "developer",
                "output": out, "detail": put("Text", "d"), "agent": "eager"}
        print(put("StepNode", step))
    ''')
    refused(kit, thread, agent, "wrong-role", "planner", "'developer'", "'planner'")


def test_output_violating_the_role_schema(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("loose", '''
        ctx = context()
        loose = put("Schema", {"type": "object"})
        out = put(loose, {"status": "maybe", "plan": 42})
        step = {"start": ctx["start"], "prev": ctx["head"], "role": ROLE, "output": out,
                "detail": put("Text", "d"), "agent": "loose"}
        print(put("StepNode", step))
    ''')
    refused(kit, thread, agent, "schema", "planner", "violates the planner schema")


def test_output_of_the_wrong_kind(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("text-output", '''
        ctx = context()
        step = {"start": ctx["start"], "prev": ctx["head"], "role": ROLE,
                "output": put("Text", "ready"), "detail": put("Text", "d"), "agent": "t"}
        print(put("StepNode", step))
    ''')
    refused(kit, thread, agent, "schema", "planner", "violates the planner schema")


def test_hash_not_in_the_cas(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    missing = "0000000000000"
    assert cli.cas("has", missing).code != 0
    agent = kit.agent("ghost", f'print({missing!r})\n')
    refused(kit, thread, agent, "not-found", "planner", f"StepNode {missing} is not in the CAS")


def test_output_not_in_the_cas(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("no-output", '''
        ctx = context()
        step = {"start": ctx["start"], "prev": ctx["head"], "role": ROLE,
                "output": "7ZZZZZZZZZZZZ", "detail": put("Text", "d"), "agent": "t"}
        print(put("StepNode", step))
    ''')
    refused(kit, thread, agent, "not-found", "planner", "7ZZZZZZZZZZZZ")


def test_garbage_on_stdout(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("chatty", 'print("I fixed it!")\nprint("all good")\n')
    refused(kit, thread, agent, "garbage", "planner", "I fixed it!",
            "instead of a StepNode hash on its last line")


def test_the_last_non_empty_line_is_the_hash(cli: Cli, tmp_path: Path) -> None:
    """As the seed's agents do: logs first, the hash last (blank lines after it too)."""
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("chatty-then-hash", f'''
        hash_ = submit({VALID_PLAN})
        print("reading the context...")
        print("planning: 3 steps")
        print(hash_)
        print()
    ''')
    result = kit.step(thread, "--agent", str(agent))
    assert result.code == 0, result.err
    assert [e["data"]["role"] for e in kit.events("thread.stepped")] == ["planner"]


def test_a_hash_followed_by_more_output_is_garbage(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("hash-then-chat", f'''
        print(submit({VALID_PLAN}))
        print("done!")
    ''')
    refused(kit, thread, agent, "garbage", "planner", "done!")


def test_empty_stdout(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("silent", "pass\n")
    refused(kit, thread, agent, "garbage", "planner")


def test_non_zero_exit(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("crash", f'''
        print(submit({VALID_PLAN}))
        sys.stderr.write("working...\\nboom: the model is down\\n")
        sys.exit(3)
    ''')
    refused(kit, thread, agent, "exit", "planner", "exited with status 3",
            "boom: the model is down")


def test_timeout_kills_the_agent(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    pid_file = tmp_path / "agent.pid"
    agent = kit.agent("sleeper", f'''
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(600)
        print(submit({VALID_PLAN}))
    ''')
    # The agent would run for 600 s and the command is given 60: it returns only if
    # uwf stops waiting at the timeout, and the agent, which never exits on its own,
    # must then be dead: killed, not waited for.
    refused(kit, thread, agent, "timeout", "planner", "within 1s", timeout="1")
    pid = int(pid_file.read_text())
    assert wait_dead(pid), f"agent {pid} survived its timeout"


def test_timeout_kills_the_whole_process_group(cli: Cli, tmp_path: Path) -> None:
    kit, thread = setup(cli, tmp_path)
    pids = tmp_path / "pids"
    agent = kit.agent("spawner", f'''
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(600)
    ''')
    try:  # as above: the command returns at all only if uwf stopped waiting
        refused(kit, thread, agent, "timeout", "planner", timeout="1")
    finally:
        parent, child = (int(word) for word in wait_for(pids).split())
        dead = wait_dead(child) and wait_dead(parent)
        for pid in (child, parent):  # never leave a sleeper behind, even on failure
            kill_quietly(pid)
    assert dead, "the agent's child outlived the step's timeout"


def test_detail_not_in_the_cas(cli: Cli, tmp_path: Path) -> None:
    """A StepNode whose detail is missing would leave a hole in the thread's history."""
    kit, thread = setup(cli, tmp_path)
    agent = kit.agent("no-detail", f'''
        ctx = context()
        step = {{"start": ctx["start"], "prev": ctx["head"], "role": ROLE,
                "output": put(ctx["role"]["meta"], {VALID_PLAN}),
                "detail": "7ZZZZZZZZZZZZ", "agent": "t"}}
        print(put("StepNode", step))
    ''')
    refused(kit, thread, agent, "not-found", "planner", "7ZZZZZZZZZZZZ")


HOLDER = '''
        holder = subprocess.Popen(["setsid", "sleep", "600"])  # inherits stdout and stderr
        open({pids!r}, "w").write(str(holder.pid))
'''


def test_an_agent_that_exits_in_time_succeeds_whatever_its_descendants_hold(
        cli: Cli, tmp_path: Path) -> None:
    """A daemon the agent started keeps its stdout open for 600 s: uwf stops reading
    once the agent itself has exited (and a short grace), and takes its hash. The
    command is given 60 s, so waiting for the daemon would fail the test."""
    kit, thread = setup(cli, tmp_path)
    pids = tmp_path / "holder.pid"
    agent = kit.agent("daemonizer", HOLDER.format(pids=str(pids)) + f'''
        print(submit({VALID_PLAN}))
    ''')
    try:
        result = kit.step(thread, "--agent", str(agent), "--timeout", "30")
        assert result.code == 0, result.err
        assert kit.show(thread)["head"] != kit.events("thread.started")[0]["data"]["start"]
        assert [e["data"]["role"] for e in kit.events("thread.stepped")] == ["planner"]
    finally:
        kill_quietly(int(wait_for(pids)))


def test_the_deadline_holds_whatever_the_agents_descendants_hold(cli: Cli,
                                                                tmp_path: Path) -> None:
    """The agent outlives its timeout and a daemon of its own holds the pipes: the step
    still ends at the deadline as `timeout` (killing the agent's group; the daemon,
    in a session of its own, is not waited for)."""
    kit, thread = setup(cli, tmp_path)
    pids = tmp_path / "holder.pid"
    agent = kit.agent("stuck", HOLDER.format(pids=str(pids)) + '''
        time.sleep(600)
    ''')
    try:
        refused(kit, thread, agent, "timeout", "planner", "within 2s", timeout="2")
    finally:
        kill_quietly(int(wait_for(pids)))
