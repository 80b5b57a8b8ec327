"""The whole tool suite for one daemon, built from the config: which families exist and with what limits.

    registry = build_registry(config)                        # every tool the config allows
    await ToolConfigStore(db).load(registry)                 # admin overrides from tool_config
    index = ToolIndex(db, embedder, ToolRagSettings.from_config(config.tool_rag))
    await index.sync(registry)                               # re-embeds only changed tools

exec is registered only when ``capabilities.exec.enabled`` (off by default), web_fetch only when
``capabilities.web_fetch.enabled``.
"""

from __future__ import annotations

from teleton.config.schema import Config
from teleton.tools.families.documents import document_tools
from teleton.tools.families.exec import ExecSettings, exec_tools
from teleton.tools.families.forget import forget_tools
from teleton.tools.families.memory import memory_tools
from teleton.tools.families.skills import skill_tools
from teleton.tools.families.tasks import TaskLimits, task_tools
from teleton.tools.families.telegram_actions import TelegramToolSettings, telegram_tools
from teleton.tools.families.telegram_chat_tools import chat_tools
from teleton.tools.families.web_fetch import FetchSettings, web_fetch_tools
from teleton.tools.families.workspace import workspace_tools
from teleton.tools.registry import Tool, ToolRegistry


def suite_tools(config: Config, *, fetch_settings: FetchSettings | None = None) -> list[Tool]:
    """Every tool ``config`` (teleton.config.schema.Config) enables."""
    caps = config.capabilities
    tools = [
        *telegram_tools(TelegramToolSettings()),
        *chat_tools(),
        *memory_tools(),
        *forget_tools(),
        *document_tools(),
        *workspace_tools(),
        *task_tools(TaskLimits.from_config(config.scheduler)),
        *skill_tools(),
    ]
    if caps.web_fetch.enabled:
        tools += web_fetch_tools(fetch_settings or FetchSettings.from_config(caps.web_fetch))
    if caps.exec.enabled:
        tools += exec_tools(ExecSettings.from_config(caps.exec))
    return tools


def build_registry(config: Config, *, fetch_settings: FetchSettings | None = None) -> ToolRegistry:
    return ToolRegistry(suite_tools(config, fetch_settings=fetch_settings))
