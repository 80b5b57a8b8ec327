"""Chats and sessions: who the agent answers, each chat's session, and one chat as the model sees it."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from teleton.web.pages.common import Pages


def routes(pages: Pages) -> list[Route]:
    dash = pages.dash

    async def chats(request: Request) -> Response:
        view = dash.chats
        if view is None:
            return await pages.render(request, "chats.html", available=False)
        return await pages.render(request, "chats.html", available=True, rows=await view.rows(),
                                  policy=view.describe_policy(), today=await view.today())  # fmt: skip

    async def chat(request: Request) -> Response:
        chat_raw = str(request.path_params["chat_id"])
        if not chat_raw.lstrip("-").isdigit():
            return Response("Not Found", status_code=404)
        chat_id = int(chat_raw)  # a group's id is negative: Starlette's int convertor takes none
        raw = request.query_params.get("topic", "0")
        topic = int(raw) if raw.isdigit() else 0
        session, messages = await dash.chats.session(chat_id, topic) if dash.chats is not None else (None, [])
        return await pages.render(request, "chat.html", chat_id=chat_id, topic=topic, session=session,
                                  messages=messages)  # fmt: skip

    return [Route("/chats", chats), Route("/chats/{chat_id}", chat)]
