"""Labels, clearances and principals: who may read what (docs/privacy.md, "Reads: labels and clearances").

A label (``owner``, ``user:<id>``, ``chat:<id>``, ``public``) says whose an item is, given from the turn that
wrote it; a clearance is what a turn may read: the label of its chat. ``owner`` reads everything, any other
clearance ``public`` and its own label; a malformed label is readable by nobody. Principals say who the owner
and the admins are: one object shared by the gate, the agent and these rules, updated on SIGHUP. Admin is a
right to control the agent, never a right to read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

OWNER = "owner"
PUBLIC = "public"
_LABEL = re.compile(r"^(?:owner|public|user:[1-9][0-9]{0,19}|chat:-?[1-9][0-9]{0,19})$")


def user_label(user_id: int) -> str:
    return f"user:{int(user_id)}"


def group_label(chat_id: int) -> str:
    return f"chat:{int(chat_id)}"


def is_label(value: object) -> bool:
    return isinstance(value, str) and _LABEL.match(value) is not None


def chat_label(chat_id: int, owner_chats: Iterable[int] = ()) -> str:
    """The label of everything said in chat ``chat_id``: a DM's chat id is the other person's user id
    (positive), a group's is negative (Telegram's marked ids)."""
    chat_id = int(chat_id)
    if chat_id in set(owner_chats):
        return OWNER
    return user_label(chat_id) if chat_id > 0 else group_label(chat_id)


@dataclass(frozen=True)
class Clearance:
    """What one turn may read, and the label of what it writes."""

    label: str

    def __post_init__(self) -> None:
        if not is_label(self.label) or self.label == PUBLIC:
            raise ValueError(f"not a clearance: {self.label!r}")

    @property
    def is_owner(self) -> bool:
        return self.label == OWNER

    def may_read(self, label: object) -> bool:
        """The read rule. Unknown or malformed labels are not readable, not even by the owner."""
        if not is_label(label):
            return False
        return self.is_owner or label in (PUBLIC, self.label)

    def readable(self) -> tuple[str, ...] | None:
        """The labels this clearance reads, for SQL filters; None = every label (the owner)."""
        return None if self.is_owner else (PUBLIC, self.label)

    def readable_chats(self) -> tuple[int, ...] | None:
        """The chats whose archived messages this clearance reads; None = every chat (the owner)."""
        if self.is_owner:
            return None
        return (int(self.label.split(":", 1)[1]),)


OWNER_CLEARANCE = Clearance(OWNER)


@dataclass
class Principals:
    """The owner and the admins, as configured (``telegram.owner_id``, ``telegram.admin_ids``).

    Mutable on purpose: SIGHUP calls ``update`` and every holder sees the change at its next message.
    ``owner_chats`` are chats other than the owner's own DM that are the owner speaking (the terminal of
    ``teleton chat``).
    """

    owner_id: int | None = None
    admin_ids: frozenset[int] = frozenset()
    owner_chats: frozenset[int] = field(default_factory=frozenset)

    @classmethod
    def from_telegram(cls, tg: object, *, owner_chats: Iterable[int] = ()) -> Principals:
        """From ``config.telegram`` (teleton.config.schema.TelegramConfig)."""
        return cls(
            owner_id=getattr(tg, "owner_id", None),
            admin_ids=frozenset(int(a) for a in getattr(tg, "admin_ids", ()) or ()),
            owner_chats=frozenset(owner_chats),
        )

    def update(self, owner_id: int | None, admin_ids: Iterable[int]) -> None:
        self.owner_id = owner_id
        self.admin_ids = frozenset(int(a) for a in admin_ids)

    def is_owner(self, user_id: int | None) -> bool:
        return user_id is not None and self.owner_id is not None and int(user_id) == self.owner_id

    def is_admin(self, user_id: int | None) -> bool:
        """Control rights (commands, policies, tool settings). The owner is always an admin."""
        return user_id is not None and (self.is_owner(user_id) or int(user_id) in self.admin_ids)

    def notice_chat(self) -> int | None:
        """Where the owner is told things (held sends): the terminal of `teleton chat`, else their DM."""
        return min(self.owner_chats) if self.owner_chats else self.owner_id

    def owner_chat_ids(self) -> frozenset[int]:
        return self.owner_chats | ({self.owner_id} if self.owner_id is not None else set())

    def chat_label(self, chat_id: int) -> str:
        return chat_label(chat_id, self.owner_chat_ids())

    def clearance(self, chat_id: int) -> Clearance:
        """The clearance of a turn in ``chat_id``: the chat decides, not who speaks in it."""
        return Clearance(self.chat_label(chat_id))
