"""The policy gate: may the agent act on this message? A pure function of the message and the config.

Order matters and is the answer to "why did it not reply": our own messages, other bots and broadcast
channel posts are never answered; then the chat-type policy (dm_policy / group_policy); then, in groups,
whether we were addressed. A group message that passes the policy but was not addressed is kept as
context for the next time the agent is addressed there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from teleton.gateway.contract import IncomingMessage
from teleton.privacy import Principals

PolicyValue = Literal["open", "allowlist", "admin-only", "disabled"]


@dataclass(frozen=True)
class PolicyConfig:
    dm_policy: PolicyValue = "allowlist"
    group_policy: PolicyValue = "allowlist"
    allow_user_ids: frozenset[int] = frozenset()
    allow_usernames: frozenset[str] = frozenset()  # lower-case, no '@'
    group_allow_from: frozenset[int] = frozenset()
    require_mention: bool = True
    # Who the owner and admins are: the daemon's one shared record (SIGHUP updates it in place).
    principals: Principals = field(default_factory=Principals, compare=False)

    @classmethod
    def build(
        cls,
        *,
        dm_policy: PolicyValue = "allowlist",
        group_policy: PolicyValue = "allowlist",
        allow_from: Iterable[int | str] = (),
        group_allow_from: Iterable[int] = (),
        admin_ids: Iterable[int] = (),
        owner_id: int | None = None,
        require_mention: bool = True,
        principals: Principals | None = None,
    ) -> PolicyConfig:
        ids: set[int] = set()
        names: set[str] = set()
        for entry in allow_from:
            if isinstance(entry, int) or str(entry).lstrip("-").isdigit():
                ids.add(int(entry))
            else:
                names.add(str(entry).lstrip("@").lower())
        return cls(
            dm_policy=dm_policy,
            group_policy=group_policy,
            allow_user_ids=frozenset(ids),
            allow_usernames=frozenset(names),
            group_allow_from=frozenset(int(c) for c in group_allow_from),
            require_mention=require_mention,
            principals=principals or Principals(owner_id, frozenset(int(a) for a in admin_ids)),
        )

    @classmethod
    def from_telegram(cls, tg: Any, principals: Principals | None = None) -> PolicyConfig:
        """From ``config.telegram`` (teleton.config.schema.TelegramConfig), sharing ``principals``."""
        return cls.build(
            dm_policy=tg.dm_policy,
            group_policy=tg.group_policy,
            allow_from=tg.allow_from,
            group_allow_from=tg.group_allow_from,
            require_mention=tg.require_mention,
            principals=principals or Principals.from_telegram(tg),
        )

    @property
    def admin_ids(self) -> frozenset[int]:
        """Every admin, the owner included."""
        owner = self.principals.owner_id
        return self.principals.admin_ids | ({owner} if owner is not None else frozenset())

    def is_admin(self, user_id: int | None) -> bool:
        return self.principals.is_admin(user_id)


@dataclass(frozen=True)
class Decision:
    accept: bool
    reason: str
    # Not answered now, but worth showing the agent the next time it is addressed in this chat.
    keep_as_context: bool = False
    # Refused by a policy (not merely unaddressed): logged once an hour per chat, counted in /status.
    refused: bool = False


def decide(msg: IncomingMessage, cfg: PolicyConfig, me_id: int | None) -> Decision:
    sender = msg.sender
    if msg.is_outgoing or (sender is not None and me_id is not None and sender.id == me_id):
        return Decision(False, "own message")
    if msg.chat.type == "channel":
        return Decision(False, "broadcast channel")
    if sender is not None and sender.is_bot:
        return Decision(False, "sender is a bot", keep_as_context=msg.chat.type == "group")
    if msg.chat.type == "dm":
        return _dm(msg, cfg)
    return _group(msg, cfg)


def _dm(msg: IncomingMessage, cfg: PolicyConfig) -> Decision:
    sender_id = msg.sender.id if msg.sender else None
    policy = cfg.dm_policy
    if policy == "disabled":
        return Decision(False, "dm_policy is disabled", refused=True)
    if policy == "admin-only" and not cfg.is_admin(sender_id):
        return Decision(False, "dm_policy is admin-only", refused=True)
    if policy == "allowlist" and not (cfg.is_admin(sender_id) or _allowed_user(msg, cfg)):
        return Decision(False, "sender not in allow_from", refused=True)
    return Decision(True, "dm")


def _group(msg: IncomingMessage, cfg: PolicyConfig) -> Decision:
    sender_id = msg.sender.id if msg.sender else None
    policy = cfg.group_policy
    if policy == "disabled":
        return Decision(False, "group_policy is disabled", refused=True)
    if policy == "allowlist" and msg.chat.id not in cfg.group_allow_from:
        return Decision(False, "group not in group_allow_from", refused=True)
    addressed = msg.mentions_us or msg.reply_to_us
    if policy == "admin-only" and not cfg.is_admin(sender_id):
        return Decision(False, "group_policy is admin-only", keep_as_context=True, refused=True)
    if cfg.require_mention and not addressed:
        return Decision(False, "not addressed", keep_as_context=True)
    return Decision(True, "group")


def _allowed_user(msg: IncomingMessage, cfg: PolicyConfig) -> bool:
    sender = msg.sender
    if sender is None:
        return False
    if sender.id in cfg.allow_user_ids:
        return True
    return sender.username is not None and sender.username.lower() in cfg.allow_usernames
