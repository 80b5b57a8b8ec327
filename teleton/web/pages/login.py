"""Logging in and out: the token, and the session cookie derived from it."""

from __future__ import annotations

import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from teleton.web.pages.common import Pages
from teleton.web.security import COOKIE

log = structlog.get_logger(__name__)


def routes(pages: Pages) -> list[Route]:
    guard = pages.dash.guard

    async def login_form(request: Request) -> Response:
        return await pages.render(request, "login.html", failed=False)

    async def login(request: Request) -> Response:
        form = await request.form()
        client = request.client.host if request.client else None
        if not guard.token_ok(str(form.get("token", ""))):
            log.warning("dashboard_login_refused", client=client)
            return await pages.render(request, "login.html", status_code=403, failed=True)
        log.info("dashboard_login", client=client)
        response = RedirectResponse("/status", status_code=303)
        secure = request.url.scheme == "https"
        response.set_cookie(COOKIE, guard.session, httponly=True, samesite="strict", secure=secure, path="/")
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    return [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
