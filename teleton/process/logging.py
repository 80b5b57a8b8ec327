"""Logging set-up: structlog everywhere, readable key=value in a terminal, JSON lines otherwise.

Standard-library loggers (Telethon, httpx, anthropic) are routed through the same processors, so their
records are redacted and formatted like ours. Logs never go to stdout: it holds a command's output. The CLI
commands other than ``start`` show people one short line per warning or error ("human"); the daemon keeps
the format its config names (journald reads its stderr).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Literal, TextIO

import structlog

from teleton.process.redaction import redact_event

Format = Literal["auto", "console", "json", "human"]
HUMAN_MAX_CHARS = 300  # a terminal line, not a record: the full record is in the log file, when there is one
_HIDDEN = frozenset({"event", "level", "logger", "timestamp", "exc_info", "stack"})


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
) -> None:
    """Configure structlog and the stdlib root logger. Safe to call again (e.g. on SIGHUP).

    ``stream`` defaults to the current stderr, ``stream_level`` raises the bar for it only (``teleton chat``
    keeps info for its file and shows nothing but errors between the answers); ``fmt`` applies to the stream,
    the file is always JSON lines."""
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
        _create_private(file)
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
