"""The ``tool_rag``, ``capabilities`` and ``mcp`` sections: which tools a session is offered, exec and
web_fetch, outside tool servers."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from teleton.config.schema_base import Section


class ToolRagConfig(Section):
    enabled: bool = True
    # Which of our own tools a session is offered: "all" it may use (the list never changes within a session,
    # so the prompt cache serves it), or "picked": the union of tool RAG's picks for its messages (fewer tokens,
    # but each new pick changes the list and the cache misses everything after it). docs/tools.md
    session_tools: Literal["all", "picked"] = "all"
    top_k: int = Field(default=25, ge=1)
    vector_weight: float = Field(default=0.6, ge=0.0, le=1.0)
    keyword_weight: float = Field(default=0.4, ge=0.0, le=1.0)
    always_include: list[str] = Field(default_factory=lambda: ["send_message", "reply", "memory_search"])


class ExecConfig(Section):
    enabled: bool = False
    timeout_s: float = Field(default=60.0, gt=0)
    output_cap: int = Field(default=20_000, ge=100)


class WebFetchConfig(Section):
    enabled: bool = True
    timeout_s: float = Field(default=20.0, gt=0)
    max_bytes: int = Field(default=2_000_000, ge=1000)


class CapabilitiesConfig(Section):
    exec: ExecConfig = Field(default_factory=ExecConfig)
    web_fetch: WebFetchConfig = Field(default_factory=WebFetchConfig)


McpAccess = Literal["owner", "admins", "everyone"]
MCP_NAME = r"^[a-z][a-z0-9_]{0,19}$"  # short: tool names mcp_<server>_<tool> must stay within 64 characters


class McpToolFilter(Section):
    include: list[str] = Field(default_factory=list)  # empty: every tool the server lists
    exclude: list[str] = Field(default_factory=list)


class McpServerConfig(Section):
    """One MCP server: a command to start (stdio) or a URL (Streamable HTTP, or SSE for older servers)."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    url: str | None = None
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    timeout_s: float = Field(default=120.0, gt=0)
    connect_timeout_s: float = Field(default=60.0, gt=0)
    tools: McpToolFilter = Field(default_factory=McpToolFilter)
    enabled: bool = True
    access: McpAccess = "owner"
    label: Literal["owner", "public"] = "owner"
    read_only: bool = False

    @model_validator(mode="after")
    def _one_way_in(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a program to start) or url (a server to reach), not both")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, not {self.url[:40]!r}")
        if self.access != "owner" and self.label == "owner":
            raise ValueError(f"access {self.access!r} needs label: public (its results are the owner's otherwise)")
        return self


class McpConfig(Section):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    max_tools_per_server: int = Field(default=64, ge=1)  # a server listing more has the rest left out
    max_tools: int = Field(default=256, ge=1)  # all servers together
    max_offered: int = Field(default=8, ge=0)  # outside tools in one request, the best ranked for the message

    @field_validator("servers")
    @classmethod
    def _names(cls, servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in servers:
            if not re.match(MCP_NAME, name):
                raise ValueError(f"server name {name!r}: lowercase letters, digits and _, at most 20, a letter first")
        return servers
