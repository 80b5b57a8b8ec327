"""Buttons on a bot account's messages: Approve / Deny for held sends (docs/privacy.md, "Egress"), and the options
the agent offers (``offer_choices``).

A bot can attach inline buttons to a message; a user account cannot, so there the notice asks for
``/approve N CODE`` or ``/deny N`` typed back, and the options are numbered in the text. An approval's button
carries exactly its command as its callback data, and a press becomes that command typed by whoever pressed
it, in that chat: it goes through the same policy gate and the same owner-only command as the typed form, so
a button is never a second door. An option's button carries its number (callback data holds 64 bytes; an
option's words may not fit): a press reads the option's words back from the message's buttons and becomes
them, typed by whoever pressed, in reply to the question, through the same gate.
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
PICK = re.compile(rb"^pick:([0-9]{1,2})$")
ONE_ROW_MAX = 3  # more options, or a long one, get a row each


def inline_buttons(choices: Sequence[tuple[str, str]]) -> list[list[Any]]:
    """Callback buttons for (label, command): an approval's data is its command, an option's its number."""
    buttons = [
        Button.inline(label, data=command.encode() if CHOICE.match(command.encode()) else f"pick:{i}".encode())
        for i, (label, command) in enumerate(choices)
    ]
    if len(buttons) <= ONE_ROW_MAX and all(len(label) <= 20 for label, _ in choices):
        return [buttons]
    return [[button] for button in buttons]


class ChoiceButtons:
    """Turns presses of our buttons into what they stand for: an approval's command, an option's words."""

    def __init__(self, offer: Callable[[IncomingMessage], Any]) -> None:
        self.offer = offer  # the dispatcher's gate: policy, lanes, the agent's command handling

    def install(self, client: TelegramClient) -> None:
        client.add_event_handler(self.on_press, events.CallbackQuery(data=CHOICE))
        client.add_event_handler(self.on_pick, events.CallbackQuery(data=PICK))

    async def on_pick(self, event: events.CallbackQuery.Event) -> None:
        found = PICK.match(bytes(event.data))
        message = await event.get_message()  # the question, with its buttons: the option's words
        markup = getattr(message, "reply_markup", None)
        labels = [str(b.text) for row in getattr(markup, "rows", None) or [] for b in row.buttons]
        index = int(found.group(1)) if found else len(labels)
        if message is None or index >= len(labels):
            await event.answer("This choice is no longer available.")
            return
        msg = IncomingMessage(
            chat=ChatInfo(id=int(event.chat_id), type="dm" if int(event.chat_id) > 0 else "group"),
            sender=UserInfo(id=int(event.sender_id)),
            # Not a message of the chat: never collides with one, and each press (its query id) is its own.
            message_id=-(abs(int(event.query.query_id)) % 2**62 + 1),
            text=labels[index],
            date=time.time(),
            reply_to_id=int(message.id),
            reply_to_us=True,
        )
        decision = self.offer(msg)
        accepted = getattr(decision, "accept", False)
        log.info("option_picked", chat_id=msg.chat.id, option=index, accepted=accepted)
        await event.answer(labels[index] if accepted else "Not accepted here.")

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
