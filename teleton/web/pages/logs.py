"""Logs: the daemon's log file, its last lines and then live (server-sent events), filtered by level."""

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
        level = lowest(request)
        lines, _ = await asyncio.to_thread(tail, dash.log_file, level) if dash.log_file else ([], 0)
        return await pages.render(request, "logs.html", lines=lines, level=level, levels=LEVELS,
                                  log_file=dash.log_file)  # fmt: skip

    async def events(request: Request) -> Response:
        if dash.log_file is None:
            return PlainTextResponse("No log file: the log goes to the journal.", status_code=404)
        path, level = dash.log_file, lowest(request)

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
