"""The heartbeat (off by default): every few minutes the owner's DM gets a turn whose message is
HEARTBEAT.md's rules. The agent may use its tools to check them; it answers ``HEARTBEAT_OK`` when no rule
fires, and that answer is never sent — so the owner hears from the heartbeat only when something matters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

SILENT = "HEARTBEAT_OK"


def heartbeat_prompt(rules: str) -> str:
    return (
        "[Heartbeat: a periodic check, not a message from the owner]\n"
        "Check these rules now, using your tools where needed:\n\n"
        f"{rules.strip()}\n\n"
        f"If no rule fires, answer with exactly {SILENT} and nothing else. If one fires, write the one short "
        "message the owner should get."
    )


class Heartbeat:
    def __init__(self, agent: object, owner_id: int, workspace: Path) -> None:
        self.agent = agent
        self.owner_id = owner_id
        self.workspace = workspace

    async def beat(self) -> str | None:
        """One check; returns what was sent to the owner (None when the agent stayed silent)."""
        path = self.workspace / "HEARTBEAT.md"
        try:
            rules = await asyncio.to_thread(path.read_text, encoding="utf-8")
        except OSError:
            log.warning("heartbeat_skipped", reason=f"{path} cannot be read")
            return None
        if not rules.strip():
            return None
        sent = await self.agent.run_scheduled(  # type: ignore[attr-defined]
            self.owner_id, heartbeat_prompt(rules), silent_token=SILENT
        )
        return sent or None
