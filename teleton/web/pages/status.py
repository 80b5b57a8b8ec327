"""Status: the daemon's record, live (server-sent events)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from teleton.web.pages.common import Pages


def routes(pages: Pages) -> list[Route]:
    dash = pages.dash

    async def status_page(request: Request) -> Response:
        return await pages.render(request, "status.html", status=await dash.status())

    async def status_events(request: Request) -> Response:
        async def events() -> AsyncIterator[str]:
            while not await request.is_disconnected():
                yield f"data: {json.dumps(await dash.status(), default=str)}\n\n"
                await asyncio.sleep(dash.live_every_s)

        return StreamingResponse(events(), media_type="text/event-stream")

    async def home(request: Request) -> Response:
        return RedirectResponse("/status", status_code=303)

    return [Route("/", home), Route("/status", status_page), Route("/status/events", status_events)]
