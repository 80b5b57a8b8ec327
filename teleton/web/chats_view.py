"""The Chats page's view: who the agent answers (the policy gate's own words), each recent chat with its
session — how full its window was at the last request, its tokens, the summary compaction left — and one
chat's session as the model is sent it; today's daily log."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from teleton.agent.deps import PolicyControl
from teleton.agent.window.sessions import Session, SessionStore
from teleton.memory.feed import reads
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.storage.database import Database

CHATS = 50
TEXT_CAP = 2000


@dataclass(frozen=True)
class ChatRow:
    id: int
    kind: str
    title: str
    messages: int  # in the active session
    window_tokens: int  # prompt + answer at the session's last request
    tokens_in: int  # all input tokens the session sent: not cached, written to the cache and read from it
    tokens_out: int
    summary_chars: int  # what compaction (or /compact) left in place of older messages
    updated: str
    topic: int = 0  # a forum topic's own session (0: the chat's main line)


@dataclass(frozen=True)
class ChatsView:
    db: Database
    policy: PolicyControl | None = None
    daily_logs: DailyLogs | None = None

    async def rows(self) -> list[ChatRow]:
        chats = await self.db.read(lambda conn: reads.recent_chats(conn, CHATS))
        sessions = SessionStore(self.db)
        topics = await sessions.topics([int(chat_id) for chat_id, _kind, _title in chats])
        found = []
        for chat_id, kind, title in chats:
            chat, named = int(chat_id), str(title or "")
            found.append(_row(chat, str(kind), named, await sessions.active(chat)))
            for topic in topics.get(chat, []):  # each forum topic is a conversation of its own
                found.append(_row(chat, str(kind), named, await sessions.active(chat, topic), topic))
        return found

    async def session(self, chat_id: int, topic: int = 0) -> tuple[Session | None, list[dict[str, str]]]:
        """The chat's (forum topic's) active session and its messages as the model is sent them: stored as the
        last request sent them (old tool results masked by the same steps, ``agent/window/masking.py``)."""
        session = await SessionStore(self.db).active(chat_id, topic)
        if session is None:
            return None, []
        return session, [_shown(m) for m in session.messages]

    def describe_policy(self) -> str:
        return self.policy.describe() if self.policy is not None else ""

    async def today(self) -> str:
        return await self.daily_logs.tail(dt.date.today(), 60) if self.daily_logs is not None else ""


def _row(chat_id: int, kind: str, title: str, session: Session | None, topic: int = 0) -> ChatRow:
    if session is None:
        return ChatRow(chat_id, kind, title, 0, 0, 0, 0, 0, "", topic)
    updated = dt.datetime.fromtimestamp(session.updated_at).astimezone().strftime("%Y-%m-%d %H:%M")
    sent = session.input_tokens + session.cache_write_tokens + session.cache_read_tokens  # all input, cached or not
    return ChatRow(chat_id, kind, title, len(session.messages), session.last_input_tokens, sent,
                   session.output_tokens, len(session.summary), updated, topic)  # fmt: skip


def _shown(message: dict[str, Any]) -> dict[str, str]:
    """One message as text: what was said, each tool call's name and input, each tool result."""
    content = message.get("content")
    if isinstance(content, str):
        text = content
    else:
        parts = []
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                parts.append(f"[calls {block.get('name')} {block.get('input')}]")
            elif kind == "tool_result":
                result = block.get("content")
                result = result if isinstance(result, str) else " ".join(str(b.get("text", "")) for b in result or [])
                parts.append(f"[result] {result}")
            else:
                parts.append(f"[{kind}]")
        text = "\n".join(parts)
    return {"role": str(message.get("role", "")), "text": text if len(text) <= TEXT_CAP else text[:TEXT_CAP] + "…"}
