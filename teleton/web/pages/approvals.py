"""Approvals: what waits, with its notice as the owner's DM shows it; approved or denied through the outbox."""

from __future__ import annotations

from urllib.parse import urlencode

import structlog
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from teleton.web.pages.common import Pages

log = structlog.get_logger(__name__)


def routes(pages: Pages) -> list[Route]:
    dash = pages.dash

    async def approvals(request: Request) -> Response:
        waiting = [] if dash.outbox is None else await dash.outbox.waiting()
        return await pages.render(request, "approvals.html", waiting=waiting, said=request.query_params.get("said", ""))

    async def whole(request: Request) -> Response:
        held_id = int(request.path_params["held_id"])
        found = [n for item, n in (await dash.outbox.waiting() if dash.outbox else []) if item.id == held_id]
        if not found or found[0].attachment is None:
            return PlainTextResponse(f"Held #{held_id} is not waiting, or is shown whole on its page.", 404)
        disposition = f'attachment; filename="{found[0].filename}"'
        return Response(found[0].attachment, media_type="application/octet-stream",
                        headers={"content-disposition": disposition})  # fmt: skip

    async def decide(request: Request) -> Response:
        if dash.outbox is None or dash.read_only:
            return PlainTextResponse("Read-only: approvals are decided where the daemon runs.", status_code=409)
        held_id, form, decision = (
            int(request.path_params["held_id"]),
            await request.form(),
            request.path_params["decision"],
        )
        if decision not in ("approve", "deny"):
            return PlainTextResponse("Approve or deny.", status_code=404)
        if decision == "approve":
            said = await dash.outbox.approve(held_id, str(form.get("code", "")), by=dash.owner_id)
        else:
            said = await dash.outbox.deny(held_id, by=dash.owner_id)
        log.info("dashboard_decided", held=held_id, decision=decision, result=said[:200])
        return RedirectResponse(f"/approvals?{urlencode({'said': said})}", status_code=303)

    return [
        Route("/approvals", approvals),
        Route("/approvals/{held_id:int}/whole", whole),
        Route("/approvals/{held_id:int}/{decision:str}", decide, methods=["POST"]),
    ]
