"""The agent's side of docs/privacy.md: which workspace files a prompt holds, and how untrusted text is shown.

The rules themselves (labels, clearances, the read and write rules, egress) live in ``teleton.privacy``;
this module only applies them to prompts:

- the owner (its DM, ``teleton chat``): SOUL.md, SECURITY.md, STRATEGY.md, USER.md, MEMORY.md, the owner's
  important facts, learnings and daily logs; retrieved context from everywhere, what came from another chat
  or person quoted with its origin;
- another person's DM (admins too): SOUL.md, SECURITY.md, their own important facts; public knowledge,
  their own DM and facts;
- a group: SOUL.md, SECURITY.md; public knowledge, that group's messages and facts.
"""

from __future__ import annotations

from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.privacy import Clearance, Principals, Taint
from teleton.privacy.paths import PERSONA_FILES
from teleton.scheduler.task_store import TaskRecord

# Every turn's prompt starts with these, a group's too: so they must be public (persona files), checked here.
EVERY_PROMPT = ("SOUL.md", "SECURITY.md")
assert set(EVERY_PROMPT) <= PERSONA_FILES, "a file in every prompt must be a public persona file"
OWNER_FILES = ("STRATEGY.md", "USER.md")


def prompt_files(clearance: Clearance) -> tuple[str, ...]:
    """Workspace files that go into the system prompt, stable ones first (they lead the cached prefix)."""
    return EVERY_PROMPT + (OWNER_FILES if clearance.is_owner else ())


def origin(chat: ChatInfo, clearance: Clearance, sender_name: str = "", topic: int = 0) -> str | None:
    """Where a turn's words come from, as shown beside them in the owner's notes; None for the owner.
    ``topic``: the forum topic the conversation is (its own session, so its own lines)."""
    if clearance.is_owner:
        return None
    if chat.type == "dm":
        return f"DM with {sender_name or chat.title or chat.id} ({clearance.label})"
    where = f", topic {topic}" if topic else ""
    return f'group "{chat.title or chat.id}"{where} ({clearance.label})'


def task_taint(task: TaskRecord) -> Taint:
    """What the scheduling turn had been shown (stored with the task); none stored: just the clearance."""
    stored = task.payload.get("taint") if isinstance(task.payload, dict) else None
    return Taint.from_json(stored) if stored else Taint()


def task_origin(task: TaskRecord, principals: Principals) -> tuple[Clearance, UserInfo | None, bool]:
    """The clearance, principal and admin right a scheduled task runs with: the scheduling turn's, stored
    with it. A task from before labels has none stored: its chat's clearance, the scheduler it recorded."""
    if task.clearance is not None:
        principal = UserInfo(id=int(task.principal_id)) if task.principal_id is not None else None
        return Clearance(task.clearance), principal, bool(task.principal_admin) and principal is not None
    sender = task.payload.get("sender_id")
    principal = UserInfo(id=int(sender)) if sender is not None else None
    admin = bool(task.payload.get("admin")) and principal is not None
    return principals.clearance(task.chat), principal, admin
