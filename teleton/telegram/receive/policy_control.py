"""What `/policy` changes: the live policy gate of the running dispatcher.

A change applies to the next message and lasts until the daemon restarts or reloads its config (SIGHUP);
the reply says so, because a policy that silently reverted would surprise the owner more than one that
has to be written into config.yaml to stay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, get_args

from teleton.telegram.receive.dispatch import Dispatcher
from teleton.telegram.receive.policy import PolicyValue

KINDS = {"dm": "dm_policy", "group": "group_policy"}
VALUES = get_args(PolicyValue)


class DispatcherPolicy:
    def __init__(self, dispatcher: Callable[[], Dispatcher | None]) -> None:
        self._dispatcher = dispatcher

    def describe(self) -> str:
        dispatcher = self._dispatcher()
        if dispatcher is None:
            return "The policy gate is not running."
        p = dispatcher.policy
        return (
            f"DM policy: {p.dm_policy} ({len(p.allow_user_ids) + len(p.allow_usernames)} allowed users)\n"
            f"Group policy: {p.group_policy} ({len(p.group_allow_from)} allowed groups), "
            f"mention required: {'yes' if p.require_mention else 'no'}\n"
            f"Admins: {len(p.admin_ids)}"
        )

    def refusals(self) -> str:
        dispatcher = self._dispatcher()
        if dispatcher is None:
            return "Refused: the policy gate is not running."
        dms, groups = dispatcher.refused["dm"], dispatcher.refused["group"]
        return (
            f"Refused by policy since start: {dms} DM message{'s' * (dms != 1)}, {groups} group "
            f"message{'s' * (groups != 1)} (each chat logged once an hour as message_refused)"
        )

    def set_policy(self, kind: str, value: str) -> str:
        dispatcher = self._dispatcher()
        field_name = KINDS.get(kind.lower())
        if dispatcher is None:
            return "The policy gate is not running."
        if field_name is None:
            return f"Unknown policy {kind!r}: use dm or group."
        if value not in VALUES:
            return f"Unknown value {value!r}: use one of {', '.join(VALUES)}."
        change: dict[str, Any] = {field_name: value}  # checked against VALUES above
        dispatcher.policy = replace(dispatcher.policy, **change)
        return (
            f"{kind.lower()} policy is now {value} (until restart; set telegram.{field_name} in the config to keep it)."
        )
