"""Logging set-up: structlog everywhere, readable key=value in a terminal, JSON lines otherwise.

Standard-library loggers (Telethon, httpx, anthropic) are routed through the same processors, so their
records are redacted and formatted like ours.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Literal, TextIO

import structlog

from teleton.process.redaction import redact_event

Format = Literal["auto", "console", "json"]


def _renderer(fmt: Format, stream: TextIO) -> structlog.types.Processor:
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
) -> None:
    """Configure structlog and the stdlib root logger. Safe to call again (e.g. on SIGHUP).

    ``stream_level`` raises the bar for the terminal only (``teleton chat`` keeps info for its file and
    shows nothing but warnings and errors between the answers)."""
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
    handlers: list[logging.Handler] = [logging.StreamHandler(stream)]
    if stream_level is not None:
        handlers[0].setLevel(stream_level.upper())
    formatters = [_renderer(fmt, stream)]
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(file, encoding="utf-8"))
        formatters.append(structlog.processors.JSONRenderer())
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler, renderer in zip(handlers, formatters, strict=True):
        handler.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                foreign_pre_chain=shared,
                processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            )
        )
        root.addHandler(handler)
    root.setLevel(level.upper())
    # Telethon is chatty at INFO about connections; its warnings still come through.
    logging.getLogger("telethon").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("httpx").setLevel(max(logging.WARNING, root.level))
