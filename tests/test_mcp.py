"""`uwf mcp` beyond parity: streamable HTTP on loopback, errors, progress, annotations,
and a server killed in the middle of a call (tests/test_mcp_parity.py has the payloads)."""

from __future__ import annotations

import contextlib
import json
import os
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
    """A client session with `server` (stdio parameters or a URL), and its portal."""
    from anyio.from_thread import start_blocking_portal
    from mcp import Client

    with start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(Client(server)) as client:
        yield portal, client


def stdio(env: dict[str, str]) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(command=str(BIN / "uwf"), args=["mcp"], env=env)


def test_tools_are_annotated_and_refusals_are_tool_errors(env: dict[str, str]) -> None:
    with session(stdio(env)) as (portal, client):
        tools = {tool.name: tool for tool in portal.call(client.list_tools).tools}
        assert tools["uwf_thread_show"].annotations.read_only_hint is True
        assert tools["uwf_log_verify"].annotations.read_only_hint is True
        assert tools["uwf_thread_step"].annotations.read_only_hint is False
        assert tools["uwf_queue_add"].input_schema["properties"]["priority"]["type"] == "integer"
        assert "uwf_mcp" not in tools

        wrong_type = portal.call(client.call_tool, "uwf_queue_list", {"limit": "many"})
        assert wrong_type.is_error
        assert wrong_type.structured_content["exitCode"] == 2
        assert wrong_type.structured_content["error"].startswith("uwf: error: argument --limit")
        unknown = portal.call(client.call_tool, "uwf_queue_list", {"colour": "red"})
        assert unknown.is_error
        assert unknown.structured_content["exitCode"] == 2
        missing = portal.call(client.call_tool, "uwf_thread_show",
                              {"thread": "01J7K9M2XNPQR5VWBCDF8G3H4T"})
        assert missing.is_error
        assert missing.structured_content["exitCode"] == 1
        no_tool = portal.call(client.call_tool, "uwf_nothing", {})
        assert no_tool.is_error
        follow = portal.call(client.call_tool, "uwf_log_tail", {"follow": True})
        assert follow.is_error
        assert "runs until it is stopped" in follow.structured_content["error"]
        endless = portal.call(client.call_tool, "uwf_worker", {})
        assert endless.is_error
        assert endless.structured_content["exitCode"] == 2
        # The server is still serving after every refusal.
        listed = portal.call(client.call_tool, "uwf_workflow_list", {})
        assert not listed.is_error
        assert listed.structured_content == []


def test_a_long_call_reports_progress(env: dict[str, str], tmp_path: Path) -> None:
    cli = Cli(tmp_path / "store", env)
    assert cli.run("workflow", "put", str(EXAMPLE)).code == 0
    assert cli.run("queue", "add", "--workflow", "solve-issue", "-p", "Fix it",
                   "--session", "w", "--agent", MOCK).code == 0
    thread = json.loads(cli.run("thread", "start", "solve-issue", "-p", "Fix it too").out)
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    with session(stdio(env)) as (portal, client):
        worked = portal.call(lambda: client.call_tool(
            "uwf_worker", {"session": "w", "once": True, "allow_entry_commands": True},
            progress_callback=progress))
        ran = portal.call(lambda: client.call_tool(
            "uwf_thread_run", {"thread": thread["thread"], "agent": MOCK, "max_steps": 3},
            progress_callback=progress))
    assert not worked.is_error, worked.content
    lines = [json.loads(message or "") for _, _, message in seen if (message or "")[:1] == "{"]
    assert lines == worked.structured_content  # each line the CLI prints, as it comes
    assert ran.structured_content["steps"] == 3
    steps = [message for _, _, message in seen if (message or "").startswith("steps")]
    assert steps == ["steps taken: 1 of 3", "steps taken: 2 of 3", "steps taken: 3 of 3"]


def test_streamable_http_on_loopback(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen([str(BIN / "uwf"), "mcp", "--http", f"127.0.0.1:{port}"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
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
            assert [row["name"] for row in listed.structured_content] == ["solve-issue"]
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=20)
    assert server.returncode == 0, err
    assert Cli(tmp_path / "store", env).run("log", "verify").code == 0


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
    with contextlib.suppress(Exception), session(stdio(env)) as (portal, client):
        call = portal.start_task_soon(client.call_tool, "uwf_thread_run",
                                      {"thread": thread, "agent": slow})
        deadline = time.monotonic() + 30
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
