"""`uwf dashboard`: check the address and the token, then serve the app with uvicorn
until stopped (SIGTERM or Ctrl-C: exit 0)."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

from uwf.dashboard.commands import TOKEN_ENV, DashboardArgs
from uwf.errors import UsageError
from uwf.invoker.context import Context

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The Host headers a loopback server without a token answers (DNS rebinding).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def require_extra() -> None:
    """The dashboard's libraries, or the one line that names the extra to install."""
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"`uwf dashboard` needs {exc.name}, which is not installed",
                         "pip install 'uwf[dashboard]'") from None


def is_loopback(host: str) -> bool:
    return host.strip("[]") in LOOPBACK or host.startswith("127.")


def settle_token(args: DashboardArgs, ctx: Context) -> str | None:
    """--token, else UWF_DASHBOARD_TOKEN; refused off loopback without one."""
    token = args.token if args.token is not None else ctx.environ.get(TOKEN_ENV) or None
    if token is not None and not token.strip():
        raise UsageError("--token is empty", "give a long random token")
    if token is None and not is_loopback(args.host):
        raise UsageError(f"--host {args.host} is not loopback and no token is set",
                         f"give --token (or {TOKEN_ENV}), or serve on 127.0.0.1")
    return token


def bind(host: str, port: int) -> socket.socket:
    """A listening socket at host:port (port 0: a free one), or a usage error."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: {exc.strerror}", "give an address") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}",
                         "give another --port, or stop what uses it") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(args: DashboardArgs, ctx: Context) -> Iterator[str]:
    """Yield the dashboard's URL once it listens, then serve until stopped."""
    human = not ctx.json and sys.stdout.isatty()
    token = settle_token(args, ctx)
    require_extra()
    import uvicorn

    from uwf.dashboard.app import create_app

    allowed = list(LOOPBACK_HOSTS) if token is None and is_loopback(args.host) else None
    app = create_app(ctx, token, allowed_hosts=allowed)
    sock = bind(args.host, args.port)
    try:
        url = url_of(sock)
        yield url if human else json.dumps({"url": url})
        if args.check:
            return
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2,
                                lifespan="on")
        stopping = app.state.stopping

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                stopping.set()  # the open live streams end, so the server stops at once
                super().handle_exit(sig, frame)

        server = Server(config)
        if args.open:
            _open_when_started(server, url + (f"?token={token}" if token else ""))
        server.run(sockets=[sock])
    finally:
        sock.close()


def _open_when_started(server: Any, url: str) -> None:
    import time
    import webbrowser

    def opener() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.05)
        if server.started:
            webbrowser.open(url)

    threading.Thread(target=opener, name="uwf-dashboard-open", daemon=True).start()
