"""`uwf mcp` against the CLI: every command's tool result is its `--json` payload.

One scripted scenario (register, start, step with uwf-mock, show, list, runs, the
queue, the scheduler, the worker, the archive, the registry, the log, json-cas) runs
twice on two new stores with the same clock: once through `main(argv)` with `--json`,
once through a real `uwf mcp` process over stdio, driven by the official MCP SDK's
`ClientSession`, which validates every result as any client of it does (structured
content an object, conforming to the tool's output schema). Each step's exit code and
payload must be the same, a list or string payload read from the object wrapping it as
the tool's output schema says, once the ids that are random by design
(ULIDs, and the hashes and digests of what holds them) are numbered in order of
appearance, each run's scratch folder is named alike and the demo's duration is left
out. A refused argument is said in the tool's words (its parameter, not the flag); the
rest of the line is the CLI's. A command declared later fails here until the scenario
calls it, and fails `test_every_command_is_a_tool` until it is offered as a tool.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.brokerkit import Broker
from tests.conftest import BIN, EXAMPLE, Cli
from uwf.cli import jsoncas
from uwf.cli import main as uwf_cli
from uwf.cli.mcp import LIST_SCHEMA, TEXT_SCHEMA, tool_name
from uwf.invoker.params import flag_name, params
from uwf.invoker.spec import Command, Group

pytest.importorskip("mcp")  # the `mcp` extra; `dev` installs it, so CI never skips

NOW = "2026-03-02T09:00:00Z"
MOCK_SCRIPT = EXAMPLE.parent / "mock-solve-issue.yaml"
GROUPS: dict[str, Group] = {"uwf": uwf_cli.COMMANDS, "json-cas": jsoncas.COMMANDS}
Call = Callable[[str, dict[str, Any]], tuple[int, Any]]


def command(name: str) -> tuple[Group, Command[Any]]:
    """`workflow put` (uwf) or `json-cas get`."""
    prog, _, rest = name.partition(" ") if name.startswith("json-cas ") else ("uwf", "", name)
    group = GROUPS[prog]
    return group, next(c for c in group if c.name == rest)


def argv(cmd: Command[Any], arguments: dict[str, Any]) -> list[str]:
    """The command line that gives `arguments` (a tool's input) to `cmd`."""
    words = list(cmd.path)
    for param in params(cmd.args):
        if param.name not in arguments:
            continue
        value = arguments[param.name]
        flag = next((f for f in param.flags if f.startswith("--")), (*param.flags, "")[0])
        if param.positional:
            words += [str(v) for v in value] if isinstance(value, list) else [str(value)]
        elif value is True:
            words.append(str(flag))
        else:
            for item in value if isinstance(value, list) else [value]:
                words += [str(flag), str(item)]
    return words


def documents(text: str) -> list[Any]:
    """The JSON documents printed one after another (a streaming command's output)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := _skip_space(text, at)) < len(text):
        value, at = decoder.raw_decode(text, at)
        found.append(value)
    return found


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def cli_call(cli: Cli) -> Call:
    def call(name: str, arguments: dict[str, Any]) -> tuple[int, Any]:
        group, cmd = command(name)
        result = cli.run("--json", *argv(cmd, arguments), prog=group.prog)
        if result.code != 0 and not result.out:
            return result.code, result.err.strip()
        if cmd.plain or (name == "queue add" and arguments.get("quiet")):
            return result.code, result.out.removesuffix("\n")
        if cmd.streams:
            return result.code, documents(result.out)
        return result.code, json.loads(result.out)
    return call


@contextmanager
def stdio_session(env: dict[str, str]) -> Iterator[tuple[Any, Any]]:
    """A real `uwf mcp` process, a `ClientSession` initialized with it over stdio (as an
    agent host's client does), and the portal to call it from sync code."""
    from anyio.from_thread import start_blocking_portal
    from mcp import ClientSession, StdioServerParameters, stdio_client

    @asynccontextmanager
    async def opened() -> AsyncIterator[ClientSession]:
        server = StdioServerParameters(command=str(BIN / "uwf"), args=["mcp"], env=env)
        async with stdio_client(server) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session

    with start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(opened()) as session:
        yield portal, session


def unwrapped(content: Any, schema: dict[str, Any] | None) -> Any:
    """The `--json` payload in a tool's structured content, as docs/mcp.md says to read
    it: a list under `items`, a string under `text` (a list tool's or string tool's
    output schema says so; an object tool gives `{"text": ...}` for a string only)."""
    assert isinstance(content, dict), "MCP structured content is an object"
    if schema == LIST_SCHEMA:
        return content["items"]
    if schema == TEXT_SCHEMA or (set(content) == {"text"} and isinstance(content["text"], str)):
        return content["text"]
    return content


@contextmanager
def mcp_call(env: dict[str, str]) -> Iterator[tuple[Call, dict[str, Any]]]:
    """A real `uwf mcp` process and a sync call into it; also the tools it lists, with
    their output schemas (each call's result was validated against its by the SDK)."""
    with stdio_session(env) as (portal, session):
        listed = portal.call(session.list_tools)
        schemas = {tool.name: tool.output_schema for tool in listed.tools}

        def call(name: str, arguments: dict[str, Any]) -> tuple[int, Any]:
            group, cmd = command(name)
            tool = tool_name(group, cmd)
            result = portal.call(session.call_tool, tool, arguments)
            content = result.structured_content
            assert isinstance(content, dict), (name, content)
            assert result.content[0].text  # the text the CLI prints, beside
            if result.is_error and "exitCode" in content:
                return content["exitCode"], content["error"]
            return (1 if result.is_error else 0), unwrapped(content, schemas[tool])
        yield call, schemas


# -- the scenario ----------------------------------------------------------------------------

def scenario(call: Call, root: Path, broker: str) -> Iterator[tuple[str, int, Any]]:
    """Every command once or more; yields (command, exit code, payload)."""
    def run(name: str, **arguments: Any) -> Any:
        code, payload = call(name, arguments)
        steps.append((name, code, payload))
        return payload

    steps: list[tuple[str, int, Any]] = []
    mock = f"uwf-mock {MOCK_SCRIPT}"
    note = root / "note.json"
    note.write_text('"hello"', "utf-8")

    run("workflow put", file=str(EXAMPLE))
    run("workflow show", ref="solve-issue")
    run("workflow list")
    thread = run("thread start", workflow="solve-issue", prompt="Fix the login bug")["thread"]
    run("thread step", thread=thread, agent=mock)
    run("agent context", thread=thread, role="developer")
    run("agent submit", thread=thread, role="developer", output='{"status": "done"}')
    run("thread run", thread=thread, agent=mock)
    run("thread show", thread=thread)
    run("thread list", all=True)
    run("thread log", thread=thread)
    other = run("thread start", workflow="solve-issue", prompt="Other work")["thread"]
    run("thread kill", thread=other, reason="not needed")
    first_step = [step for step in steps if step[0] == "thread log"][-1][2][0]["hash"]
    run("thread fork", thread=thread, at=first_step)
    run("run search", text="login")
    run("run list", status="completed")
    run("run counts")
    run("run show", run=thread)
    run("run resume", run=thread)
    run("run archive", run=thread, reason="done with it")
    run("run rerun", run=other, reason="try again")
    run("history", limit=5)
    # A human in the loop: the approver asks; the question in `thread show`, then answered.
    run("workflow put", file=str(EXAMPLE.parent / "approve-deploy.yaml"))
    asking = run("thread start", workflow="approve-deploy", prompt="Ship it")["thread"]
    asker = f"uwf-mock {EXAMPLE.parent / 'mock-approve-deploy.yaml'}"
    run("thread run", thread=asking, agent=asker)
    run("thread list", waiting=True)
    asked = run("thread show", thread=asking)
    assert asked["status"] == "waiting"  # uwf_thread_show carries the question
    assert asked["question"]["answerSchema"]["required"] == ["approved"]
    run("thread answer", thread=asking, answer='{"approved": "yes"}')  # refused: a boolean
    answered = run("thread answer", thread=asking, answer='{"approved": true}', by="parity")
    assert answered["question"]["answer"] == {"approved": True}  # uwf_thread_answer

    entry = run("queue add", workflow="solve-issue", prompt="Queued work", session="s1",
                agent=mock)["entry"]["id"]
    run("queue add", workflow="solve-issue", prompt="Quiet work", session="s1", quiet=True)
    run("queue list")
    run("queue show", id=entry)
    run("sched policy", action="set", max_concurrent=2)
    run("sched policy", action="show")
    run("sched plan")
    leased = run("sched lease", limit=1, session="s1")["leases"][0]
    run("sched renew", id=leased["id"], lease=leased["leaseId"])
    run("sched complete", id=leased["id"], lease=leased["leaseId"])
    run("sched policy", action="set", max_attempts=1)
    run("queue add", workflow="solve-issue", prompt="Park me", session="p")
    picked = run("queue pick", session="p")
    lease = run("queue show", id=picked)["lease"]["id"]
    run("sched release", id=picked, lease=lease, failed=True, reason="flaky")
    run("sched reset", id=picked)
    run("sched reclaim")
    run("queue add", workflow="solve-issue", prompt="For the worker", session="w",
        agent=mock)
    run("worker", session="w", once=True, allow_entry_commands=True)
    drained = run("queue add", workflow="solve-issue", prompt="Drain me", session="d")
    run("queue drain", limit=1)
    run("queue status", id=drained["entry"]["id"], set="completed")
    cancelled = run("queue add", workflow="solve-issue", prompt="Cancel me")["entry"]["id"]
    run("queue cancel", id=cancelled, reason="changed my mind")
    run("queue logs", id=entry)
    run("queue logs", list=True)
    run("queue counts", minutes=120)
    job = run("queue add", workflow="solve-issue", prompt="Over MQTT", broker=broker)
    run("queue subscribe", id=job["entry"]["id"], wait=0.2)
    run("queue publish", id=job["entry"]["id"], event='{"type": "progress", "pct": 40}')
    run("queue subscribe", id=job["entry"]["id"], wait=0.5)
    run("bridge mqtt", broker=broker, prefix="parity", once=True)
    for check in run("doctor", broker=broker)["checks"]:
        if check["name"] in ("disk", "python"):  # free space moves; the server's python
            check["detail"] = "<MACHINE>"      # is the console script's

    archive = root / "archive"
    run("archive sync", dir=str(archive))
    run("archive verify", dir=str(archive))
    run("registry show")
    run("registry refresh")
    run("registry snapshot")
    run("registry rebuild")
    run("registry verify")
    run("log tail", n=3)
    run("log verify")
    run("log anchor", key=str(root / "anchor.pem"), new_key=True)
    run("store copy", src=str(root / "store"), dst=str(root / "copy"))
    run("store copy", src=str(root / "store"), dst=str(root / "copy"))  # refused: not empty

    stored = run("json-cas put", type="Text", file=str(note))
    run("json-cas get", hash=stored)
    run("json-cas has", hash=stored)
    run("json-cas hash", type="Text", file=str(note))
    run("json-cas verify", all=True)
    run("json-cas walk", hash=stored)
    run("json-cas schema list")
    run("json-cas gc", dry_run=True)
    run("demo")
    # Refusals: a bad argument and a missing thread carry the CLI's line and exit code.
    run("queue list", limit=-1)
    run("thread show", thread="01J7K9M2XNPQR5VWBCDF8G3H4T")
    yield from steps


# -- what varies from run to run ------------------------------------------------------------

_RANDOM = re.compile(r"\b[0-7][0-9A-HJKMNP-TV-Z]{25}\b|\b[0-9A-HJKMNP-TV-Z]{13}\b|"
                     r"\b[0-9a-f]{16,64}\b|uwf-demo-[a-z0-9_]+")
# `uwf demo` says how long it took; a job's token is random.
_TIMED = {"seconds", "authToken"}


def normalised(value: Any, root: Path, names: dict[str, str]) -> Any:
    """`value` with the scratch folder named <ROOT> and each ULID, hash and digest in a
    string numbered in order of first appearance."""
    if isinstance(value, str):
        text = value.replace(str(root), "<ROOT>")
        return _RANDOM.sub(lambda found: names.setdefault(found[0], f"<{len(names) + 1}>"),
                           text)
    if isinstance(value, dict):
        return {normalised(k, root, names): None if k in _TIMED else normalised(v, root, names)
                for k, v in value.items()}
    if isinstance(value, list):
        return [normalised(item, root, names) for item in value]
    return value


def transcript(call: Call, root: Path, broker: str) -> list[tuple[str, int, Any]]:
    names: dict[str, str] = {}
    return [(name, code, normalised(payload, root, names))
            for name, code, payload in scenario(call, root, broker)]


def in_tool_words(step: tuple[str, int, Any]) -> tuple[str, int, Any]:
    """A CLI step as the tool says it: a refused argument (exit 2) names the tool and its
    parameter, and points at the tool's input schema rather than `--help`."""
    name, code, line = step
    if code != 2 or not isinstance(line, str):
        return step
    group, cmd = command(name)
    tool = tool_name(group, cmd)
    for param in params(cmd.args):
        line = line.replace(f"error: {flag_name(param)}:",
                            f"error: {tool}: parameter {param.name}:")
    return name, code, line.replace(f"see `{' '.join((group.prog, *cmd.path))} --help`",
                                    "see the tool's inputSchema")


def stores(tmp_path: Path) -> tuple[tuple[Path, dict[str, str]], tuple[Path, dict[str, str]]]:
    made = []
    for side in ("cli", "mcp"):
        root = tmp_path / side
        root.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
        env.update(UWF_HOME=str(root / "store"), UWF_NOW=NOW, UWF_DURABILITY="none",
                   XDG_CONFIG_HOME=str(root / "config"))
        made.append((root, env))
    return made[0], made[1]


def test_every_tool_result_is_the_commands_json(tmp_path: Path, broker: Broker) -> None:
    (cli_root, cli_env), (mcp_root, mcp_env) = stores(tmp_path)
    by_cli = transcript(cli_call(Cli(cli_root / "store", cli_env)), cli_root, broker.url)
    with mcp_call(mcp_env) as (call, schemas):
        by_mcp = transcript(call, mcp_root, broker.url)
    assert [step[:2] for step in by_mcp] == [step[:2] for step in by_cli]
    for mine, theirs in zip(by_mcp, by_cli, strict=True):
        assert mine == in_tool_words(theirs), mine[0]
    assert {step[1] for step in by_cli} >= {0, 1, 2}  # successes and both kinds of refusal
    missing = set(declared().values()) - {step[0] for step in by_cli}
    assert missing == set(), "commands the scenario never calls"
    # Each list-valued tool said so, and gave a list (under `items`) at least once.
    listed = {name for name, code, payload in by_cli if code == 0 and isinstance(payload, list)}
    said = {declared()[tool] for tool, schema in schemas.items() if schema == LIST_SCHEMA}
    assert listed == said
    assert {"workflow list", "thread list", "log tail", "json-cas walk"} <= said


def declared() -> dict[str, str]:
    """Every command offered as a tool: tool name -> the command as the scenario names it."""
    return {tool_name(group, cmd): ("" if group.prog == "uwf" else "json-cas ") + cmd.name
            for group in GROUPS.values() for cmd in group if cmd.mcp}


def test_every_command_is_a_tool(tmp_path: Path) -> None:
    # The servers themselves: `uwf mcp`, and `uwf dashboard` and `uwf writer`, which serve
    # until stopped; and the shell's completion script.
    assert {cmd.name for group in GROUPS.values() for cmd in group if not cmd.mcp} == {
        "mcp", "dashboard", "writer", "completion"}
    _, env = stores(tmp_path)[1]
    with mcp_call(env) as (_, tools):
        assert sorted(tools) == sorted(declared())
