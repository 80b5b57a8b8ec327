"""Daily logs: ``memory/YYYY-MM-DD.md``, one file a day of exchanges, summaries and flushes.

Exchange lines (docs/memory.md): ``[HH:MM] User: … | Assistant: …`` with the user cut to 200 characters, the
assistant to 300 and newlines flattened, so a day reads as one line per exchange and the owner's system
prompt can take the last 100 lines. The logs are the owner's (label ``owner``); what a group or another
person's DM adds is written as quoted data with its origin (``> [HH:MM] (from group "X", chat:-5) …``,
every line of a section quoted), so it can never pass for the owner's own notes or for an instruction.
File I/O runs in a thread; a lock keeps concurrent chats from interleaving half-written lines; files are 0600.
"""

from __future__ import annotations

import asyncio
import io
from collections import deque
from datetime import date, datetime, timedelta
from pathlib import Path

from teleton.privacy.quoting import with_origin
from teleton.storage.private_files import write_private

USER_CAP = 200
ASSISTANT_CAP = 300


def flatten(text: str, cap: int) -> str:
    return " ".join(text.split())[:cap]


QUOTE = "> "


def exchange_line(user: str, assistant: str, when: datetime, origin: str | None = None) -> str:
    line = f"[{when:%H:%M}] User: {flatten(user, USER_CAP)} | Assistant: {flatten(assistant, ASSISTANT_CAP)}"
    if origin is None:
        return line
    return f"{QUOTE}[{when:%H:%M}] (from {flatten(origin, 120)}) " + line.split("] ", 1)[1]


def section(title: str, body: str, when: datetime, origin: str | None = None) -> str:
    if origin is None:
        return f"\n## [{when:%H:%M}] {title}\n{body.strip()}\n"
    quoted = "\n".join(QUOTE + line for line in body.strip().splitlines())
    return f"\n## [{when:%H:%M}] {title} (from {flatten(origin, 120)})\n{quoted}\n"


class DailyLogs:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._lock = asyncio.Lock()

    def path_for(self, day: date) -> Path:
        return self.directory / f"{day:%Y-%m-%d}.md"

    async def append_exchange(
        self, user: str, assistant: str, when: datetime | None = None, *, origin: str | None = None
    ) -> None:
        """One exchange line; ``origin`` (a chat that is not the owner's DM) makes it a quoted line."""
        when = when or datetime.now().astimezone()
        await self._append(when.date(), exchange_line(user, assistant, when, origin) + "\n")

    async def append_section(
        self, title: str, body: str, when: datetime | None = None, *, origin: str | None = None
    ) -> None:
        """A multi-line entry: a session summary, a compaction flush, a note the agent wrote."""
        when = when or datetime.now().astimezone()
        await self._append(when.date(), section(title, body, when, origin))

    async def tail(self, day: date, lines: int = 100) -> str:
        path = self.path_for(day)

        def _read() -> str:
            if not path.exists():
                return ""
            text = path.read_text(encoding="utf-8", errors="replace")
            kept = "".join(deque(io.StringIO(text), maxlen=lines))  # lines as the file has them: split at \n only
            # A quoted section cut by the tail keeps its origin (its heading may be above the cut).
            return with_origin(text, len(text) - len(kept)).strip()

        return await asyncio.to_thread(_read) if lines > 0 else ""

    async def recent(self, lines: int = 100, today: date | None = None) -> list[tuple[date, str]]:
        """Yesterday's and today's logs (the last ``lines`` lines of each), those that have content."""
        today = today or datetime.now().astimezone().date()
        days = [today - timedelta(days=1), today]
        out = []
        for day in days:
            text = await self.tail(day, lines)
            if text:
                out.append((day, text))
        return out

    async def _append(self, day: date, text: str) -> None:
        path = self.path_for(day)

        def _write() -> None:
            write_private(path, text, append=True)

        async with self._lock:
            await asyncio.to_thread(_write)
