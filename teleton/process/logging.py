"""Logging set-up: structlog everywhere, readable key=value in a terminal, JSON lines otherwise.

Standard-library loggers (Telethon, httpx, httpx2, anthropic) are routed through the same processors, so
their records are redacted (``redaction.redact_event``: one rule for every logger) and formatted like ours.
The log file rotates by size and every file of it is 0600. Logs never go to stdout: it holds a command's
output. The CLI commands other than ``start`` show people one short line per warning or error ("human"); the
daemon keeps the format its config names (journald reads its stderr).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import stat
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Literal, TextIO

import structlog

from teleton.config.schema import LoggingConfig, default
from teleton.process.redaction import redact_event

Format = Literal["auto", "console", "json", "human"]
HUMAN_MAX_CHARS = 300  # a terminal line, not a record: the full record is in the log file, when there is one
_HIDDEN = frozenset({"event", "level", "logger", "timestamp", "exc_info", "stack"})
MB = 1024 * 1024
# Chatty at INFO: Telethon about connections, httpx/httpx2 (the MCP SDK's client) a line per request with its
# full URL; their warnings still come through.
QUIET_LOGGERS = ("telethon", "httpx", "httpx2", "httpcore", "httpcore2")


def render_human(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> str:
    """``warning: embeddings unavailable (error=...)``: one line for people, no timestamp, no traceback."""
    event = str(event_dict.get("event", "")).replace("_", " ")
    details = [f"{k}={v}" for k, v in event_dict.items() if k not in _HIDDEN and k != "exception"]
    exception = str(event_dict.get("exception") or "").strip()
    if exception:  # a traceback's last line names the error; the frames are for the log file
        details.append(exception.splitlines()[-1])
    line = f"{event_dict.get('level', 'info')}: {event}" + (f" ({', '.join(details)})" if details else "")
    line = " ".join(line.split())
    return line if len(line) <= HUMAN_MAX_CHARS else line[: HUMAN_MAX_CHARS - 1] + "…"


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record comes: under prompt_toolkit's ``patch_stdout`` that
    is a proxy printing above the prompt (not over it), under a test runner its capture."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass  # always the current sys.stderr


def _renderer(fmt: Format, stream: TextIO) -> structlog.types.Processor:
    if fmt == "human":
        return render_human
    use_console = fmt == "console" or (fmt == "auto" and stream.isatty())
    if use_console:
        return structlog.dev.ConsoleRenderer(colors=stream.isatty())
    return structlog.processors.JSONRenderer()


def configure_logging(
    level: str = "info",
    fmt: Format = "auto",
    file: Path | None = None,
    stream: TextIO | None = None,
    *,
    stream_level: str | None = None,
    max_file_mb: float = default(LoggingConfig, "max_file_mb"),
    backup_count: int = default(LoggingConfig, "backup_count"),
) -> None:
    """Configure structlog and the stdlib root logger. Safe to call again (e.g. on SIGHUP).

    ``stream`` defaults to the current stderr, ``stream_level`` raises the bar for it only (``teleton chat``
    keeps info for its file and shows nothing but errors between the answers); ``fmt`` applies to the stream,
    the file is always JSON lines, rotated past ``max_file_mb`` with ``backup_count`` older files kept."""
    handler: logging.Handler = StderrHandler() if stream is None else logging.StreamHandler(stream)
    stream = stream or sys.stderr
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        redact_event,
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handlers: list[logging.Handler] = [handler]
    if stream_level is not None:
        handlers[0].setLevel(stream_level.upper())
    formatters = [_renderer(fmt, stream)]
    if file is not None:
        handlers.append(PrivateRotatingFileHandler(file, max_bytes=int(max_file_mb * MB), backup_count=backup_count))
        formatters.append(structlog.processors.JSONRenderer())
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        if isinstance(handler, PrivateRotatingFileHandler):  # ours: its descriptor would stay open per SIGHUP
            handler.close()
    for handler, renderer in zip(handlers, formatters, strict=True):
        handler.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                foreign_pre_chain=shared,
                processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            )
        )
        root.addHandler(handler)
    root.setLevel(level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))


def configure_from(cfg: LoggingConfig) -> None:
    """``configure_logging`` as the config's ``logging`` section says (the daemon, at start and on SIGHUP)."""
    configure_logging(cfg.level, cfg.format, cfg.file, max_file_mb=cfg.max_file_mb, backup_count=cfg.backup_count)


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """The log file, rotated by size (``file.1`` … ``file.N``), every one of them 0600.

    The live file is made private before it is opened (``_create_private``); a rotated file is the live one
    renamed, so it keeps that mode. The size is the file's own (``fstat``): nothing is formatted twice, and
    another process writing the same file (``teleton chat`` beside the daemon) is counted; when that process
    has rotated it, this one follows to the new file rather than growing the old one."""

    def __init__(self, file: Path, *, max_bytes: int, backup_count: int) -> None:
        super().__init__(file, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8")

    def _open(self) -> Any:
        _create_private(Path(self.baseFilename))
        return super()._open()

    def shouldRollover(self, record: logging.LogRecord) -> bool:
        if self.stream is None:
            self.stream = self._open()
        live = os.fstat(self.stream.fileno())
        try:
            here: os.stat_result | None = os.stat(self.baseFilename)
        except FileNotFoundError:
            here = None
        if here is None or not os.path.samestat(here, live):  # rotated or removed under us
            self.stream.close()
            self.stream = self._open()
            live = os.fstat(self.stream.fileno())
        # A FIFO or /dev/stderr named as the log file is never rotated (as the stdlib's own check).
        return self.maxBytes > 0 and stat.S_ISREG(live.st_mode) and live.st_size >= self.maxBytes

    def doRollover(self) -> None:
        if self.backupCount > 0:
            super().doRollover()
            return
        # The stdlib keeps appending when no backups are kept: the full file is emptied instead.
        if self.stream is not None:
            self.stream.close()
            self.stream = None
        os.truncate(self.baseFilename, 0)
        self.stream = self._open()


def _create_private(file: Path) -> None:
    """The log file 0600 (its missing folders 0700) before ``FileHandler`` opens it with the umask's mode: it
    holds what was said. Here rather than storage's private-file helpers: logging sits below storage."""
    for folder in reversed([p for p in (file.parent, *file.parent.parents) if not p.exists()]):
        folder.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing log, created wider before
    except PermissionError:  # someone else's file this user may append to: its mode is theirs to set
        pass
    finally:
        os.close(fd)
