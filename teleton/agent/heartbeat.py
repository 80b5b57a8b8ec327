"""The heartbeat (off by default): every few minutes the owner's DM gets a turn whose message is
HEARTBEAT.md's rules. The agent may use its tools to check them; it answers ``HEARTBEAT_OK`` when no rule
fires, and that answer is never sent — so the owner hears from the heartbeat only when something matters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from teleton.gateway.contract import UserInfo
from teleton.privacy import Principals
from teleton.storage.private_files import Unreadable, read_confined

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
    def __init__(self, agent: object, principals: Principals, workspace: Path) -> None:
        self.agent = agent
        self.principals = principals  # read at each beat: SIGHUP may change the owner
        self.workspace = workspace

    async def beat(self) -> str | None:
        """One check; returns what was sent to the owner (None when the agent stayed silent)."""
        owner_id = self.principals.owner_id
        if owner_id is None:
            return None
        path = self.workspace / "HEARTBEAT.md"
        try:
            rules, _ = await asyncio.to_thread(read_confined, self.workspace, path)
        except (OSError, Unreadable) as exc:
            log.warning("heartbeat_skipped", reason=f"{path} cannot be read: {exc}")
            return None
        if not rules.strip():
            return None
        sent = await self.agent.run_scheduled(  # type: ignore[attr-defined]
            owner_id, heartbeat_prompt(rules), principal=UserInfo(id=owner_id), is_admin=True, silent_token=SILENT
        )
        return sent or None
