"""The dashboard's ASGI app (Starlette): the pages, their JSON twins, the log's live
stream, the static files, the actions (with a token) and the guard every request
passes (`uwf.dashboard.guard`).

Every command runs in one worker thread, one call at a time, as `uwf mcp` runs its
tools: the store is opened once per server and each page reads the views afresh.
The live stream waits on the log (`EventLog.wait`) in threads of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

from uwf.dashboard import actions, pages, times
from uwf.dashboard.calls import Called, Caller
from uwf.dashboard.guard import Guard
from uwf.invoker.context import Context
from uwf.invoker.text import masked

if TYPE_CHECKING:
    from jinja2 import Environment
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

HERE = Path(__file__).resolve().parent
WAIT_S = 5.0  # the longest a stream waits on the log before a keep-alive comment
WAIT_STEP_S = 0.5  # how long one wait on the log lasts: a stopping server is seen then
BATCH = 500  # log lines sent per read of the stream
BRIEF_CHARS = 96  # a log event's data in one line, at most this long
T = TypeVar("T")


def templates() -> Environment:
    """The package's templates, every value escaped (autoescape on)."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    environment = Environment(loader=FileSystemLoader(HERE / "templates"),
                              autoescape=select_autoescape(default=True,
                                                           default_for_string=True),
                              trim_blocks=True, lstrip_blocks=True)
    environment.filters["pretty"] = lambda value: json.dumps(value, indent=2,
                                                             ensure_ascii=False)
    environment.filters["brief"] = brief
    environment.filters["duration"] = times.duration
    environment.globals["query"] = _query
    environment.globals["lifecycles"] = pages.LIFECYCLES  # a filter's choices
    environment.globals["ago"] = times.ago
    environment.globals["run_took"] = times.run_took
    environment.globals["queue_offers"] = actions.QUEUE_OFFERS
    environment.globals["run_offers"] = actions.RUN_OFFERS
    environment.globals["actions"] = actions.ACTIONS
    return environment


def brief(data: Any) -> str:
    """An event's data in one short line: `key: value, ...`, long values cut."""
    if not isinstance(data, dict):
        text = json.dumps(data, ensure_ascii=False)
    else:
        text = ", ".join(
            f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
            for key, value in data.items())
    return text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS - 1] + "\u2026"


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
    caller = Caller(context, actions=token is not None)
    environment = templates()
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="uwf-dashboard")
    # Set when the server is asked to stop: open streams end instead of holding it up.
    stopping = threading.Event()

    async def in_worker(function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(worker, function, *args)

    def render(page: pages.Page, request: Request | None, live: str = "refresh",
               stream: str = "/log/stream") -> str:
        """`page` as HTML; without `request` (an action's refusal) it has no JSON link,
        no live updates and no forms."""
        return environment.get_template(page.template).render(
            page=page, calls=page.calls, path=request.url.path if request else "",
            head=context.store.log.head().seq, live=live if request else "off",
            stream=stream, nav=[(path, title) for path, (title, _) in pages.PAGES.items()],
            now_ms=context.store.clock(),
            csrf=actions.csrf_for(request, token) if request else None, **page.extra)

    def refused(action: actions.Action, ident: str, called: Called) -> str:
        """An action's refusal: its page, in the page's words."""
        return render(pages.Page("refused.html", f"{action.label} refused",
                                 {action.command: called}, {"action": action, "ident": ident}),
                      None)

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

    async def act(request: Request) -> Response:
        assert token is not None  # the guard lets no POST through without one
        return await actions.take(request, token, caller, in_worker, refused)

    routes = [
        Route("/", home, methods=["GET", "HEAD"]),
        *(Route(path, listed(path), methods=["GET", "HEAD"]) for path in pages.PAGES),
        Route("/runs/{run_id}", run_page, methods=["GET", "HEAD"]),
        Route("/log/stream", stream, methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if token is not None:  # without a token the dashboard is read-only: no action at all
        routes += [Route("/queue/{ident}/{verb}", act, methods=["POST"]),
                   Route("/runs/{ident}/{verb}", act, methods=["POST"])]
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
