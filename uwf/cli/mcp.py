"""`uwf mcp`: every declared command as an MCP tool, over stdio or streamable HTTP.

The tools are generated from the same declarations the command line is rendered from
(`uwf.invoker.spec`): `uwf workflow put` is the tool `uwf_workflow_put`, its input
schema the JSON Schema of the command's `Args`, its description the command's help.
A call runs the command through the invoker every surface uses
(`uwf.invoker.invoke`) with the server's one open store and returns exactly the
payload `uwf workflow put --json` prints, as text and as structured content, which
MCP wants an object: a list (the rows of `workflow list`, the lines of `log tail`)
is `{"items": [...]}`, a string (a hash) `{"text": ...}`, and each tool's output
schema says which. A refused call (a bad argument, a missing thread, a rejected
step) is a tool error carrying the CLI's one-line message and exit code, a parameter
named as the tool's input schema names it. A line (stdio) or body (HTTP) that is not
a JSON-RPC message gets JSON-RPC's error response (`uwf.cli.mcpwire`). Calls run one
at a time, in a worker thread, so a long one (`thread run`, `worker --once`) reports
progress while the event loop stays responsive.

The MCP SDK is loaded only when the server starts (`uwf --help` stays cheap).
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, cast

from uwf.cli.mcpwire import CheckedLines, checked_posts, stdin_lines
from uwf.config.args import Args, arg
from uwf.errors import EXIT_REJECTED, EXIT_USAGE, UsageError, UwfError
from uwf.invoker import invoke as invoker
from uwf.invoker.context import Context
from uwf.invoker.invoke import Progress
from uwf.invoker.params import Param, params
from uwf.invoker.spec import Command, Group, command_schemas
from uwf.invoker.text import masked, one_line
from uwf.payload import Plain, to_payload

if TYPE_CHECKING:
    import mcp_types


# The binaries whose commands are tools, and the prefix of their tools' names.
PREFIXES = {"uwf": "uwf", "json-cas": "jsoncas"}


def tool_name(group: Group, command: Command[Any]) -> str:
    """`uwf_workflow_put` for `uwf workflow put`, `jsoncas_get` for `json-cas get`."""
    return "_".join((PREFIXES[group.prog], *command.path)).replace("-", "_")


# What a tool's structured content holds: MCP wants an object, so a list or a string
# payload is wrapped in one, under the one key its output schema names.
LIST_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["items"],
               "properties": {"items": {
                   "type": "array", "description": "the rows or lines `--json` prints, "
                   "in order (each JSON line parsed)"}}}
TEXT_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["text"],
               "properties": {"text": {
                   "type": "string", "description": "the one string the command prints "
                   "(an id, a hash)"}}}
OBJECT_SCHEMA = {"type": "object", "description": "the object `--json` prints (a string "
                 "it prints instead, as `queue add` with quiet does, is {\"text\": ...})"}


def output_schema(command: Command[Any]) -> dict[str, Any]:
    """The output schema of the command's tool: its result is a list (a command that
    prints lines, or whose operation returns `list[...]`), a string, or an object."""
    if command.plain:
        return TEXT_SCHEMA
    if command.streams or _returns_list(command.handler):
        return LIST_SCHEMA
    return OBJECT_SCHEMA


def _returns_list(handler: Callable[..., Any]) -> bool:
    """Whether the handler (or the feature operation `on_store` wraps) is annotated as
    returning a list; the annotation is read as written (a string, under postponed
    evaluation), as evaluating it would import what the module imports for type
    checking only. The parity test fails for a list result this misses."""
    operation = inspect.getclosurevars(handler).nonlocals.get("operation", handler)
    returned = inspect.signature(operation).return_annotation
    return (isinstance(returned, str) and returned.startswith("list[")) or (
        getattr(returned, "__origin__", None) is list)


def structured(payload: Any) -> dict[str, Any]:
    """A payload as MCP structured content (an object): a list under `items`, a string
    under `text`, an object as it is."""
    if isinstance(payload, dict):
        return payload
    if isinstance(payload, list):
        return {"items": payload}
    if isinstance(payload, str):
        return {"text": payload}
    raise TypeError(f"a command's payload is an object, a list or a string, not {payload!r}")


@dataclass(frozen=True)
class Outcome:
    """What a call gave: the payload `--json` prints (or the error), the text the CLI
    prints, and its exit code."""

    payload: Any
    text: str
    exit_code: int = 0

    @property
    def is_error(self) -> bool:
        return self.exit_code != 0


@dataclass
class Tools:
    """The tools of some command groups, called against one context's store."""

    groups: Sequence[Group]
    context: Context
    _commands: dict[str, tuple[Group, Command[Any]]] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._commands = {tool_name(group, command): (group, command)
                          for group in self.groups for command in group
                          if command.mcp}

    @functools.cached_property
    def declarations(self) -> list[dict[str, Any]]:
        """Each tool as MCP lists it: name, description, input schema, annotations (made
        once: every client's `tools/list` is answered from it)."""
        found = []
        for group in self.groups:
            schemas = command_schemas(group)
            for command in group:
                if not command.mcp:
                    continue
                found.append({
                    "name": tool_name(group, command),
                    "title": f"{group.prog} {command.name}",
                    "description": f"{command.help}\nExample: {command.example}",
                    "inputSchema": schemas[command.name],
                    "outputSchema": output_schema(command),
                    "readOnly": command.read_only,
                })
        return found

    def call(self, name: str, arguments: dict[str, Any] | None,
             progress: Progress | None = None) -> Outcome:
        """Run the tool `name`; one call at a time (the store is shared)."""
        if name not in self._commands:
            raise KeyError(name)
        group, command = self._commands[name]
        with self._lock:
            return self._call(group, command, name, arguments or {}, progress)

    def _call(self, group: Group, command: Command[Any], name: str,
              arguments: dict[str, Any], progress: Progress | None) -> Outcome:
        prog = group.prog
        try:
            try:
                args = invoker.arguments(command, arguments)
            except invoker.Invalid as exc:  # said as the command line says it, in the
                # tool's terms: each parameter named as its input schema names it
                raise UsageError(f"{name}: {exc.worded(_parameter)}",
                                 "see the tool's inputSchema") from None
            if command.endless is not None and command.endless(args):
                raise UsageError(f"{name} with these arguments runs until it is stopped, "
                                 "and a tool call must end", _bounded(command))
            result = invoker.invoke(command, args, self.context, progress=progress)
            return _outcome(command, result, self.context)
        except UwfError as exc:
            return _failed(prog, exc.line(), exc.exit_code, self.context)
        except Exception as exc:  # a bug: said, and the server serves the next call
            return _failed(prog, f"internal error ({type(exc).__name__}: {exc}); report it",
                           EXIT_REJECTED, self.context)


def _parameter(param: Param) -> str:
    return f"parameter {param.name}"


def _bounded(command: Command[Any]) -> str:
    """How to call an endless command so that it ends, in its own parameters' words."""
    names = {param.name for param in params(command.args)}
    ways = []
    if "follow" in names:
        ways.append("leave out follow" + (" (call again with since, the last seq you saw)"
                                          if "since" in names else ""))
    if "once" in names:
        ways.append("give once: true")
    return " or ".join(ways) or "it cannot be a tool call"


def _outcome(command: Command[Any], result: Any, context: Context) -> Outcome:
    """The call's result as `--json` prints it (`render_text`), the payload redacted as
    the text is; a plain result's payload is its text."""
    from uwf.cli.render import render_text

    plain = command.plain or isinstance(result, Plain)
    payload = to_payload(result)
    text = render_text(command, payload, True, context.redact)
    if plain:
        payload = text
    elif context.redact is not None and not command.exact:  # json-cas get: as stored
        from uwf.redact import redact_value

        payload = redact_value(payload, context.redact)
    return Outcome(payload, text, EXIT_REJECTED if command.failed(payload) else 0)


def _failed(prog: str, line: str, exit_code: int, context: Context) -> Outcome:
    text = one_line(masked(f"{prog}: error: {line}", context.redact))
    return Outcome({"error": text, "exitCode": exit_code}, text, exit_code)


# -- the server ----------------------------------------------------------------------------

def serve(tools: Tools, http: tuple[str, int] | None = None) -> None:
    """Serve `tools` over stdio (default) or streamable HTTP at `http` until the
    client goes away (stdio) or the process is stopped."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    # One thread runs every call: the store's SQLite connection belongs to the thread
    # that opened it, and calls are one at a time anyway.
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="uwf-mcp")

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=tool["name"], title=tool["title"], description=tool["description"],
                       input_schema=tool["inputSchema"], output_schema=tool["outputSchema"],
                       annotations=types.ToolAnnotations(
                           read_only_hint=tool["readOnly"],
                           destructive_hint=False if tool["readOnly"] else None))
            for tool in tools.declarations])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        loop = asyncio.get_running_loop()

        def progress(done: float, total: float | None, message: str | None) -> None:
            report = ctx.session.report_progress(done, total, message)
            asyncio.run_coroutine_threadsafe(report, loop).result()

        try:
            outcome = await loop.run_in_executor(
                worker, tools.call, params.name, params.arguments, progress)
        except KeyError:
            outcome = Outcome({"error": f"no tool {params.name!r}", "exitCode": EXIT_USAGE},
                              f"uwf: error: no tool {params.name!r}; list the tools",
                              EXIT_USAGE)
        return _tool_result(types, outcome)

    server: Server[Any] = Server("uwf", version=_version(), on_list_tools=list_tools,
                                 on_call_tool=call_tool)
    if http is None:
        from mcp.server.stdio import stdio_server

        async def run_stdio() -> None:
            with stdin_lines(anyio) as stdin:
                lines = CheckedLines(stdin, types)
                # The SDK reads its stdin with `async for`: the checked lines are that.
                async with stdio_server(cast("Any", lines), _stdout(anyio)) as (read, write):
                    lines.answer_on(write)
                    await server.run(read, write, server.create_initialization_options())

        try:
            anyio.run(run_stdio)
        finally:
            worker.submit(tools.context.close).result()
            worker.shutdown()
        return
    import uvicorn

    host, port = http
    app = checked_posts(server.streamable_http_app(host=host))
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        worker.submit(tools.context.close).result()
        worker.shutdown()


def _stdout(anyio: Any) -> Any:
    """None for the process's own stdout (the SDK takes its descriptor, so a child's
    stray output misses the wire); the text stream itself when it has no descriptor
    (`main(argv)` called with other streams)."""
    import sys

    try:
        sys.stdout.fileno()
    except (OSError, ValueError):
        return anyio.wrap_file(sys.stdout)
    return None


def _tool_result(types: Any, outcome: Outcome) -> mcp_types.CallToolResult:
    result: mcp_types.CallToolResult = types.CallToolResult(
        content=[types.TextContent(text=outcome.text)],
        structured_content=structured(outcome.payload), is_error=outcome.is_error)
    return result


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("uwf")
    except PackageNotFoundError:
        return "0"


# -- the command -----------------------------------------------------------------------------

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class McpArgs(Args, frozen=True, kw_only=True):
    http: Annotated[str | None, arg("serve streamable HTTP at HOST:PORT on loopback "
                                    "(path /mcp) instead of stdio",
                                    metavar="HOST:PORT")] = None


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if host not in _LOOPBACK or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--http {text!r} is not a loopback HOST:PORT",
                         "give 127.0.0.1:PORT (the server has no authentication)")
    return host, int(port)


def _mcp(args: McpArgs, ctx: Context) -> Iterator[str]:
    from uwf.cli.jsoncas import COMMANDS as JSONCAS

    http = None if args.http is None else _address(args.http)
    if ctx.commands is None:
        raise UsageError("uwf mcp serves the commands it is called among, and was given "
                         "none", "run it as `uwf mcp`")
    ctx.json = True  # streaming commands print JSON lines, as with --json
    serve(Tools([ctx.commands, JSONCAS], ctx), http)
    yield from ()


MCP_COMMANDS: list[Command[Any]] = [
    Command(("mcp",), "serve every command as an MCP tool: over stdio, or streamable HTTP "
            "on loopback with --http", "uwf mcp", McpArgs, _mcp, streams=True,
            stops_on_signal=lambda args: True, mcp=False),
]
