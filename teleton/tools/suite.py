"""The whole tool suite for one daemon, built from the config: which families exist and with what limits.

    registry = build_registry(config)                        # every tool the config allows
    await ToolConfigStore(db).load(registry)                 # admin overrides from tool_config
    index = ToolIndex(db, embedder, ToolRagSettings.from_config(config.tool_rag))
    await index.sync(registry)                               # re-embeds only changed tools

exec is registered only when ``capabilities.exec.enabled`` (off by default), web_fetch only when
``capabilities.web_fetch.enabled``.
"""

from __future__ import annotations

from typing import Any

from teleton.tools.document_tool import document_tools
from teleton.tools.exec_tool import ExecSettings, exec_tools
from teleton.tools.forget_tool import forget_tools
from teleton.tools.memory_tools import memory_tools
from teleton.tools.registry import Tool, ToolRegistry
from teleton.tools.task_tools import TaskLimits, task_tools
from teleton.tools.telegram_tools import TelegramToolSettings, telegram_tools
from teleton.tools.web_fetch import FetchSettings, web_fetch_tools
from teleton.tools.workspace_tools import workspace_tools


def suite_tools(config: Any, *, fetch_settings: FetchSettings | None = None) -> list[Tool]:
    """Every tool ``config`` (teleton.config.schema.Config) enables."""
    caps = config.capabilities
    tools = [
        *telegram_tools(TelegramToolSettings()),
        *memory_tools(),
        *forget_tools(),
        *document_tools(),
        *workspace_tools(),
        *task_tools(TaskLimits.from_config(config.scheduler)),
    ]
    if caps.web_fetch.enabled:
        tools += web_fetch_tools(fetch_settings or FetchSettings.from_config(caps.web_fetch))
    if caps.exec.enabled:
        tools += exec_tools(ExecSettings.from_config(caps.exec))
    return tools


def build_registry(config: Any, *, fetch_settings: FetchSettings | None = None) -> ToolRegistry:
    return ToolRegistry(suite_tools(config, fetch_settings=fetch_settings))
