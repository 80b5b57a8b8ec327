"""The dashboard as an ASGI app (Starlette, Jinja2 templates from the package, no JavaScript build step).

    app = build_app(Dashboard(guard, status))
    await serve(app, "127.0.0.1", 8765)       # teleton.web.server: uvicorn in the caller's event loop

Every request passes ``security.Guard`` first: a foreign Host is refused (400), a page without the session
cookie goes to the login page, a POST needs our own Origin and, once logged in, the form's CSRF token. What
the pages show comes from the callables of ``Dashboard`` (the daemon's own state, or its status file and a
read-only database under ``teleton dashboard``): the web layer has no second way to read or write anything.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import structlog
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from teleton.tools.outbox import Outbox
from teleton.web.memory_view import MemorySearch
from teleton.web.security import COOKIE, HEADERS, Guard

log = structlog.get_logger(__name__)

HERE = Path(__file__).parent
LIVE_EVERY_S = 2.0
MAX_BODY = 1_000_000
OPEN = ("/login", "/static/")  # reachable before logging in

Status = Callable[[], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Dashboard:
    guard: Guard
    status: Status  # the daemon's state as `teleton status --json` gives it, with rss_bytes and database_bytes
    read_only: bool = False  # `teleton dashboard` without a daemon: pages show, nothing changes
    live_every_s: float = LIVE_EVERY_S
    outbox: Outbox | None = None  # the daemon's: what waits for approval, and the one way to release it
    memory: MemorySearch | None = None  # the daemon's store, searched as any clearance
    owner_id: int | None = None  # who decides, in the held items' records


def build_app(dash: Dashboard) -> ASGIApp:
    templates = Environment(
        loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True), enable_async=True
    )

    async def page(request: Request, name: str, **values: Any) -> HTMLResponse:
        html = await templates.get_template(name).render_async(
            csrf=dash.guard.csrf, read_only=dash.read_only, path=request.url.path, **values
        )
        return HTMLResponse(html)

    async def login_form(request: Request) -> Response:
        return await page(request, "login.html", failed=False)

    async def login(request: Request) -> Response:
        form = await request.form()
        if not dash.guard.token_ok(str(form.get("token", ""))):
            log.warning("dashboard_login_refused", client=request.client.host if request.client else None)
            refused = await page(request, "login.html", failed=True)
            refused.status_code = 403
            return refused
        log.info("dashboard_login", client=request.client.host if request.client else None)
        response: Response = RedirectResponse("/status", status_code=303)
        secure = request.url.scheme == "https"
        response.set_cookie(COOKIE, dash.guard.session, httponly=True, samesite="strict", secure=secure, path="/")
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def status_page(request: Request) -> Response:
        return await page(request, "status.html", status=await dash.status())

    async def status_events(request: Request) -> Response:
        async def events() -> AsyncIterator[str]:
            while not await request.is_disconnected():
                yield f"data: {json.dumps(await dash.status(), default=str)}\n\n"
                await asyncio.sleep(dash.live_every_s)

        return StreamingResponse(events(), media_type="text/event-stream")

    async def home(request: Request) -> Response:
        return RedirectResponse("/status", status_code=303)

    async def memory(request: Request) -> Response:
        text, as_raw = request.query_params.get("q", "").strip(), request.query_params.get("as", "")
        as_chat = int(as_raw) if as_raw.lstrip("-").isdigit() else None
        found = await dash.memory.search(text, as_chat) if dash.memory is not None and text else []
        chats = await dash.memory.chats() if dash.memory is not None else []
        if text:
            log.info("dashboard_memory_search", as_chat=as_chat, hits=len(found))
        return await page(request, "memory.html", q=text, as_chat=as_chat, found=found, chats=chats,
                          searchable=dash.memory is not None)  # fmt: skip

    async def approvals(request: Request) -> Response:
        waiting = [] if dash.outbox is None else await dash.outbox.waiting()
        return await page(request, "approvals.html", waiting=waiting, said=request.query_params.get("said", ""))

    async def whole(request: Request) -> Response:
        held_id = int(request.path_params["held_id"])
        found = [n for item, n in (await dash.outbox.waiting() if dash.outbox else []) if item.id == held_id]
        if not found or found[0].attachment is None:
            return PlainTextResponse(f"Held #{held_id} is not waiting, or is shown whole on its page.", 404)
        disposition = f'attachment; filename="{found[0].filename}"'
        return Response(found[0].attachment, media_type="application/octet-stream",
                        headers={"content-disposition": disposition})  # fmt: skip

    async def decide(request: Request) -> Response:
        if dash.outbox is None or dash.read_only:
            return PlainTextResponse("Read-only: approvals are decided where the daemon runs.", status_code=409)
        held_id, form, decision = (
            int(request.path_params["held_id"]),
            await request.form(),
            request.path_params["decision"],
        )
        if decision not in ("approve", "deny"):
            return PlainTextResponse("Approve or deny.", status_code=404)
        if decision == "approve":
            said = await dash.outbox.approve(held_id, str(form.get("code", "")), by=dash.owner_id)
        else:
            said = await dash.outbox.deny(held_id, by=dash.owner_id)
        log.info("dashboard_decided", held=held_id, decision=decision, result=said[:200])
        return RedirectResponse(f"/approvals?{urlencode({'said': said})}", status_code=303)

    app = Starlette(
        routes=[
            Route("/", home),
            Route("/login", login_form, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/status", status_page),
            Route("/status/events", status_events),
            Route("/memory", memory),
            Route("/approvals", approvals),
            Route("/approvals/{held_id:int}/whole", whole),
            Route("/approvals/{held_id:int}/{decision:str}", decide, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
    )
    return Guarded(app, dash.guard)


class Guarded:
    """The checks every request passes before the app sees it, and the headers every response gets."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await _body(receive) if scope.get("method") == "POST" else b""
        if body is None:
            await PlainTextResponse("Too large.", status_code=413)(scope, receive, send)
            return
        replay = _replay(body, receive)
        refusal = await self._refusal(Request(scope, _replay(body, receive)))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *[(k, v) for k, v in message.get("headers", []) if k.decode().lower() not in HEADERS],
                    *[(k.encode(), v.encode()) for k, v in HEADERS.items()],
                ]
            await send(message)

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
