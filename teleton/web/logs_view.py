"""The Logs page's reading of the daemon's log file: the last lines, and what is appended after, each with its
level, filtered by a lowest level. Lines are redacted again on the way out (they were at write time: this
is the second lock on the same door)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from teleton.process.redaction import redact_text

LEVELS = ("debug", "info", "warning", "error")
TAIL_BYTES = 256_000
_CONSOLE_LEVEL = re.compile(r"\[(debug|info|warning|error|critical)\s*\]")


@dataclass(frozen=True)
class Line:
    level: str
    text: str


def level_of(line: str) -> str:
    """A JSON line's ``level``, or a console line's ``[warning ]``; info when neither says."""
    if line.startswith("{"):
        try:
            level = str(json.loads(line).get("level", "info")).lower()
        except ValueError:
            level = "info"
    else:
        found = _CONSOLE_LEVEL.search(line)
        level = found.group(1) if found else "info"
    return "error" if level == "critical" else level if level in LEVELS else "info"


def shown(lines: list[str], lowest: str) -> list[Line]:
    floor = LEVELS.index(lowest) if lowest in LEVELS else 1
    found = [Line(level_of(line), redact_text(line)) for line in lines if line.strip()]
    return [line for line in found if LEVELS.index(line.level) >= floor]


def tail(path: Path, lowest: str, count: int = 200) -> tuple[list[Line], int]:
    """The last ``count`` lines at ``lowest`` or above, and the file's size (where the live part goes on)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return [], 0
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first is cut
    return shown(lines, lowest)[-count:], size


def since(path: Path, offset: int, lowest: str) -> tuple[list[Line], int]:
    """Whole lines appended after ``offset``, and the new offset (a file rotated or cut: from its start)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            if size < offset:
                offset = 0
            handle.seek(offset)
            data = handle.read(max(0, size - offset))
    except FileNotFoundError:
        return [], 0
    end = data.rfind(b"\n") + 1  # a line still being written waits for its end
    lines = data[:end].decode("utf-8", errors="replace").splitlines()
    return shown(lines, lowest), offset + end


@dataclass(frozen=True)
class LogPlace:
    """Where this installation's log is: ``file`` the page reads (its tail, then live), or None; ``said``, in words."""

    file: Path | None
    said: str


def journal_unit(cgroup: str) -> str | None:
    """``journalctl``'s unit option for the process whose ``/proc/PID/cgroup`` says ``cgroup``: ``-u NAME``
    for a system service, ``--user -u NAME`` for a user's; None when systemd does not run it as a service."""
    for line in cgroup.splitlines():
        _, hierarchy, path = [*line.split(":", 2), "", ""][:3]
        if hierarchy not in ("", "name=systemd"):  # the unified hierarchy (v2), or systemd's own (v1)
            continue
        leaf = path.rstrip("/").rsplit("/", 1)[-1]
        if leaf.endswith(".service") and not leaf.startswith("user@"):
            return ("--user -u " if "/user@" in path else "-u ") + leaf.removesuffix(".service")
    return None


def unit_of(pid: int) -> str | None:
    """The systemd service process ``pid`` runs as (``journal_unit``), or None."""
    try:
        return journal_unit(Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8"))
    except OSError:
        return None


def daemon_log(configured: Path | None, unit: str | None) -> LogPlace:
    """The log of the daemon serving the page: ``logging.file``, its service's journal, or its stderr."""
    if configured is not None:
        return LogPlace(configured, f"logging.file, {configured}")
    if unit is not None:
        return LogPlace(None, f"the service's journal: journalctl {unit} -f (or set logging.file to read it here)")
    return LogPlace(None, "the daemon's standard error, in the terminal teleton start runs in (or set logging.file)")


def stored_log(configured: Path | None, chat_log: Path, daemon: str | None) -> LogPlace:
    """The log `teleton dashboard` (no daemon of its own) shows: ``logging.file``, else `teleton chat`'s
    ``chat_log`` once it exists (``cli.chat_cmd``). ``daemon``: where a running daemon's log goes, in words
    (None: none runs)."""
    if configured is not None:
        return LogPlace(configured, f"logging.file, {configured} (the daemon's and teleton chat's)")
    beside = f"; the running daemon's: {daemon}" if daemon else ""
    if chat_log.exists():
        return LogPlace(chat_log, f"the log file of teleton chat, {chat_log}{beside}")
    return LogPlace(
        None,
        f"no log file yet: teleton chat writes {chat_log}; the daemon logs to its standard error (under systemd "
        f"to its journal: journalctl -u teleton -f) unless logging.file is set{beside}",
    )


def running_daemon_log(pid: int | None) -> str | None:
    """Where the daemon running as ``pid`` logs without ``logging.file``, in words; None when none runs."""
    if pid is None:
        return None
    unit = unit_of(pid)
    return f"journalctl {unit} -f" if unit else f"its standard error (pid {pid}, the terminal it was started in)"
