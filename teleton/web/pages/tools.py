"""Tools: every tool with its state and scope, changed through the same command as ``/tool``; which tools
tool RAG would offer for a test message in a chat of a given kind; the MCP servers and what waits."""

from __future__ import annotations

from urllib.parse import urlencode

import structlog
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from teleton.web.pages.common import Pages
from teleton.web.tools_view import KINDS, ToolsView

log = structlog.get_logger(__name__)

ACTIONS = ("enable", "disable", "reset")


def routes(pages: Pages) -> list[Route]:
    dash = pages.dash

    async def tools(request: Request) -> Response:
        view: ToolsView | None = dash.tools
        message, kind = request.query_params.get("message", "").strip(), request.query_params.get("kind", "owner")
        kind = kind if kind in KINDS else "owner"
        picks = await view.picks(message, kind) if view is not None and message else []
        return await pages.render(
            request,
            "tools.html",
            rows=view.rows() if view else [],
            mcp=await view.servers() if view else {},
            rule=view.rule if view else "",
            source=view.source if view else "",
            message=message,
            kind=kind,
            picks=picks,
            said=request.query_params.get("said", ""),
            available=view is not None,
        )

    async def change(request: Request) -> Response:
        view: ToolsView | None = dash.tools
        action, name = request.path_params["action"], request.path_params["name"]
        if view is None or dash.read_only:
            return PlainTextResponse("Read-only: tools are changed where the daemon runs.", status_code=409)
        if action not in ACTIONS:
            return PlainTextResponse("enable, disable or reset", status_code=404)
        said = await view.change(action, name)
        log.info("dashboard_tool_changed", tool=name, action=action)
        return RedirectResponse(f"/tools?{urlencode({'said': said})}", status_code=303)

    return [Route("/tools", tools), Route("/tools/{name:str}/{action:str}", change, methods=["POST"])]
