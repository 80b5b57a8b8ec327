"""Every setting Teleton reads, with its default. ``config.example.yaml`` documents the same keys; a test
keeps the two in step. The defaults' numbers live here (docs/configuration.md) and are read where they are used."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from teleton.config.presets import PRESETS

Policy = Literal["open", "allowlist", "admin-only", "disabled"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def default(section: type[Section], name: str) -> Any:
    """The schema's default for one setting: what a module's own dataclass defaults to, so the number has
    one home (a test builds every such dataclass and compares)."""
    return section.model_fields[name].default


# The names of teleton.config.presets.PRESETS (a test keeps the two in step).
ProviderName = Literal[
    "anthropic", "openai", "openrouter", "groq", "deepseek", "mistral", "together", "xai", "gemini",
    "ollama", "vllm", "lmstudio", "llamacpp", "openai_compatible",
]  # fmt: skip


class FallbackConfig(Section):
    """One provider of the failover chain; unset base_url / api_key come from its preset."""

    provider: ProviderName
    model: str
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)


class PriceConfig(Section):
    """US dollars per 1M tokens: overrides the preset's price (teleton.llm.prices)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(default=0.0, ge=0)
    # A prompt-cache write; None: the provider's rule (Anthropic: 1.25x input for 5m, 2x for 1h; others: input).
    cache_write: float | None = Field(default=None, ge=0)


class AgentConfig(Section):
    # Unset keys come from the provider's preset: base_url, the key's variable, context_window.
    provider: ProviderName = "anthropic"
    supports_tools: bool | None = None  # None: the preset's word
    api_key: str | None = Field(default=None, repr=False)
    base_url: str | None = None
    model: str = "claude-sonnet-4-5"
    utility_model: str = "claude-haiku-4-5"
    # The utility model's own provider (None: agent.provider's); its URL and key resolve through the same presets.
    utility_provider: ProviderName | None = None
    utility_base_url: str | None = None
    utility_api_key: str | None = Field(default=None, repr=False)
    # Tried in order when the main provider is still down after its retries; the primary again after the cool-down.
    fallbacks: list[FallbackConfig] = Field(default_factory=list)
    failover_retry_s: float = Field(default=60.0, gt=0)
    price_per_mtok: PriceConfig | None = None  # None: the preset's price for the model, where known
    max_tokens: int = Field(default=4096, ge=1)
    temperature: float = Field(default=0.7, ge=0.0, le=1.0)
    max_iterations: int = Field(default=10, ge=1)
    tool_timeout_s: float = Field(default=90.0, gt=0)
    tool_output_cap: int = Field(default=50_000, ge=1000)
    # A longer message is kept whole in the archive and the workspace; the model gets its head and tail.
    max_input_chars: int = Field(default=20_000, ge=1000)
    context_window: int = Field(default=200_000, ge=1000)
    request_timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=10, ge=0)
    retry_max_delay_s: float = Field(default=60.0, gt=0)
    # A user whose answer takes longer gets one short notice first (0: never); scheduled turns never do.
    slow_notice_s: float = Field(default=20.0, ge=0)
    # How long the provider keeps the prompt cache (Anthropic's two: 5 minutes, or 1 hour at twice the write price).
    cache_ttl: Literal["5m", "1h"] = "5m"

    @model_validator(mode="before")
    @classmethod
    def _preset_window(cls, data: object) -> object:
        """An unset (or null) context_window is the provider preset's: compaction thresholds derive from it."""
        if isinstance(data, dict) and data.get("context_window") is None:
            known = PRESETS.get(str(data.get("provider", "anthropic")))
            if known is not None:  # an unknown name is reported by the field's own check
                data = {**data, "context_window": known.context_window}
        return data


def session_file(path: Path | str) -> Path:
    """The file Telethon's SQLite session writes for ``telegram.session_path`` (it appends '.session' when
    missing): what the gateway opens, the doctor checks and the private-file check narrows."""
    p = Path(path).expanduser()
    return p if p.suffix == ".session" else p.with_name(p.name + ".session")


class TelegramConfig(Section):
    mode: Literal["user", "bot"] = "user"
    api_id: int | None = None
    api_hash: str | None = Field(default=None, repr=False)
    phone: str | None = Field(default=None, repr=False)
    bot_token: str | None = Field(default=None, repr=False)
    session_path: Path | None = None
    owner_id: int | None = None
    admin_ids: list[int] = Field(default_factory=list)
    dm_policy: Policy = "allowlist"
    group_policy: Policy = "allowlist"
    allow_from: list[int | str] = Field(default_factory=list)
    group_allow_from: list[int] = Field(default_factory=list)
    require_mention: bool = True
    rate_limit_per_chat: int = Field(default=20, ge=1)
    rate_limit_global: int = Field(default=60, ge=1)
    debounce_ms: int = Field(default=1500, ge=0)
    debounce_max_factor: int = Field(default=3, ge=1)
    debounce_max_messages: int = Field(default=20, ge=1)
    flood_wait_max_s: int = Field(default=600, ge=0)
    reconnect_max_delay_s: int = Field(default=300, ge=1)
    typing_indicator: bool = True
    recovery_window_minutes: int = Field(default=30, ge=0)
    deleted_messages: Literal["keep", "erase"] = "keep"
    stream_edits: bool = True  # a private chat's answer shown as it is written (one message, edited)
    # A message edited (or deleted) within this many minutes of its answer is answered again, the reply edited
    # in place (or the reply deleted): 0 turns both off. At most Telegram's 48-hour edit limit.
    reanswer_edit_minutes: float = Field(default=5, ge=0, le=2880)
    delete_replies: Literal["dm", "all", "off"] = "dm"  # where a deleted question takes its answer with it


class EmbeddingConfig(Section):
    provider: Literal["local", "anthropic", "openai_compatible", "none"] = "local"
    model: str | None = None  # local: None = the default packaged model (model_files.DEFAULT_MODEL_ID)
    model_path: Path | None = None
    preset: ProviderName | None = None  # openai_compatible: a named server (ollama, openai...) for URL and key
    base_url: str | None = None  # openai_compatible: the server's URL (overrides the preset's)
    api_key: str | None = Field(default=None, repr=False)  # openai_compatible: else the preset's key variable
    voyage_api_key: str | None = Field(default=None, repr=False)
    voyage_model: str = "voyage-3.5-lite"
    batch_size: int = Field(default=64, ge=1)
    cache_ttl_days: int = Field(default=60, ge=1)
    cache_max_entries: int = Field(default=50_000, ge=100)
    # Put before each question / each text stored (local and openai_compatible); None = the known model's own
    # (memory.embeddings.prompts: e5 "query: " / "passage: "), else none; "" = none. A change re-embeds.
    query_prompt: str | None = None
    document_prompt: str | None = None


class TranscriptionConfig(Section):
    """Who turns voice notes, audio and video notes into text."""

    provider: Literal["local", "telegram", "openai_compatible", "off"] = "local"
    model: str | None = None  # local: null = the packaged model; openai_compatible: e.g. whisper-1
    model_path: Path | None = None  # local: a directory with the model's files instead
    preset: ProviderName | None = None  # openai_compatible: a named server for URL and key (openai, groq...)
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)


class SpeechConfig(Section):
    """Voice replies (off unless media.voice_replies is on): eSpeak NG on this machine, or an OpenAI-compatible
    /audio/speech endpoint."""

    provider: Literal["local", "openai_compatible"] = "local"
    preset: ProviderName | None = "openai"
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    model: str = "gpt-4o-mini-tts"
    voice: str = "alloy"


class MediaConfig(Section):
    """Photos, voice notes and documents sent to the agent: read, described, archived (issue 17)."""

    enabled: bool = True
    describe_all: bool = False  # also describe/transcribe media in groups that did not address the agent (cost)
    max_image_mb: float = Field(default=10, gt=0)  # a larger file is never downloaded
    max_audio_mb: float = Field(default=25, gt=0)
    max_document_mb: float = Field(default=20, gt=0)
    max_audio_minutes: float = Field(default=30, gt=0)
    image_max_side: int = Field(default=1568, ge=64)  # pixels: images are downscaled to this before the model
    document_excerpt_chars: int = Field(default=4000, ge=200)  # what the model reads of a document at first
    retention_days: int = Field(default=30, ge=0)  # downloaded media older than this is deleted; 0 = keep
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)
    voice_replies: Literal["off", "when_spoken_to", "always"] = "off"
    speech: SpeechConfig = Field(default_factory=SpeechConfig)

    @field_validator("voice_replies", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        return "off" if value is False else value  # YAML 1.1 reads a bare `off` as false


class StorageConfig(Section):
    data_dir: Path = Path("~/.teleton")
    database: Path | None = None
    workspace: Path | None = None
    history_limit: int = Field(default=100, ge=1)

    @property
    def database_file(self) -> Path:
        """``database`` as loading resolved it (``data_dir``/teleton.db when unset)."""
        return resolved(self.database, "storage.database")

    @property
    def workspace_dir(self) -> Path:
        """``workspace`` as loading resolved it (``data_dir``/workspace when unset)."""
        return resolved(self.workspace, "storage.workspace")

    @property
    def chat_history_file(self) -> Path:
        """What was typed in `teleton chat` (prompt_toolkit's input history): kept private, scrubbed by forget."""
        return self.data_dir / "chat_history"


def resolved(path: Path | None, name: str) -> Path:
    """A path the loader fills in when the config leaves it unset."""
    if path is None:
        raise ValueError(f"{name} is resolved when the config is loaded")
    return path


class RerankerConfig(Section):
    """A second look at the best fused candidates of a memory search (issue 37; docs/memory.md, Reranking).

    ``cross_encoder``: an ONNX cross-encoder (query and text in, one relevance logit out) with a
    ``tokenizer.json``, from ``model_path`` or a Hugging Face id in ``model`` that ``teleton setup`` downloads;
    ``sha256`` pins its files (file name -> sum), and a download without pins records the sums it fetched.
    """

    kind: Literal["off", "cross_encoder"] = "off"
    model: str | None = None
    model_path: Path | None = None
    sha256: dict[str, str] = Field(default_factory=dict)
    candidates: int = Field(default=50, ge=1, le=500)


class MemoryConfig(Section):
    chunk_target: int = Field(default=500, ge=50)
    chunk_max: int = Field(default=1000, ge=100)
    vector_candidates: int = Field(default=30, ge=1)
    result_limit: int = Field(default=10, ge=1)
    min_score: float = Field(default=0.15, ge=0.0, le=1.0)
    # null: the embedding model's own (memory.embeddings.model_files.search_weights); the other is 1 - it
    vector_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    keyword_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    context_recent: int = Field(default=10, ge=0)
    context_knowledge: int = Field(default=5, ge=0)
    context_feed: int = Field(default=5, ge=0)
    masking_keep: int = Field(default=10, ge=0)
    # Old results are masked in steps: down to masking_keep once masking_keep + masking_step are held, so
    # between steps every request extends the last one's prefix and the prompt cache serves it.
    masking_step: int = Field(default=10, ge=1)
    soft_threshold: float = Field(default=0.5, gt=0.0, lt=1.0)
    hard_threshold: float = Field(default=0.75, gt=0.0, le=1.0)
    hard_max_messages: int = Field(default=200, ge=10)
    keep_last: int = Field(default=20, ge=1)
    daily_log_lines: int = Field(default=100, ge=0)
    prompt_budget_tokens: int = Field(default=3000, ge=0)
    prompt_stable_share: float = Field(default=0.5, ge=0.0, le=1.0)
    session_reset_hour: int | None = Field(default=4, ge=0, le=23)
    session_idle_minutes: int | None = Field(default=720, ge=1)
    salience_threshold: float = Field(default=0.85, ge=0.0, le=1.0)
    recency_half_life_days: float = Field(default=30.0, gt=0)
    distill: bool = True
    consolidation_interval_hours: float = Field(default=6.0, gt=0)
    watch_debounce_ms: int = Field(default=500, ge=0)
    max_file_bytes: int = Field(default=2_000_000, ge=1000)
    large_files: Literal["index", "skip"] = "index"
    reranker: RerankerConfig = Field(default_factory=RerankerConfig)


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


def is_local_host(host: str) -> bool:
    """Whether ``host`` (an address to listen on) is this machine alone."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebConfig(Section):
    """The dashboard (``teleton/web``; the ``web`` extra): off by default, on this machine only by default."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)  # 0: any free port (tests)
    token: str | None = Field(default=None, repr=False)  # the login; `teleton dashboard` writes one when unset
    trusted_hosts: list[str] = Field(default_factory=list)  # Host names a reverse proxy forwards, besides ours

    @model_validator(mode="after")
    def _token_beyond_this_machine(self) -> WebConfig:
        if not self.enabled or is_local_host(self.host):
            return self  # on this machine alone any token (or the data dir's token file) will do
        if not self.token:
            raise ValueError(
                f"host {self.host} can be reached from other machines: set web.token (anyone reaching the port "
                "would read the owner's memory), or listen on 127.0.0.1 behind a reverse proxy"
            )
        # Guessing strength, estimated plainly: length x log2 of the alphabets its characters come from (digits
        # 10, lowercase 26, uppercase 26, anything else 33); any 128 characters are past 128 bits already.
        token = self.token[:128]
        kinds = {"0" if "0" <= c <= "9" else "a" if "a" <= c <= "z" else "A" if "A" <= c <= "Z" else "." for c in token}
        bits = (sum({"0": 10, "a": 26, "A": 26, ".": 33}[kind] for kind in kinds) ** len(token)).bit_length() - 1
        if bits < 128:
            raise ValueError(
                f"web.token is too weak for host {self.host}, which other machines can reach (about {bits} bits, "
                "128 needed): make one with python3 -c 'import secrets; print(secrets.token_urlsafe(32))', "
                "or listen on 127.0.0.1"
            )
        return self


class PrivacyConfig(Section):
    cross_chat_sends: Literal["approve", "deny", "allow"] = "approve"
    approval_expiry_minutes: int = Field(default=60, ge=1)
    shared_paths: list[str] = Field(default_factory=list)
    strip_invisible: bool = True


class SchedulerConfig(Section):
    max_active_per_chat: int = Field(default=20, ge=1)
    max_active_per_user: int = Field(default=10, ge=1)
    min_repeat_minutes: int = Field(default=60, ge=1)


class HeartbeatConfig(Section):
    enabled: bool = False
    interval_minutes: int = Field(default=30, ge=1)


class LoggingConfig(Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "console", "json"] = "auto"
    file: Path | None = None
    max_file_mb: float = Field(default=20.0, gt=0)  # the file rotates past this size
    backup_count: int = Field(default=5, ge=0)  # rotated files kept (file.1 … file.N); 0: the file is emptied


class BackupKeepConfig(Section):
    daily: int = Field(default=7, ge=0)  # the newest backup of each of the last N days with one
    weekly: int = Field(default=4, ge=0)  # and of each of the last M weeks beyond those


class BackupConfig(Section):
    """``teleton backup`` and the daemon's scheduled backups (docs/operations.md, Backup and restore)."""

    every: Literal["off", "hourly", "daily", "weekly"] = "off"
    at: str = "04:00"  # local time of a daily or weekly backup (weekly: on Sundays)
    dir: Path | None = None  # null: <data_dir>/backups; another disk outlives this one
    keep: BackupKeepConfig = Field(default_factory=BackupKeepConfig)
    vectors: bool = True  # false: archives without embeddings (smaller; rebuilt after a restore)
    secrets: bool = True  # false: without the Telegram session and the config's keys
    passphrase_env: str | None = None  # the environment variable holding a passphrase: archives are encrypted
    key_file: Path | None = None  # or a file of at least 32 random bytes as the key

    @field_validator("every", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        return "off" if value is False else value  # YAML 1.1 reads a bare `off` as false

    @field_validator("at")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", value):
            raise ValueError(f"at: a time of day as HH:MM, 24-hour (e.g. 04:00), not {value!r}")
        return value

    @model_validator(mode="after")
    def _one_key(self) -> BackupConfig:
        if self.passphrase_env and self.key_file:
            raise ValueError("give passphrase_env or key_file, not both")
        return self


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
