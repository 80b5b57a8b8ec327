"""What every page module shares: the ``Dashboard`` (the daemon's parts the pages read and act through) and
``Pages`` (rendering a template with what every page needs)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from teleton.text.counts import counted
from teleton.tools.outbox import Outbox
from teleton.web.chats_view import ChatsView
from teleton.web.facts_view import FactsView
from teleton.web.logs_view import LogPlace
from teleton.web.memory_view import MemorySearch
from teleton.web.security import Guard
from teleton.web.throttle import LoginThrottle
from teleton.web.tools_view import ToolsView

HERE = Path(__file__).resolve().parents[1]
LIVE_EVERY_S = 2.0

Status = Callable[[], Awaitable[dict[str, Any]]]


def no_log_file() -> LogPlace:
    return LogPlace(None, "not in a file (logging.file is not set)")


@dataclass(frozen=True)
class Dashboard:
    guard: Guard
    status: Status  # the daemon's state as `teleton status --json` gives it, with rss_bytes and database_bytes
    read_only: bool = False  # `teleton dashboard` without a daemon: pages show, nothing changes
    live_every_s: float = LIVE_EVERY_S
    outbox: Outbox | None = None  # the daemon's: what waits for approval, and the one way to release it
    memory: MemorySearch | None = None  # the daemon's store, searched as any clearance
    owner_id: int | None = None  # who decides, in the held items' records
    tools: ToolsView | None = None  # the daemon's registry, its overrides' store, tool RAG and MCP servers
    logs: Callable[[], LogPlace] = no_log_file  # where this installation's log is, asked per page
    # The login token's file (``dashboard.token``), or "": it is ``web.token`` (whose config file the login page,
    # seen before anyone logs in and perhaps from afar, does not name).
    token_file: str = ""
    chats: ChatsView | None = None  # the daemon's sessions, policy gate and daily logs
    facts_view: FactsView | None = None  # the daemon's fact store, forget and knowledge index, for the Facts page
    throttle: LoginThrottle = field(default_factory=LoginThrottle)  # wrong logins per client, on the real clock


class Pages:
    def __init__(self, dash: Dashboard) -> None:
        self.dash = dash
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True), enable_async=True
        )
        self.templates.filters["counted"] = counted  # {{ n|counted("result") }}: "1 result", "2 results"

    async def render(self, request: Request, name: str, status_code: int = 200, **values: Any) -> HTMLResponse:
        html = await self.templates.get_template(name).render_async(
            csrf=self.dash.guard.csrf, read_only=self.dash.read_only, path=request.url.path, **values
        )
        return HTMLResponse(html, status_code=status_code)
