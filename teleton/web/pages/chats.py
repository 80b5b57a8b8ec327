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
        chat_id = int(request.path_params["chat_id"])
        session, messages = await dash.chats.session(chat_id) if dash.chats is not None else (None, [])
        return await pages.render(request, "chat.html", chat_id=chat_id, session=session, messages=messages)

    return [Route("/chats", chats), Route("/chats/{chat_id:int}", chat)]
