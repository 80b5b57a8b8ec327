"""Facts: what memory holds about whom, with history; a fact edited, a text forgotten (as `teleton memory
forget`), the knowledge files viewed and edited. The changes are ``FactsView``'s, each the CLI's or the chat's
own operation; under `teleton dashboard` (read-only) every change answers 409."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import structlog
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from teleton.memory.facts.rows import day
from teleton.web.facts_view import FactsView, Refused
from teleton.web.pages.common import Pages

log = structlog.get_logger(__name__)

READ_ONLY = "Read-only: facts and knowledge files are changed where the daemon runs (its dashboard, web.enabled)."


def routes(pages: Pages) -> list[Route]:
    dash = pages.dash

    def changeable() -> FactsView | None:
        return None if dash.read_only else dash.facts_view

    async def facts_page(request: Request, status_code: int = 200, **values: Any) -> Response:
        view, about = dash.facts_view, request.query_params.get("about", "").strip()
        listing = await view.listing(about or None) if view is not None else None
        files = await view.files() if view is not None else []
        values.setdefault("said", request.query_params.get("said", ""))
        return await pages.render(request, "facts.html", status_code, listing=listing, files=files, about=about,
                                  cap=view.cap if view else 0, day=day, **values)  # fmt: skip

    async def facts(request: Request) -> Response:
        return await facts_page(request)

    async def edit(request: Request) -> Response:
        if (view := changeable()) is None:
            return PlainTextResponse(READ_ONLY, status_code=409)
        fact_id, form = int(request.path_params["fact_id"]), await request.form()
        try:
            said = await view.edit(fact_id, str(form.get("value", "")))
        except Refused as exc:
            log.info("dashboard_refused", action="edit", fact=fact_id)
            return await facts_page(request, 400, said=str(exc))
        return RedirectResponse(f"/facts?{urlencode({'said': said})}#facts-list", status_code=303)

    async def forget(request: Request) -> Response:
        """What the text is found in, and a button to erase it: the CLI's question before it erases."""
        if (view := changeable()) is None:
            return PlainTextResponse(READ_ONLY, status_code=409)
        text = str((await request.form()).get("text", ""))
        try:
            preview, found = await view.preview(text)
        except Refused as exc:
            return await facts_page(request, 400, said=str(exc))
        return await facts_page(request, preview=preview, forget_text=text if found else "")

    async def forget_confirmed(request: Request) -> Response:
        if (view := changeable()) is None:
            return PlainTextResponse(READ_ONLY, status_code=409)
        try:
            said = await view.forget(str((await request.form()).get("text", "")))
        except Refused as exc:
            return await facts_page(request, 400, said=str(exc))
        return RedirectResponse(f"/facts?{urlencode({'said': said})}", status_code=303)

    async def file(request: Request) -> Response:
        if dash.facts_view is None:
            return await facts_page(request)
        given = request.query_params.get("path", "MEMORY.md")
        try:
            rel, text = await dash.facts_view.read_file(given)
        except Refused as exc:
            log.info("dashboard_refused", action="read_file")
            return await pages.render(request, "knowledge.html", 400, rel="", text="", said=str(exc))
        return await pages.render(request, "knowledge.html", rel=rel, text=text,
                                  said=request.query_params.get("said", ""))  # fmt: skip

    async def save_file(request: Request) -> Response:
        if (view := changeable()) is None:
            return PlainTextResponse(READ_ONLY, status_code=409)
        form = await request.form()
        given, text = str(form.get("path", "")), str(form.get("text", ""))
        try:
            rel, said = await view.save_file(given, text)
        except Refused as exc:
            log.info("dashboard_refused", action="save_file")
            return await pages.render(request, "knowledge.html", 400, rel="", text="", said=str(exc))
        return RedirectResponse(f"/facts/file?{urlencode({'path': rel, 'said': said})}", status_code=303)

    return [
        Route("/facts", facts),
        Route("/facts/{fact_id:int}/edit", edit, methods=["POST"]),
        Route("/facts/forget", forget, methods=["POST"]),
        Route("/facts/forget/confirm", forget_confirmed, methods=["POST"]),
        Route("/facts/file", file),
        Route("/facts/file", save_file, methods=["POST"]),
    ]
