"""Logging in and out: the token, and the session cookie derived from it; wrong tokens slowed per client
(``throttle.LoginThrottle``)."""

from __future__ import annotations

from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from teleton.web.pages.common import Pages
from teleton.web.security import COOKIE
from teleton.web.throttle import client_key

log = structlog.get_logger(__name__)


def routes(pages: Pages) -> list[Route]:
    guard, throttle = pages.dash.guard, pages.dash.throttle
    where: dict[str, Any] = {"token_file": pages.dash.token_file}

    async def login_form(request: Request) -> Response:
        return await pages.render(request, "login.html", failed=False, **where)

    async def login(request: Request) -> Response:
        form = await request.form()
        client = client_key(request.client.host if request.client else None)
        # From here to the verdict nothing awaits: a burst of parallel guesses is counted one by one, so
        # none of them slips past the wait the one before it set.
        wait = throttle.retry_after(client)
        if wait:  # not checked at all: guessing during the wait gains nothing
            waiting = await pages.render(request, "login.html", status_code=429, failed=False, wait=wait, **where)
            waiting.headers["retry-after"] = str(wait)
            return waiting
        if not guard.token_ok(str(form.get("token", ""))):
            failed = throttle.failed(client)
            log.warning("dashboard_login_refused", client=client, failures=failed.failures)
            if failed.started:  # once per burst, not once per attempt
                log.warning("dashboard_login_throttled", client=client, failures=failed.failures, wait_s=failed.wait_s)
            return await pages.render(request, "login.html", status_code=403, failed=True, **where)
        throttle.succeeded(client)
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
