"""The dashboard's actions, behind its token: each one a CLI command, called as the CLI
calls it, refused by that command's own rules.

| Action (POST)          | Command        | Shown on                                  |
|------------------------|----------------|-------------------------------------------|
| `/queue/ID/cancel`     | `queue cancel` | a ready, leased or parked entry           |
| `/queue/ID/retry`      | `sched reset`  | a parked entry                            |
| `/runs/ID/rerun`       | `run rerun`    | a run that has ended                      |
| `/runs/ID/kill`        | `thread kill`  | a run that has not ended                  |
| `/runs/ID/answer`      | `thread answer`| a run waiting for an answer (its question) |

A form posts the session's CSRF token (`csrf`) and, for those that record one, a
`reason`; the answer form its `answer` (JSON, checked by the command against the
question's schema). Done: a redirect to the page that shows the result (303). Refused: the
command's refusal in the page's words, with its status (400, 404, 409); `?format=json`
(or `Accept: application/json`) answers `{command: payload}` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from uwf.dashboard.calls import Called, Caller
from uwf.dashboard.guard import SESSION, csrf_token, same

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

FORM_BYTES = 16_384  # the most a form may hold (a reason or an answer, the CSRF token)


@dataclass(frozen=True)
class Action:
    """One action: its address (`/NOUN/ID/VERB`), the command it calls with the id as
    `id_arg`, whether it records a reason, its button's words, and where a done action
    leads (given the id and the command's payload); the other form fields it passes to
    the command as arguments of the same name (`fields`)."""

    noun: str
    verb: str
    command: str
    id_arg: str
    reason: bool
    label: str
    done: Callable[[str, Any], str]
    fields: tuple[str, ...] = ()


ACTIONS: dict[tuple[str, str], Action] = {
    (action.noun, action.verb): action for action in (
        Action("queue", "cancel", "queue cancel", "id", True, "Cancel",
               lambda entry, payload: "/queue"),
        Action("queue", "retry", "sched reset", "id", False, "Retry",
               lambda entry, payload: "/queue"),
        Action("runs", "rerun", "run rerun", "run", True, "Rerun",
               lambda run, payload: f"/runs/{payload['runId']}"),
        Action("runs", "kill", "thread kill", "thread", True, "Kill",
               lambda run, payload: f"/runs/{run}"),
        Action("runs", "answer", "thread answer", "thread", False, "Answer",
               lambda run, payload: f"/runs/{run}", fields=("answer",)),
    )}
# Which actions a page offers for an entry's status or a run's lifecycle (the command
# decides; a button it would refuse is not offered).
QUEUE_OFFERS = {"ready": ("cancel",), "leased": ("cancel",), "parked": ("retry", "cancel")}
RUN_OFFERS = {"completed": ("rerun",), "failed": ("rerun",), "cancelled": ("rerun",),
              "running": ("kill",), "blocked": ("kill",), "queued": ("kill",),
              "waiting": ("answer", "kill"),
              "stalled": ("kill", "rerun")}


def form_fields(body: bytes) -> dict[str, str] | None:
    """A urlencoded form's fields (the last of each name), None when it is not one."""
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True,
                              strict_parsing=False, max_num_fields=16))
    except (UnicodeDecodeError, ValueError):
        return None


def csrf_for(request: Request, token: str | None) -> str | None:
    """The CSRF token a page's forms carry: the session's, None when the page offers no
    actions (no token set, or a Bearer request, which has no session)."""
    session = request.scope.get("state", {}).get(SESSION)
    if token is None or not session:
        return None
    return csrf_token(token, session)


async def _read_at_most(request: Request, limit: int) -> bytes | None:
    """The request's body, None once it is longer than `limit` (not read further)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return body


async def take(request: Request, token: str, caller: Caller,
               in_worker: Callable[..., Any], refused: Callable[[Action, str, Called], str]
               ) -> Response:
    """Take the action `request` names; `refused` renders a refusal's page."""
    from starlette.responses import (
        HTMLResponse,
        JSONResponse,
        PlainTextResponse,
        RedirectResponse,
    )

    action = ACTIONS.get((request.url.path.split("/")[1], request.path_params["verb"]))
    if action is None:
        return PlainTextResponse("404: no such action\n", 404)
    ident = request.path_params["ident"]
    body = await _read_at_most(request, FORM_BYTES)
    fields = form_fields(body) if body is not None else None
    if fields is None:
        return PlainTextResponse("400: the form could not be read; send it again from "
                                 "the page\n", 400)
    session = request.scope.get("state", {}).get(SESSION)
    if session and not same(fields.get("csrf", ""), csrf_token(token, session)):
        return PlainTextResponse("403: refused: the form is not this session's (reload "
                                 "the page and try again)\n", 403)
    arguments: dict[str, Any] = {action.id_arg: ident}
    if action.reason:
        arguments["reason"] = fields.get("reason") or None
    for name in action.fields:
        arguments[name] = fields.get(name) or None
    called: Called = await in_worker(caller.call, action.command, arguments)
    wants_json = (request.query_params.get("format") == "json"
                  or "application/json" in request.headers.get("accept", ""))
    if wants_json:
        return JSONResponse({action.command: called.payload}, called.status)
    if called.status == 200:
        return RedirectResponse(action.done(ident, called.payload), 303)
    html = await in_worker(refused, action, ident, called)
    return HTMLResponse(html, called.status, headers={"Cache-Control": "no-store"})
