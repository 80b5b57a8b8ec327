"""Logs: where this installation's log is and, when it is a file, its last lines and then live (server-sent
events), filtered by level."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import asdict

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from teleton.web.logs_view import LEVELS, since, tail
from teleton.web.pages.common import Pages

FOLLOW_EVERY_S = 1.0


def routes(pages: Pages) -> list[Route]:
    dash = pages.dash

    def lowest(request: Request) -> str:
        level = request.query_params.get("level", "info")
        return level if level in LEVELS else "info"

    async def logs(request: Request) -> Response:
        level, place = lowest(request), await asyncio.to_thread(dash.logs)
        lines, _ = await asyncio.to_thread(tail, place.file, level) if place.file else ([], 0)
        return await pages.render(request, "logs.html", lines=lines, level=level, levels=LEVELS,
                                  log_file=place.file, said=place.said)  # fmt: skip

    async def events(request: Request) -> Response:
        place = await asyncio.to_thread(dash.logs)
        if place.file is None:
            return PlainTextResponse(f"No log file to follow: the log is {place.said}.", status_code=404)
        path, level = place.file, lowest(request)

        _, start = await asyncio.to_thread(tail, path, level, 0)  # before the answer starts: nothing is missed

        async def follow() -> AsyncIterator[str]:
            offset = start
            while not await request.is_disconnected():
                lines, offset = await asyncio.to_thread(since, path, offset, level)
                for line in lines:
                    yield f"data: {json.dumps(asdict(line))}\n\n"
                await asyncio.sleep(FOLLOW_EVERY_S)

        return StreamingResponse(follow(), media_type="text/event-stream")

    return [Route("/logs", logs), Route("/logs/events", events)]
