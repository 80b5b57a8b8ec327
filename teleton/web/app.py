"""The dashboard as an ASGI app (Starlette, Jinja2 templates from the package, no JavaScript build step).

    app = build_app(Dashboard(guard, status, outbox=..., memory=...))
    server = WebServer(app, listen("127.0.0.1", 8765)); server.start()   # teleton.web.server

Every request passes ``guard.Guarded`` first: a foreign Host is refused (400), a page without the session
cookie goes to the login page, a POST needs our own origin and, once logged in, the form's CSRF token. What
the pages show and change goes through the parts ``Dashboard`` holds (the daemon's own outbox, store and
status): the web layer has no second way to read or write anything. One module per page in ``pages/``.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from teleton.web import skills_view
from teleton.web.guard import Guarded
from teleton.web.pages import approvals, chats, facts, login, logs, memory, status, tools
from teleton.web.pages.common import HERE, Dashboard, Pages

__all__ = ["Dashboard", "build_app"]

PAGES = (login, status, memory, facts, approvals, chats, tools, skills_view, logs)  # in the order of the navigation


def build_app(dash: Dashboard) -> ASGIApp:
    pages = Pages(dash)
    routes = [route for page in PAGES for route in page.routes(pages)]
    app = Starlette(routes=[*routes, Mount("/static", StaticFiles(directory=HERE / "static"), name="static")])
    return Guarded(app, dash.guard)
