"""Every setting Teleton reads, with its default: the whole ``Config``, one section per module beside this one
(``schema_agent``, ``schema_telegram``, ``schema_memory``, ``schema_media``, ``schema_tools``, ``schema_service``),
every name importable from here. ``config.example.yaml`` documents the same keys; a test keeps the two in step.
The defaults' numbers live in those modules (docs/configuration.md) and are read where they are used."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from teleton.config.schema_agent import (
    AgentConfig,
    FallbackConfig,
    PriceConfig,
)
from teleton.config.schema_base import (
    Policy,
    ProviderName,
    Section,
    default,
    yaml_off,
)
from teleton.config.schema_media import (
    MediaConfig,
    SpeechConfig,
    TranscriptionConfig,
)
from teleton.config.schema_memory import (
    EmbeddingConfig,
    MemoryConfig,
    RerankerConfig,
    StorageConfig,
    resolved,
)
from teleton.config.schema_service import (
    BackupConfig,
    BackupKeepConfig,
    HeartbeatConfig,
    LoggingConfig,
    PrivacyConfig,
    SchedulerConfig,
    WebConfig,
    is_local_host,
)
from teleton.config.schema_telegram import (
    TelegramConfig,
    session_file,
)
from teleton.config.schema_tools import (
    MCP_NAME,
    CapabilitiesConfig,
    ExecConfig,
    McpAccess,
    McpConfig,
    McpServerConfig,
    McpToolFilter,
    ToolRagConfig,
    WebFetchConfig,
)

__all__ = [
    "MCP_NAME",
    "AgentConfig",
    "BackupConfig",
    "BackupKeepConfig",
    "CapabilitiesConfig",
    "Config",
    "EmbeddingConfig",
    "ExecConfig",
    "FallbackConfig",
    "HeartbeatConfig",
    "LoggingConfig",
    "McpAccess",
    "McpConfig",
    "McpServerConfig",
    "McpToolFilter",
    "MediaConfig",
    "MemoryConfig",
    "Policy",
    "PriceConfig",
    "PrivacyConfig",
    "ProviderName",
    "RerankerConfig",
    "SchedulerConfig",
    "Section",
    "SpeechConfig",
    "StorageConfig",
    "TelegramConfig",
    "ToolRagConfig",
    "TranscriptionConfig",
    "WebConfig",
    "WebFetchConfig",
    "default",
    "is_local_host",
    "resolved",
    "session_file",
    "yaml_off",
]


class Config(Section):
    agent: AgentConfig = Field(default_factory=AgentConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    tool_rag: ToolRagConfig = Field(default_factory=ToolRagConfig)
    capabilities: CapabilitiesConfig = Field(default_factory=CapabilitiesConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    heartbeat: HeartbeatConfig = Field(default_factory=HeartbeatConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    backup: BackupConfig = Field(default_factory=BackupConfig)
    # Where this config was read from (not a setting).
    source: Path | None = Field(default=None, exclude=True)
