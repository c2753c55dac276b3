"""The JSON-RPC lines `uwf mcp` reads on stdio, checked before the MCP SDK reads them.

The SDK drops a line it cannot read without a word, so a client that sent a line that
is not JSON, a request without a method or with string params waits for an answer
forever. Here each gets the error response JSON-RPC 2.0 prescribes (parse error,
invalid request, with the request's id when it has a usable one, else null), and the
server reads the next line: `refusal` (pure: a line in, the response to send, or None,
out), applied to stdin's lines (`CheckedLines`) and to HTTP posts (`checked_posts`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


def error_response(request_id: str | int | None, code: int, message: str,
                   why: str) -> dict[str, Any]:
    """A JSON-RPC error response; `why` goes in `data`, as the SDK's own errors put it."""
    return {"jsonrpc": "2.0", "id": request_id,
            "error": {"code": code, "message": message, "data": why}}


def usable_id(message: dict[str, Any]) -> str | int | None:
    """The message's id if a response can carry it (MCP: a string or an integer)."""
    found = message.get("id")
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None


def refusal(line: str) -> dict[str, Any] | None:
    """The error response JSON-RPC gives `line`, or None for a line to pass on: a
    request, a notification or a response of the right shape (the SDK checks more)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to read
        return error_response(None, PARSE_ERROR, "Parse error", "the line is not JSON")
    if isinstance(message, list):
        return _invalid(None, "a batch (MCP has had no batches since 2025-06-18): "
                              "send one message a line")
    if not isinstance(message, dict):
        return _invalid(None, "a message is a JSON object")
    request_id = usable_id(message)
    if message.get("jsonrpc") != "2.0":
        return _invalid(request_id, 'jsonrpc must be "2.0"')
    if "id" in message and request_id is None:
        return _invalid(None, "id must be a string or an integer")
    if "method" not in message:
        if request_id is not None and ("result" in message) != ("error" in message):
            return None  # a client's response to a request of the server's
        return _invalid(request_id, "a request names its method (a response has one of "
                                    "result and error)")
    if not isinstance(message["method"], str):
        return _invalid(request_id, "method must be a string")
    if "params" in message:
        params = message["params"]
        if isinstance(params, list):  # JSON-RPC allows them; MCP's methods take names
            if request_id is None:
                return None  # a notification: never answered, the SDK ignores it
            return error_response(request_id, INVALID_PARAMS, "Invalid params",
                                  "params must be an object (MCP takes named params)")
        if not isinstance(params, dict):
            return _invalid(request_id, "params must be an object")
    return None


def _invalid(request_id: str | int | None, why: str) -> dict[str, Any]:
    return error_response(request_id, INVALID_REQUEST, "Invalid Request", why)


@contextlib.contextmanager
def stdin_lines(anyio: Any) -> Iterator[Any]:
    """The wire's lines: stdin read through a private copy of descriptor 0 while fd 0
    itself reads the null device, so an agent the server starts cannot read the wire (as
    the SDK does when it reads stdin itself); fd 0 is put back after. The text stream
    itself when it has no descriptor."""
    import fcntl
    import os
    import sys

    try:
        sys.stdin.fileno()
    except (OSError, ValueError):
        yield anyio.wrap_file(sys.stdin)
        return
    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # Never closed: a worker thread may still block reading it after the server ends.
    text = open(wire, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    try:
        yield anyio.wrap_file(text)
    finally:
        os.dup2(wire, 0)


class CheckedLines:
    """stdin's lines as the SDK reads them (`async for`), less the ones JSON-RPC answers
    with an error (`refusal`, or one the SDK cannot read), which are answered
    here on the SDK's own write stream (so the replies never tear its frames)."""

    def __init__(self, lines: AsyncIterable[str], types: Any) -> None:
        import anyio

        self._lines, self._types = lines, types
        self._write: Any = None
        self._ready = anyio.Event()

    def answer_on(self, write: Any) -> None:
        self._write = write
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            if not line.strip():
                continue  # no message at all: nothing to answer
            answer = refusal(line)
            if answer is None:
                answer = self._unreadable(line)
            if answer is None:
                yield line
                continue
            from mcp.shared.message import SessionMessage

            await self._ready.wait()
            await self._write.send(SessionMessage(
                self._types.JSONRPCError.model_validate(answer)))

    def _unreadable(self, line: str) -> dict[str, Any] | None:
        """An invalid request for a line of the right shape that the SDK still cannot
        read (it would drop it); None for one it reads, or a notification (never
        answered)."""
        import json

        from pydantic import ValidationError

        try:
            self._types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError as exc:
            request_id = usable_id(json.loads(line))
            if request_id is None:
                return None
            why = "; ".join(f"{'.'.join(map(str, error['loc'][1:])) or 'message'}: "
                            f"{error['msg']}" for error in exc.errors()[:1])
            return error_response(request_id, INVALID_REQUEST, "Invalid Request", why)
        return None


def checked_posts(app: Any) -> Any:
    """The SDK's HTTP app, each POSTed message checked as a stdio line is: a malformed
    one is answered with HTTP 400 and JSON-RPC's error (the SDK alone says -32602,
    invalid params, for what JSON-RPC calls an invalid request); the rest go on, body
    and all."""
    import json

    async def checked(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        answer = refusal(body.decode("utf-8", "replace"))
        if answer is not None:
            data = json.dumps(answer).encode()
            await send({"type": "http.response.start", "status": 400, "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})
            return
        given = False

        async def replay() -> dict[str, Any]:
            nonlocal given
            if given:
                return dict(await receive())
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return checked
