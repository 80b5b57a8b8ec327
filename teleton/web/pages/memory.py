"""Memory: one search over every layer, each hit with why it ranked, as any chat."""

from __future__ import annotations

import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from teleton.web.pages.common import Pages

log = structlog.get_logger(__name__)


def routes(pages: Pages) -> list[Route]:
    dash = pages.dash

    async def memory(request: Request) -> Response:
        text, as_raw = request.query_params.get("q", "").strip(), request.query_params.get("as", "")
        as_chat = int(as_raw) if as_raw.lstrip("-").isdigit() else None
        found = await dash.memory.search(text, as_chat) if dash.memory is not None and text else []
        chats = await dash.memory.chats() if dash.memory is not None else []
        if text:
            log.info("dashboard_memory_search", as_chat=as_chat, hits=len(found))
        return await pages.render(request, "memory.html", q=text, as_chat=as_chat, found=found, chats=chats,
                                  searchable=dash.memory is not None)  # fmt: skip

    return [Route("/memory", memory)]
