"""The guard every request passes: the methods, the token, the session, the origin.

Without a token the dashboard is read-only: GET and HEAD only (405 otherwise). With
one, every request carries it (a Bearer header, or the session cookie that `?token=`
sets once), and an action (a POST to one of `ACTION_PATH`) is taken only from the
dashboard's own pages: its Origin (or, without one, its Referer) must be this server,
and a browser's form must hold the session's CSRF token (`csrf_token`, checked by the
action itself, which reads the form). A script with the Bearer header and neither
header is not a browser, so no other site can have sent it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import TYPE_CHECKING
from urllib.parse import urlencode, urlsplit

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "uwf_dashboard"
# The actions' addresses: POST /queue/ID/cancel, /queue/ID/retry, /runs/ID/rerun, ...
ACTION_PATH = re.compile(r"/(?:queue|runs)/[^/]+/[a-z]+")
# No inline script or style anywhere: the JS and CSS are the package's static files.
# `same-origin`: a form posted to this server says where it came from (with
# `no-referrer` a browser sends `Origin: null`), and no other site is told anything.
SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]
SESSION = "uwf_session"  # the request state's key: the session's nonce, "" for Bearer


def _mac(token: str, purpose: bytes, nonce: str) -> str:
    return hmac.new(token.encode("utf-8"), purpose + b"\0" + nonce.encode("utf-8"),
                    hashlib.sha256).hexdigest()


def cookie_value(token: str, nonce: str) -> str:
    """What the cookie holds for a session: its nonce and a MAC of it under the token
    (the token itself is never stored)."""
    return f"{nonce}.{_mac(token, b'uwf-dashboard-session', nonce)}"


def csrf_token(token: str, nonce: str) -> str:
    """The session's CSRF token, which its pages put in each action's form."""
    return _mac(token, b"uwf-dashboard-csrf", nonce)


def same(given: str, expected: str) -> bool:
    """`given == expected`, in constant time."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


class Guard:
    """Every request: the methods (GET and HEAD; POST to an action only with a token),
    the token when one is set, the origin of an action, the security headers on every
    answer."""

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

        refused = self._refusal(scope)
        if refused is not None:
            await refused(scope, receive, send_secured)
            return
        await self.app(scope, receive, send_secured)

    def _refusal(self, scope: Scope) -> Response | None:
        """The answer that refuses this request, or None to serve it."""
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse, RedirectResponse

        request = Request(scope)
        method = scope["method"]
        action = method == "POST" and ACTION_PATH.fullmatch(scope["path"]) is not None
        if method not in ("GET", "HEAD") and not (action and self.token is not None):
            why = ("the dashboard is read-only: no token is set, so it takes no actions"
                   if action else "only GET here")
            return PlainTextResponse(f"405: {why}\n", 405, headers={"Allow": "GET, HEAD"})
        if self.token is None:
            return None
        given = request.query_params.get("token")
        if method == "GET" and given is not None and same(given, self.token):
            kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            answer = RedirectResponse(
                request.url.path + (f"?{urlencode(kept)}" if kept else ""), 303)
            answer.set_cookie(COOKIE, cookie_value(self.token, secrets.token_urlsafe(18)),
                              httponly=True, samesite="strict")
            return answer
        session = self._session(request)
        if session is None:
            return PlainTextResponse(
                "401: this dashboard needs its token (Authorization: Bearer TOKEN, "
                "or ?token=TOKEN once)\n", 401, headers={"WWW-Authenticate": "Bearer"})
        if action and not self._same_origin(request, bearer=session == ""):
            return PlainTextResponse(
                "403: refused: an action is taken only from this dashboard's own pages "
                "(the request came from another origin, or did not say where from)\n", 403)
        scope.setdefault("state", {})[SESSION] = session
        return None

    def _session(self, request: Request) -> str | None:
        """The session's nonce (from the cookie), "" for a Bearer header, None when the
        request carries no valid token."""
        assert self.token is not None
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and same(credentials.strip(), self.token):
            return ""
        nonce, _, _ = request.cookies.get(COOKIE, "").partition(".")
        if nonce and same(request.cookies[COOKIE], cookie_value(self.token, nonce)):
            return nonce
        return None

    @staticmethod
    def _same_origin(request: Request, *, bearer: bool) -> bool:
        """Whether an action comes from this server's pages: its Origin header, else its
        Referer, names this server; a request with neither only with the Bearer header."""
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        origin = request.headers.get("origin")
        if origin is not None:
            return same(origin, own)
        referer = request.headers.get("referer")
        if referer is not None:
            parts = urlsplit(referer)
            return same(f"{parts.scheme}://{parts.netloc}", own)
        return bearer
