"""`uwf mcp` beyond parity: streamable HTTP on loopback, errors, progress, annotations,
malformed JSON-RPC lines, and a server killed in the middle of a call
(tests/e2e/test_mcp_parity.py has the payloads)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.brokerkit import free_port
from tests.conftest import BIN, EXAMPLE, Cli
from tests.e2e.test_mcp_parity import stdio_session
from uwf.cli import mcpwire
from uwf.cli.mcp import LIST_SCHEMA, OBJECT_SCHEMA, TEXT_SCHEMA

pytest.importorskip("mcp")  # the `mcp` extra; `dev` installs it, so CI never skips

MOCK = f"uwf-mock {EXAMPLE.parent / 'mock-solve-issue.yaml'}"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    made = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
    made.update(UWF_HOME=str(tmp_path / "store"), UWF_DURABILITY="fsync",
                XDG_CONFIG_HOME=str(tmp_path / "config"))
    return made


@contextlib.contextmanager
def session(server: Any) -> Iterator[tuple[Any, Any]]:
    """A client session with the server at a URL (streamable HTTP), and its portal."""
    from anyio.from_thread import start_blocking_portal
    from mcp import Client

    with start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(Client(server)) as client:
        yield portal, client


def test_tools_are_annotated_and_refusals_are_tool_errors(env: dict[str, str]) -> None:
    with stdio_session(env) as (portal, client):
        tools = {tool.name: tool for tool in portal.call(client.list_tools).tools}
        assert tools["uwf_thread_show"].annotations.read_only_hint is True
        assert tools["uwf_log_verify"].annotations.read_only_hint is True
        assert tools["uwf_thread_step"].annotations.read_only_hint is False
        assert tools["uwf_queue_add"].input_schema["properties"]["priority"]["type"] == "integer"
        assert "uwf_mcp" not in tools
        assert tools["uwf_workflow_list"].output_schema == LIST_SCHEMA
        assert tools["uwf_log_tail"].output_schema == LIST_SCHEMA
        assert tools["jsoncas_put"].output_schema == TEXT_SCHEMA
        assert tools["uwf_thread_show"].output_schema == OBJECT_SCHEMA

        # A refused argument is named as the tool's input schema names it, never a flag.
        wrong_type = portal.call(client.call_tool, "uwf_queue_list", {"limit": "many"})
        assert wrong_type.is_error
        assert wrong_type.structured_content == {
            "error": "uwf: error: uwf_queue_list: parameter limit: must be an integer or "
                     "null, not \"many\"; see the tool's inputSchema", "exitCode": 2}
        below = portal.call(client.call_tool, "uwf_queue_list", {"limit": -1})
        assert below.structured_content["error"].startswith(
            "uwf: error: uwf_queue_list: parameter limit: must be 0 or more, not -1;")
        unknown = portal.call(client.call_tool, "uwf_queue_list", {"colour": "red"})
        assert unknown.is_error
        assert unknown.structured_content["exitCode"] == 2
        assert "unknown parameter 'colour' (the parameters: " in unknown.structured_content[
            "error"]
        assert "--" not in unknown.structured_content["error"]
        items = portal.call(client.call_tool, "jsoncas_verify", {"hashes": ["EYHPV6X8XHTCS", 1]})
        assert "parameter hashes: each item must be a string" in items.structured_content[
            "error"]
        missing = portal.call(client.call_tool, "uwf_thread_show",
                              {"thread": "01J7K9M2XNPQR5VWBCDF8G3H4T"})
        assert missing.is_error
        assert missing.structured_content["exitCode"] == 1
        no_tool = portal.call(client.call_tool, "uwf_nothing", {})
        assert no_tool.is_error
        follow = portal.call(client.call_tool, "uwf_log_tail", {"follow": True})
        assert follow.is_error
        assert follow.structured_content["error"] == (
            "uwf: error: uwf_log_tail with these arguments runs until it is stopped, and a "
            "tool call must end; leave out follow (call again with since, the last seq you "
            "saw)")
        # The worker has no `follow`: its refusal names what it has.
        endless = portal.call(client.call_tool, "uwf_worker", {})
        assert endless.is_error
        assert endless.structured_content["exitCode"] == 2
        assert endless.structured_content["error"].endswith("; give once: true")
        # The server is still serving after every refusal; a list comes as an object.
        listed = portal.call(client.call_tool, "uwf_workflow_list", {})
        assert not listed.is_error
        assert listed.structured_content == {"items": []}
        assert listed.content[0].text == "[]"


# Lines an MCP client might send that are no JSON-RPC request, and what each is answered.
MALFORMED = [
    ("not json", None, mcpwire.PARSE_ERROR),
    ('{"jsonrpc": "2.0", "id": 5', None, mcpwire.PARSE_ERROR),
    ('{"jsonrpc": "2.0", "id": 6}', 6, mcpwire.INVALID_REQUEST),  # an id, no method
    ('{"jsonrpc": "2.0", "id": "s", "method": "tools/list", "params": "x"}', "s",
     mcpwire.INVALID_REQUEST),
    ('{"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": [1]}', 8,
     mcpwire.INVALID_PARAMS),
    ('[{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}]', None, mcpwire.INVALID_REQUEST),
    ('"tools/list"', None, mcpwire.INVALID_REQUEST),
    ('{"id": 10, "method": "tools/list"}', 10, mcpwire.INVALID_REQUEST),  # no jsonrpc
    ('{"jsonrpc": "2.0", "id": [11], "method": "tools/list"}', None, mcpwire.INVALID_REQUEST),
    ('{"jsonrpc": "2.0", "id": 12, "method": 7}', 12, mcpwire.INVALID_REQUEST),
    ('{"jsonrpc": "2.0", "id": 13, "result": {}, "error": {}}', 13, mcpwire.INVALID_REQUEST),
    ('{"jsonrpc": "2.0", "method": "x", "params": "bar"}', None, mcpwire.INVALID_REQUEST),
]
WELL_FORMED = [
    '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
    '{"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "x"}}',
    '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
    '{"jsonrpc": "2.0", "method": "x", "params": [1]}',  # a notification: never answered
    '{"jsonrpc": "2.0", "id": 2, "result": {}}',  # a client's answer to the server
    '{"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}}',
]


@pytest.mark.parametrize(("line", "request_id", "code"), MALFORMED)
def test_a_malformed_line_is_refused_as_json_rpc_says(
        line: str, request_id: Any, code: int) -> None:
    answer = mcpwire.refusal(line)
    assert answer is not None
    assert answer["jsonrpc"] == "2.0"
    assert answer["id"] == request_id
    assert answer["error"]["code"] == code
    assert answer["error"]["data"]  # says why


@pytest.mark.parametrize("line", WELL_FORMED)
def test_a_well_formed_line_is_passed_on(line: str) -> None:
    assert mcpwire.refusal(line) is None


def test_malformed_lines_are_answered_and_the_server_keeps_serving(
        env: dict[str, str]) -> None:
    server = subprocess.Popen([str(BIN / "uwf"), "mcp"], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wire_in, wire_out = server.stdin, server.stdout
    assert wire_in is not None
    assert wire_out is not None

    def send(line: str) -> dict[str, Any]:
        wire_in.write(line + "\n")
        wire_in.flush()
        # A line left unanswered fails here rather than hanging the suite.
        assert select.select([wire_out], [], [], 30)[0], f"no answer to {line!r}"
        return dict(json.loads(wire_out.readline()))

    try:
        hello = send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}))
        assert hello["result"]["protocolVersion"] == "2025-11-25"
        wire_in.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n\n')
        for line, request_id, code in MALFORMED:
            answer = send(line)
            assert (answer["id"], answer["error"]["code"]) == (request_id, code), line
        # Of the right shape, yet no CallToolRequest (the SDK reads it): the SDK answers.
        bad_arguments = send(json.dumps({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
                                         "params": {"name": "uwf_worker", "arguments": [1]}}))
        assert bad_arguments["id"] == 20
        assert bad_arguments["error"]["code"] == mcpwire.INVALID_PARAMS
        listed = send(json.dumps({"jsonrpc": "2.0", "id": 21, "method": "tools/call",
                                  "params": {"name": "uwf_workflow_list", "arguments": {}}}))
        assert listed["id"] == 21
        assert listed["result"]["structuredContent"] == {"items": []}
    finally:
        wire_in.close()
        server.wait(timeout=30)
    assert server.returncode == 0, server.stderr.read() if server.stderr else ""


def test_a_long_call_reports_progress(env: dict[str, str], tmp_path: Path) -> None:
    cli = Cli(tmp_path / "store", env)
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    assert cli.run("queue", "add", "--workflow", "solve-issue", "-p", "Fix it",
                   "--session", "w", "--agent", MOCK).code == 0
    thread = json.loads(cli.run("thread", "start", "solve-issue", "-p", "Fix it too").out)
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    with stdio_session(env) as (portal, client):
        worked = portal.call(lambda: client.call_tool(
            "uwf_worker", {"session": "w", "once": True, "allow_entry_commands": True},
            progress_callback=progress))
        ran = portal.call(lambda: client.call_tool(
            "uwf_thread_run", {"thread": thread["thread"], "agent": MOCK, "max_steps": 3},
            progress_callback=progress))
    assert not worked.is_error, worked.content
    lines = [json.loads(message or "") for _, _, message in seen if (message or "")[:1] == "{"]
    assert lines == worked.structured_content["items"]  # each line printed, as it comes
    assert ran.structured_content["steps"] == 3
    steps = [message for _, _, message in seen if (message or "").startswith("steps")]
    assert steps == ["steps taken: 1 of 3", "steps taken: 2 of 3", "steps taken: 3 of 3"]


def test_streamable_http_on_loopback(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen([str(BIN / "uwf"), "mcp", "--http", f"127.0.0.1:{port}"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert server.poll() is None, server.communicate()
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.1)
        with session(f"http://127.0.0.1:{port}/mcp") as (portal, client):
            put = portal.call(client.call_tool, "uwf_workflow_put", {"file": str(EXAMPLE)})
            assert put.structured_content["name"] == "solve-issue"
            listed = portal.call(client.call_tool, "uwf_workflow_list", {})
            assert [row["name"] for row in listed.structured_content["items"]] == [
                "solve-issue"]
        # Malformed bodies get JSON-RPC's answers, as stdio lines do.
        for line, request_id, code in MALFORMED:
            status, answer = _post(f"http://127.0.0.1:{port}/mcp", line)
            assert (status, answer["id"], answer["error"]["code"]) == (
                400, request_id, code), line
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=20)
    assert server.returncode == 0, err
    assert Cli(tmp_path / "store", env).run("log", "verify").code == 0


def _post(url: str, body: str) -> tuple[int, dict[str, Any]]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, body.encode(), method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        return exc.code, dict(json.loads(exc.read()))


def test_http_is_refused_off_loopback(env: dict[str, str], tmp_path: Path) -> None:
    result = Cli(tmp_path / "store", env).run("mcp", "--http", "0.0.0.0:8080")
    assert result.code == 2
    assert result.err.startswith("uwf: error: --http '0.0.0.0:8080' is not a loopback")


def test_a_server_killed_mid_call_leaves_the_store_consistent(
        env: dict[str, str], tmp_path: Path) -> None:
    cli = Cli(tmp_path / "store", env)
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    thread = json.loads(cli.run("thread", "start", "solve-issue", "-p", "Fix it").out)["thread"]
    marker = tmp_path / "server.pid"
    # An agent that says who runs it (the server) and then takes its time.
    slow = (f"{sys.executable} -c \"import os, time; "
            f"open({str(marker)!r}, 'w').write(str(os.getppid())); time.sleep(60)\"")
    with contextlib.suppress(Exception), stdio_session(env) as (portal, client):
        call = portal.start_task_soon(client.call_tool, "uwf_thread_run",
                                      {"thread": thread, "agent": slow})
        deadline = time.monotonic() + 60
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline
            assert not call.done()
            time.sleep(0.05)
        os.kill(int(marker.read_text()), signal.SIGKILL)
        with contextlib.suppress(Exception):
            call.result(timeout=20)
    _kill_agents(marker)
    assert cli.run("log", "verify").code == 0
    assert json.loads(cli.run("registry", "verify").out)["ok"] is True
    shown = json.loads(cli.run("thread", "show", thread).out)
    assert shown["thread"] == thread  # the step in flight is the log's, nothing half-written


def _kill_agents(marker: Path) -> None:
    """The slow agent outlives its killed server: end it."""
    subprocess.run(["pkill", "-f", str(marker)], check=False)
