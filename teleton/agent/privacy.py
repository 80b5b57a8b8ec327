"""DESIGN §8 as code: what each kind of chat may read. Pure; the context builder, the prompt and the
memory tools all ask this one function, so the rule cannot drift between them.

| chat | gets | never gets |
|---|---|---|
| DM | MEMORY.md, USER.md, STRATEGY.md, daily logs, knowledge, every fact scope; feed of every chat when the
  sender is the owner or an admin, of this chat otherwise | — |
| group / channel | recent messages and feed search of THIS chat, facts scoped to this chat | MEMORY.md,
  USER.md, STRATEGY.md, daily logs, knowledge, user facts, other chats' messages |
"""

from __future__ import annotations

from teleton.gateway.contract import ChatInfo
from teleton.memory.facts import USER_SCOPE, chat_scope
from teleton.tools.registry import Access

ALWAYS_FILES = ("SOUL.md", "SECURITY.md")
DM_FILES = ("STRATEGY.md", "USER.md")


def access_for(chat: ChatInfo, *, is_admin: bool) -> Access:
    if chat.type == "dm":
        return Access(
            memory_files=True,
            daily_logs=True,
            knowledge=True,
            fact_scopes=None,
            feed_chats=None if is_admin else (chat.id,),
            # The owner's private facts live in 'user'; another allowed person's in their own chat scope.
            save_scope=USER_SCOPE if is_admin else chat_scope(chat.id),
        )
    return Access(
        memory_files=False,
        daily_logs=False,
        knowledge=False,
        fact_scopes=(chat_scope(chat.id),),
        feed_chats=(chat.id,),
        save_scope=chat_scope(chat.id),
    )


def prompt_files(access: Access) -> tuple[str, ...]:
    """Workspace files that go into the system prompt, stable ones first (they lead the cached prefix)."""
    return ALWAYS_FILES + (DM_FILES if access.memory_files else ())
