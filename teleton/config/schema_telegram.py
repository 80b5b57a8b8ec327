"""The ``telegram`` section: the account, who the agent answers, rate limits, streaming and re-answers."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from teleton.config.schema_base import Policy, Section


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
