"""The cast of the privacy suite: the owner, the users and groups they speak in, and the chats built from them.

Every other module of the suite names people and chats by these constants, and the oracles derive a chat's
label from its id, so they live apart from everything that runs or judges: a test reads who is who here
without pulling in the daemon, the model or the checks.
"""

from __future__ import annotations

import itertools
from typing import Any

from tests.daemon.harness import OWNER

OWNER_ID = OWNER["id"]  # 1001
BOB = {"id": 2002, "first_name": "Bob", "username": "bob"}  # allowlisted DM user, not an admin
CAROL = {"id": 3003, "first_name": "Carol", "username": "carol"}  # a third DM user
DAVE = {"id": 4004, "first_name": "Dave", "username": "dave"}  # a second admin (DMs allowed)
MALLORY = {"id": 5005, "first_name": "Mallory", "username": "mallory"}  # a group member, nobody special
GINA = {"id": 6006, "first_name": "Gina", "username": "gina"}  # member of group X (which has its own data)

GROUP_X = -100900  # a group with its own private data (a positive control for chat labels)
BARRIER = {"id": -999999, "type": "group", "title": "barrier"}  # sync messages, never addressed


def dm(user: dict[str, Any]) -> dict[str, Any]:
    return {"id": user["id"], "type": "dm", "title": ""}


def group(chat_id: int, title: str | None = None) -> dict[str, Any]:
    return {"id": chat_id, "type": "group", "title": title or f"grp{-chat_id}"}


_group_ids = itertools.count(100_100)


def fresh_group() -> dict[str, Any]:
    """A group nobody has used yet: its recent context holds only the scenario's own messages."""
    return group(-next(_group_ids))
