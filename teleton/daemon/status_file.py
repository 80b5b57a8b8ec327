"""What `teleton status` reads from another shell: a small JSON file the daemon rewrites every few seconds.

A file (rather than a socket) keeps working when the daemon is wedged or gone: the reader compares the pid
and the file's age, and can still show the last error the daemon recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from teleton.storage.private_files import write_private
from teleton.text.counts import counted

STALE_AFTER_S = 30.0
FULL_BELOW_BYTES = 1 << 20  # less free space than this where the daemon writes: it cannot write its status


@dataclass
class DaemonStatus:
    pid: int
    started_at: float
    updated_at: float = field(default_factory=time.time)
    state: str = "starting"
    queue_depth: int = 0
    archived_messages: int = 0
    turns: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    loops: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> LoopHealth.as_dict()
    errors: dict[str, list[Any]] = field(default_factory=dict)  # kind -> [last error, when]
    queues: dict[str, int] = field(default_factory=dict)
    quarantined: dict[str, int] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)  # open (archived/accepted/sending) and failed
    mcp: dict[str, dict[str, Any]] = field(default_factory=dict)  # server -> McpServers.status() entry
    model_retrying: str | None = None  # "model retrying since HH:MM (last: ...)" while model calls retry


def write_status(path: Path, status: DaemonStatus) -> None:
    status.updated_at = time.time()
    tmp = path.with_suffix(".tmp")
    write_private(tmp, json.dumps(asdict(status)))
    os.replace(tmp, path)


def read_status(path: Path) -> DaemonStatus | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return DaemonStatus(**data)
    except (OSError, ValueError, TypeError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def free_space(directory: Path) -> int | None:
    """Bytes free on the file system of ``directory`` (None: it cannot be read)."""
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def describe(status: DaemonStatus | None, now: float | None = None, free_bytes: int | None = None) -> tuple[bool, str]:
    """(running, one-paragraph description) for the CLI. ``free_bytes``: free space where the daemon writes
    (a status gone stale on a full disk means "disk full", not "unresponsive")."""
    now = time.time() if now is None else now
    condition = _condition(status, now, free_bytes)
    if status is None:
        return False, "not running (no status file: the daemon has not been started here)"
    if condition == "not running":
        text = f"not running (last pid {status.pid}, last seen {_ago(now - status.updated_at)} ago)"
    elif condition == "disk full":
        text = (
            f"disk full: pid {status.pid} alive, {free_bytes:,} bytes free where it writes; no status update for "
            f"{_ago(now - status.updated_at)}. Free some space: messages it accepted are answered once it can "
            "write again (no restart needed)"
        )
    elif condition == "unresponsive":
        text = f"unresponsive: pid {status.pid} alive but no status update for {_ago(now - status.updated_at)}"
    else:
        text = (
            f"{status.state} (pid {status.pid}), up {_ago(now - status.started_at)}; "
            f"queue depth {status.queue_depth}; archive {counted(status.archived_messages, 'message')}; "
            f"turns {status.turns}"
        )
        if "loop_lag_p99_ms" in status.details:
            text += f"; event-loop lag p99 {status.details['loop_lag_p99_ms']} ms"
        text += _health(status, now) + _mcp(status)
    if status.last_error:
        text += f"\nlast error ({_ago(now - (status.last_error_at or now))} ago): {status.last_error}"
    return condition == "running", text


def summary(status: DaemonStatus | None, now: float | None = None, free_bytes: int | None = None) -> dict[str, Any]:
    """What ``teleton status --json`` prints: the condition ``describe`` words, and the daemon's own record."""
    now = time.time() if now is None else now
    return {
        "running": _condition(status, now, free_bytes) == "running",
        "condition": _condition(status, now, free_bytes),
        "uptime_s": round(now - status.started_at) if status is not None else None,
        "updated_s_ago": round(now - status.updated_at) if status is not None else None,
        "free_bytes": free_bytes,
        "status": asdict(status) if status is not None else None,
    }


def _condition(status: DaemonStatus | None, now: float, free_bytes: int | None) -> str:
    if status is None or not pid_alive(status.pid):
        return "not running"
    if now - status.updated_at <= STALE_AFTER_S:
        return "running"
    if free_bytes is not None and free_bytes < FULL_BELOW_BYTES:
        return "disk full"
    return "unresponsive"


def _health(status: DaemonStatus, now: float) -> str:
    lines = []
    for name, loop in sorted(status.loops.items()):
        line = f"{name}: {loop['state']} since {_ago(now - loop['since'])} ago"
        if loop["state"] != "up" and loop.get("last_error"):
            line += f" ({loop['last_error']})"
        lines.append(line)
    if status.queues:
        lines.append("queues: " + ", ".join(f"{k} {v}" for k, v in sorted(status.queues.items())))
    if status.messages:
        waiting = sum(v for k, v in status.messages.items() if k != "failed")
        lines.append(f"messages: {waiting} waiting for an answer, {status.messages.get('failed', 0)} failed")
    if status.model_retrying:
        lines.append(status.model_retrying)
    if status.quarantined:
        lines.append("quarantined: " + ", ".join(f"{v} {k}" for k, v in sorted(status.quarantined.items())))
    for kind, (error, at) in sorted(status.errors.items()):
        lines.append(f"last {kind} error ({_ago(now - at)} ago): {error}")
    return "".join(f"\n  {line}" for line in lines)


def _mcp(status: DaemonStatus) -> str:
    """One line per MCP server: its state, its tools, what waits for the owner and why it is down."""
    lines = []
    for name, server in sorted(status.mcp.items()):
        line = f"\nMCP server {name}: {server.get('state')}, {counted(len(server.get('tools') or []), 'tool')}"
        if server.get("pending"):
            line += f", waiting for your approval: {', '.join(server['pending'])} (teleton mcp approve {name})"
        if server.get("restarts"):
            line += f", reconnected {server['restarts']} times"
        if server.get("error"):
            line += f"; last error: {server['error']}"
        lines.append(line)
    return "".join(lines)


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"
