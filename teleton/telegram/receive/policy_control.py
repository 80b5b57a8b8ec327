"""What `/policy` changes: the live policy gate (``dispatch.Gate``) in front of the agent.

A change applies to the next message and lasts until the daemon restarts or reloads its config (SIGHUP);
the reply says so, because a policy that silently reverted would surprise the owner more than one that
has to be written into config.yaml to stay.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, get_args

from teleton.telegram.receive.dispatch import Gate
from teleton.telegram.receive.policy import PolicyValue

KINDS = {"dm": "dm_policy", "group": "group_policy"}
VALUES = get_args(PolicyValue)


class GatePolicy:
    def __init__(self, gate: Gate) -> None:
        self._gate = gate

    def describe(self) -> str:
        p = self._gate.policy
        return (
            f"DM policy: {p.dm_policy} ({len(p.allow_user_ids) + len(p.allow_usernames)} allowed users)\n"
            f"Group policy: {p.group_policy} ({len(p.group_allow_from)} allowed groups), "
            f"mention required: {'yes' if p.require_mention else 'no'}\n"
            f"Admins: {len(p.admin_ids)}"
        )

    def refusals(self) -> str:
        dms, groups = self._gate.refused["dm"], self._gate.refused["group"]
        return (
            f"Refused by policy since start: {dms} DM message{'s' * (dms != 1)}, {groups} group "
            f"message{'s' * (groups != 1)} (each chat logged once an hour as message_refused)"
        )

    def set_policy(self, kind: str, value: str) -> str:
        field_name = KINDS.get(kind.lower())
        if field_name is None:
            return f"Unknown policy {kind!r}: use dm or group."
        if value not in VALUES:
            return f"Unknown value {value!r}: use one of {', '.join(VALUES)}."
        change: dict[str, Any] = {field_name: value}  # checked against VALUES above
        self._gate.policy = replace(self._gate.policy, **change)
        return (
            f"{kind.lower()} policy is now {value} (until restart; set telegram.{field_name} in the config to keep it)."
        )
