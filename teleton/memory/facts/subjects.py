"""Whom a fact is about, and whose facts a turn may be told (the one place for both rules).

Subjects: ``owner``; ``user:<id>``, a Telegram user; ``chat:<id>``, a group as a whole; ``other:<name>``,
another person or a thing named in the conversation; ``''`` when nothing was said. The label (``scope``)
still decides who may read a fact at all; the subject decides, inside a group, to whom it is attributed:
a fact about one member is recalled for that member's messages only, so Ann's "I'm vegan" is never
offered as context when Bob asks what to cook for himself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from teleton.memory.feed import reads
from teleton.storage.sqlite_driver import Connection

OWNER_SUBJECT = "owner"
_SPEAKER = {"", "speaker", "me", "i", "self", "user", "sender", "the speaker", "the user"}
_CHAT = {"chat", "group", "the group", "the chat", "everyone", "all"}


class _Owners(Protocol):
    def is_owner(self, user_id: int | None) -> bool: ...


def speaker_subject(principals: _Owners, user_id: int | None) -> str:
    """The subject of the person who sent a message."""
    if principals.is_owner(user_id):
        return OWNER_SUBJECT
    return f"user:{user_id}" if user_id is not None else ""


def label_speaker(label: str) -> str:
    """Who speaks in a chat of ``label`` when the message is not known: the DM's person; in a group nobody."""
    if label == OWNER_SUBJECT or label.startswith("user:"):
        return label
    return ""


def resolve(about: str | None, speaker: str, chat_id: int, members: Mapping[str, str]) -> str:
    """The subject of a fact the distiller says is ``about`` someone, said by ``speaker`` in ``chat_id``.

    ``members`` maps the lower-case names of a group's members to their subjects, so "Ann" said in the
    group is Ann's user id; a name nobody in the chat has is ``other:<name>``."""
    said = " ".join((about or "").lower().split()).lstrip("@")
    if said in _SPEAKER:
        return speaker
    if said == OWNER_SUBJECT:
        return OWNER_SUBJECT
    if said in _CHAT:
        return f"chat:{chat_id}" if chat_id < 0 else speaker
    if said in members:
        return members[said]
    if said.lstrip("-").isdigit():  # a Telegram user id, as the model may write a filter
        return f"user:{int(said)}"
    if said.startswith(("user:", "chat:", "other:")):  # already a subject
        return said
    return "other:" + said[:80]


def chat_members(conn: Connection, chat_id: int, owner_id: int | None, limit: int = 500) -> dict[str, str]:
    """Lower-case name (full, first word and @username) -> subject, of the recent senders of a chat."""
    rows = reads.recent_senders(conn, chat_id, limit)
    names: dict[str, set[str]] = {}
    for sender_id, name, username in rows:
        subject = OWNER_SUBJECT if sender_id == owner_id else f"user:{sender_id}"
        full = " ".join(str(name or "").lower().split())
        for key in (full, full.split(" ")[0] if full else "", str(username or "").lower()):
            if key:
                names.setdefault(key, set()).add(subject)
    # Two Anns in one group: "Ann" names neither (a wrong attribution is worse than none).
    return {key: next(iter(found)) for key, found in names.items() if len(found) == 1}


def is_person(subject: str) -> bool:
    return subject == OWNER_SUBJECT or subject.startswith("user:")


def may_replace(old: str, new: str, said_by: str) -> bool:
    """Whether a fact about ``new``, said by ``said_by``, may supersede one about ``old``. Facts about a
    thing, the group or a named outsider: anyone's update. Facts about a person: only that person (or the
    owner) — Bob saying "Ann eats meat now" adds a fact about Ann, it does not end Ann's own. ``said_by``
    '' is the owner's own tools and scripts."""
    if not is_person(old):
        return True
    return old == new and said_by in ("", old, OWNER_SUBJECT)


def attributable(subject: str, asker: str) -> bool:
    """Whether a fact about ``subject`` may be offered as context to a group turn of ``asker``: facts about
    a member only to that member; facts about the group, things, named others and unknowns to everyone."""
    return not is_person(subject) or subject == asker


def shown_subjects(in_dm: bool, asker: str) -> Callable[[str], bool]:
    """Which facts a turn of ``asker`` is shown unasked: all of a DM's; in a group, the ``attributable`` ones."""
    return (lambda subject: True) if in_dm else (lambda subject: attributable(subject, asker))
