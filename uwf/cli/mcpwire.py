"""The JSON-RPC lines `uwf mcp` reads on stdio, checked before the MCP SDK reads them.

The SDK drops a line it cannot read without a word, so a client that sent a line that
is not JSON, a request without a method or with string params waits for an answer
forever. Here each gets the error response JSON-RPC 2.0 prescribes (parse error,
invalid request, with the request's id when it has a usable one, else null), and the
server reads the next line. Pure: a line in, the response to send (or None) out.
"""

from __future__ import annotations

import json
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
