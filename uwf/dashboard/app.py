"""The dashboard's ASGI app (Starlette): the pages, their JSON twins, the log's live
stream, the static files, and the guard every request passes.

Every command runs in one worker thread, one call at a time, as `uwf mcp` runs its
tools: the store is opened once per server and each page reads the views afresh.
The live stream waits on the log (`EventLog.wait`) in threads of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

from uwf.cli.context import Context
from uwf.cli.parsing import masked
from uwf.dashboard import pages
from uwf.dashboard.calls import Caller

if TYPE_CHECKING:
    from jinja2 import Environment
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

HERE = Path(__file__).resolve().parent
COOKIE = "uwf_dashboard"
# No inline script or style anywhere: the JS and CSS are the package's static files.
SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
WAIT_S = 5.0  # the longest a stream waits on the log before a keep-alive comment
WAIT_STEP_S = 0.5  # how long one wait on the log lasts: a stopping server is seen then
BATCH = 500  # log lines sent per read of the stream
T = TypeVar("T")


def cookie_value(token: str) -> str:
    """What the cookie holds for `token`: a digest, so the token itself is not stored."""
    return hashlib.sha256(b"uwf-dashboard\0" + token.encode("utf-8")).hexdigest()


class Guard:
    """Every request: GET or HEAD only (405 otherwise), the token when one is set (a
    Bearer header, the cookie, or `?token=` once, which sets the cookie), and the
    security headers on every answer."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        from starlette.requests import Request
        from starlette.responses import PlainTextResponse, RedirectResponse

        request = Request(scope)
        if scope["method"] not in ("GET", "HEAD"):
            answer: Response = PlainTextResponse(
                "405: the dashboard is read-only (GET only)\n", 405,
                headers={"Allow": "GET, HEAD"})
            await answer(scope, receive, send_secured)
            return
        if self.token is not None:
            given = request.query_params.get("token")
            if given is not None and self._equal(given):
                kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                answer = RedirectResponse(
                    request.url.path + (f"?{urlencode(kept)}" if kept else ""), 303)
                answer.set_cookie(COOKIE, cookie_value(self.token), httponly=True,
                                  samesite="strict")
                await answer(scope, receive, send_secured)
                return
            if not self._carried(request):
                answer = PlainTextResponse(
                    "401: this dashboard needs its token (Authorization: Bearer TOKEN, "
                    "or ?token=TOKEN once)\n", 401, headers={"WWW-Authenticate": "Bearer"})
                await answer(scope, receive, send_secured)
                return
        await self.app(scope, receive, send_secured)

    def _equal(self, given: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    def _carried(self, request: Request) -> bool:
        assert self.token is not None
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self._equal(credentials.strip()):
            return True
        cookie = request.cookies.get(COOKIE, "")
        return hmac.compare_digest(cookie.encode("utf-8"),
                                   cookie_value(self.token).encode("utf-8"))


def templates() -> Environment:
    """The package's templates, every value escaped (autoescape on)."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    environment = Environment(loader=FileSystemLoader(HERE / "templates"),
                              autoescape=select_autoescape(default=True,
                                                           default_for_string=True),
                              trim_blocks=True, lstrip_blocks=True)
    environment.filters["pretty"] = lambda value: json.dumps(value, indent=2,
                                                             ensure_ascii=False)
    environment.globals["query"] = _query
    environment.globals["lifecycles"] = pages.LIFECYCLES  # a filter's choices
    return environment


def _query(filters: dict[str, Any], **changes: Any) -> str:
    """`?a=1&b=2` of the page's filters with `changes`, empty values left out."""
    merged = {**filters, **changes}
    kept = [(key, str(value)) for key, value in merged.items() if value not in (None, "")]
    return f"?{urlencode(kept)}" if kept else "?"


def create_app(context: Context, token: str | None = None,
               allowed_hosts: Sequence[str] | None = None) -> Starlette:
    """The app over `context`'s store (opened once, on the first page). With `token`,
    every request must carry it; with `allowed_hosts`, other Host headers are refused
    (a loopback server's defence against DNS rebinding)."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    context.json = True  # streaming commands give JSON lines, as with --json
    context.progress = None  # a rebuild draws no bar on the server's terminal
    caller = Caller(context)
    environment = templates()
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="uwf-dashboard")
    # Set when the server is asked to stop: open streams end instead of holding it up.
    stopping = threading.Event()

    async def in_worker(function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(worker, function, *args)

    def render(page: pages.Page, request: Request, live: str = "refresh",
               stream: str = "/log/stream") -> str:
        head = context.store.log.head().seq
        return environment.get_template(page.template).render(
            page=page, calls=page.calls, path=request.url.path, head=head, live=live,
            stream=stream, nav=[(path, title) for path, (title, _) in pages.PAGES.items()],
            **page.extra)

    async def answer(request: Request, build: Callable[[], pages.Page],
                     **live: str) -> Response:
        def work() -> tuple[pages.Page, str | None]:
            page = build()
            if request.query_params.get("format") == "json":
                return page, None
            return page, render(page, request, **live)

        page, html = await in_worker(work)
        if html is None:
            return JSONResponse(page.payloads(), page.status)
        return HTMLResponse(html, page.status, headers={"Cache-Control": "no-store"})

    def listed(path: str) -> Callable[[Request], Any]:
        _, build = pages.PAGES[path]

        async def endpoint(request: Request) -> Response:
            query = dict(request.query_params)
            live: dict[str, str] = {}
            if path == "/log":
                live = {"live": "append", "stream": "/log/stream" + _query(
                    {"type": query.get("type"), "subject": query.get("subject")})}
            elif path == "/verify":
                live = {"live": "slow"}
            return await answer(request, lambda: build(caller, query), **live)

        return endpoint

    async def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return await answer(request, lambda: pages.run(caller, run_id))

    async def home(request: Request) -> Response:
        return RedirectResponse("/runs", 302)

    async def stream(request: Request) -> Response:
        from starlette.responses import StreamingResponse

        query = request.query_params
        type_, subject = query.get("type") or None, query.get("subject") or None
        start = request.headers.get("last-event-id") or query.get("after")
        after = int(start) if start and start.isdigit() else None
        lines = _log_stream(context, after, type_, subject, stopping)
        return StreamingResponse(lines, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    routes = [
        Route("/", home, methods=["GET", "HEAD"]),
        *(Route(path, listed(path), methods=["GET", "HEAD"]) for path in pages.PAGES),
        Route("/runs/{run_id}", run_page, methods=["GET", "HEAD"]),
        Route("/log/stream", stream, methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(Guard, token=token)]
    if allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:  # the store's connections were made in the worker: closed there
            await in_worker(context.close)
            worker.shutdown()

    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.stopping = stopping
    return app


async def _log_stream(context: Context, after: int | None, type_: str | None,
                      subject: str | None, stopping: threading.Event) -> AsyncIterator[str]:
    """Server-sent events: each log line after seq `after` (default: the head now) that
    matches the filters, as `event: log` with its seq as id, as the log says it grew
    (`EventLog.wait`); a comment every WAIT_S seconds of quiet."""
    from anyio import to_thread

    store = context.store
    seq = after if after is not None else await to_thread.run_sync(lambda: store.log.head().seq)
    yield "retry: 2000\n: uwf log stream\n\n"
    quiet = 0.0
    while not stopping.is_set():
        found, seq = await to_thread.run_sync(_read_after, context, seq, type_, subject)
        for line_seq, text in found:
            yield f"id: {line_seq}\nevent: log\ndata: {text}\n\n"
        if found:
            continue
        if await to_thread.run_sync(store.log.wait, seq, WAIT_STEP_S):
            quiet = 0.0
            continue
        quiet += WAIT_STEP_S
        if quiet >= WAIT_S:
            quiet = 0.0
            yield ": quiet\n\n"


def _read_after(context: Context, seq: int, type_: str | None, subject: str | None
                ) -> tuple[list[tuple[int, str]], int]:
    """The matching lines after `seq` (at most BATCH), and the last seq read."""
    found: list[tuple[int, str]] = []
    last = seq
    for line in context.store.log.read(seq):
        last = max(last, line.seq)
        text = line.raw.decode("utf-8")
        event = json.loads(text)
        if _matches(str(event.get("type", "")), str(event.get("subject", "")), type_, subject):
            found.append((line.seq, masked(text, context.redact)))
            if len(found) >= BATCH:
                break
    return found, last


def _matches(event_type: str, event_subject: str, type_: str | None,
             subject: str | None) -> bool:
    """`log tail`'s filters: a type or a prefix such as `thread.`, a subject or a prefix
    such as `workflow/`."""
    if type_ and event_type != type_ and not event_type.startswith(type_.rstrip(".") + "."):
        return False
    return not subject or event_subject == subject or event_subject.startswith(
        subject.rstrip("/") + "/")
