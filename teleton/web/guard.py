"""The checks every request passes before a page sees it (``security.Guard``'s rules, applied as ASGI), and
the headers every response gets."""

from __future__ import annotations

import structlog
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from teleton.web.security import COOKIE, HEADERS, Guard

log = structlog.get_logger(__name__)

MAX_BODY = 1_000_000
OPEN = ("/login", "/static/")  # reachable before logging in


class Guarded:
    """The checks every request passes before the app sees it, and the headers every response gets."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *[(k, v) for k, v in message.get("headers", []) if k.decode().lower() not in HEADERS],
                    *[(k.encode(), v.encode()) for k, v in HEADERS.items()],
                ]
            await send(message)

        body = await _body(receive) if scope.get("method") == "POST" else b""
        if body is None:
            await PlainTextResponse("Too large.", status_code=413)(scope, receive, with_headers)
            return
        replay = _replay(body, receive)
        refusal = await self._refusal(Request(scope, _replay(body, receive)))
        await (refusal or self.app)(scope, replay, with_headers)

    async def _refusal(self, request: Request) -> ASGIApp | None:
        host = request.headers.get("host")
        if not self.guard.host_ok(host):
            log.warning("dashboard_host_refused", host=(host or "")[:100])
            return PlainTextResponse("This dashboard does not answer to that host name.", status_code=400)
        path = request.url.path
        headers = request.headers
        if request.method == "POST" and not self.guard.origin_ok(
            headers.get("origin"), host, headers.get("sec-fetch-site")
        ):
            log.warning("dashboard_origin_refused", path=path, origin=(request.headers.get("origin") or "")[:100])
            return PlainTextResponse("Refused: the request did not come from this dashboard's own pages.", 403)
        if path.startswith(OPEN):
            return None
        if not self.guard.logged_in(request.cookies.get(COOKIE)):
            if path.endswith("/events") or request.method != "GET":
                return PlainTextResponse("Log in first.", status_code=401)
            return RedirectResponse("/login", status_code=303)
        if request.method == "POST":
            form = await request.form()
            if not self.guard.csrf_ok(str(form.get("csrf") or "") or None):
                log.warning("dashboard_csrf_refused", path=path)
                return PlainTextResponse("Refused: the form's CSRF token is missing or wrong.", status_code=403)
        return None


async def _body(receive: Receive) -> bytes | None:
    """A POST's whole body, or None past ``MAX_BODY`` (no form of ours is near it)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The request body, read once by the guard, given again to whoever reads it next; then the real stream."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
