"""What checking each JSON-RPC line costs `uwf mcp` on stdio, beside the SDK's own parse.

    python bench/mcp_lines.py [--n N] [--rounds R] [--calls C]

Baseline: the MCP SDK reading a line as its stdio transport does
(`jsonrpc_message_adapter.validate_json`). uwf: what `uwf mcp` now does with the
same line before the SDK reads it (`mcpwire.refusal`, then the SDK's validation to
find a line it would drop), then the SDK's read. Lines: a `tools/call` of
`uwf_queue_list` with a few arguments (a typical request), and a response to a
ping. Rounds alternate baseline and uwf; figures are medians of CPU time
(`time.process_time`) and wall time a line. For scale, `--calls C` then times C calls
of `uwf_workflow_list` through the SDK's `ClientSession` into a real `uwf mcp` on a
scratch store: wall, the client's CPU and the server's (its process's whole CPU,
start-up included, over C) a call.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import mcp_types as types

from uwf.cli.mcpwire import refusal

LINES = {
    "tools/call": json.dumps({"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {
        "name": "uwf_queue_list", "arguments": {"status": ["ready"], "limit": 20,
                                                "session": "s1"},
        "_meta": {"progressToken": 7}}}),
    "response": json.dumps({"jsonrpc": "2.0", "id": 3, "result": {}}),
}


def sdk_read(line: str) -> None:
    types.jsonrpc_message_adapter.validate_json(line, by_name=False)


def uwf_read(line: str) -> None:
    assert refusal(line) is None
    types.jsonrpc_message_adapter.validate_json(line, by_name=False)  # would it drop it?
    types.jsonrpc_message_adapter.validate_json(line, by_name=False)  # the SDK's read


def timed(read: Callable[[str], None], line: str, n: int) -> tuple[float, float]:
    """CPU and wall seconds a line over `n` reads."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        read(line)
    return (time.process_time() - cpu) / n, (time.perf_counter() - wall) / n


def round_trips(calls: int) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    store = Path(tempfile.mkdtemp(prefix="uwf-mcp-bench-"))
    env = dict(os.environ, UWF_HOME=str(store / "store"), UWF_DURABILITY="none")
    server = StdioServerParameters(command=str(Path(sys.executable).parent / "uwf"),
                                   args=["mcp"], env=env)
    timing: dict[str, float] = {}

    async def run() -> None:
        async with stdio_client(server) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("uwf_workflow_list", {})  # the store opened
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(calls):
                result = await session.call_tool("uwf_workflow_list", {})
                assert result.structured_content == {"items": []}
            timing.update(cpu=time.process_time() - cpu, wall=time.perf_counter() - wall)

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    anyio.run(run)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(store)
    server_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    print(f"uwf_workflow_list x {calls}: {timing['wall'] / calls * 1e6:,.0f}us wall, "
          f"client {timing['cpu'] / calls * 1e6:,.0f}us CPU, server "
          f"{server_cpu / calls * 1e6:,.0f}us CPU a call (start-up included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="lines a round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=0, help="tool calls to time, for scale")
    given = parser.parse_args()
    print(f"{'line':<12} {'reader':<10} {'CPU/line':>10} {'wall/line':>10}")
    for name, line in LINES.items():
        figures: dict[str, list[tuple[float, float]]] = {"sdk": [], "uwf": []}
        for _ in range(given.rounds):
            figures["sdk"].append(timed(sdk_read, line, given.n))
            figures["uwf"].append(timed(uwf_read, line, given.n))
        medians = {}
        for reader, runs in figures.items():
            cpu = statistics.median(run[0] for run in runs)
            wall = statistics.median(run[1] for run in runs)
            medians[reader] = cpu
            print(f"{name:<12} {reader:<10} {cpu * 1e6:>8.1f}us {wall * 1e6:>8.1f}us")
        print(f"{name:<12} {'added':<10} {(medians['uwf'] - medians['sdk']) * 1e6:>8.1f}us "
              f"CPU a line ({medians['uwf'] / medians['sdk']:.2f} x the SDK's read)")
    if given.calls:
        round_trips(given.calls)


if __name__ == "__main__":
    main()
