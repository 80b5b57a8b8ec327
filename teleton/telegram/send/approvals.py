"""Approve / Deny buttons for held sends, on a bot account (DESIGN §8, "Egress").

A bot can attach inline buttons to a message; a user account cannot, so there the notice asks for
``/approve N CODE`` or ``/deny N`` typed back. A button carries exactly that command as its callback data, and a
press becomes that command typed by whoever pressed it, in that chat: it goes through the same policy gate
and the same owner-only command as the typed form, so a button is never a second door.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import structlog
from telethon import Button, TelegramClient, events

from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo

log = structlog.get_logger(__name__)

CHOICE = re.compile(rb"^/(approve [1-9][0-9]{0,9} [0-9a-f]{8}|deny [1-9][0-9]{0,9})$")


def inline_buttons(choices: Sequence[tuple[str, str]]) -> list[list[Any]]:
    """One row of callback buttons: (label, command) -> a button whose data is the command."""
    return [[Button.inline(label, data=command.encode()) for label, command in choices]]


class ChoiceButtons:
    """Turns presses of our Approve / Deny buttons into the commands they stand for."""

    def __init__(self, offer: Callable[[IncomingMessage], Any]) -> None:
        self.offer = offer  # the dispatcher's gate: policy, lanes, the agent's command handling

    def install(self, client: TelegramClient) -> None:
        client.add_event_handler(self.on_press, events.CallbackQuery(data=CHOICE))

    async def on_press(self, event: events.CallbackQuery.Event) -> None:
        command = bytes(event.data).decode()
        msg = IncomingMessage(
            chat=ChatInfo(id=int(event.chat_id), type="dm" if int(event.chat_id) > 0 else "group"),
            sender=UserInfo(id=int(event.sender_id)),
            message_id=-int(event.query.msg_id),  # not a message of the chat: never collides with one
            text=command,
            date=time.time(),
        )
        decision = self.offer(msg)
        log.info("choice_pressed", command=command, chat_id=msg.chat.id, accepted=getattr(decision, "accept", None))
        await event.answer(command if getattr(decision, "accept", False) else "Not accepted here.")
