"""The daemon's own sections: the dashboard (``web``), ``privacy``, ``scheduler``, ``heartbeat``, ``logging``
and ``backup``."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from teleton.config.schema_base import Section, yaml_off


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
        return yaml_off(value)

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
