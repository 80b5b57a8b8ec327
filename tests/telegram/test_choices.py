"""Options the agent offers, and a deep link's /start: real Telethon TL updates through an unconnected
client, the real agent, the real ``openai`` SDK against the scripted server on 127.0.0.1.

On a bot account the options are inline buttons and a press comes back as the presser's message, in reply
to the question, through the same gate; on a user account they are numbered in the text. ``/start PAYLOAD``
(t.me/<bot>?start=PAYLOAD) reaches the model as someone opening the chat through that link.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from telethon import functions, utils
from telethon.tl import types

from teleton.storage import Database
from tests.agent.conftest import MAIN_MODEL
from tests.fakes.anthropic_server import Reply, text, tool_use
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.conftest import ADMIN, ALICE, GROUP, ME, new_message
from tests.telegram.stream_world import World, deliver, make_world

GROUP_ID = utils.get_peer_id(GROUP)
OPTIONS = ["Tea", "Coffee", "A long option that will not fit in one short row"]
_queries = itertools.count(1)


async def made(tmp_path: Path, db: Database, fake: FakeOpenAI, mode: str) -> AsyncIterator[World]:
    async for world in make_world(tmp_path, db, fake, mode=mode, stream_edits=False):
        yield world


@pytest.fixture
async def bot(tmp_path: Path, db: Database, fake_openai: FakeOpenAI) -> AsyncIterator[World]:
    async for world in made(tmp_path, db, fake_openai, "bot"):
        yield world


@pytest.fixture
async def user(tmp_path: Path, db: Database, fake_openai: FakeOpenAI) -> AsyncIterator[World]:
    async for world in made(tmp_path, db, fake_openai, "user"):
        yield world


def model(world: World) -> list[str]:
    """The main model offers the options when asked to choose, and otherwise says what it was told."""
    asked: list[str] = []

    def respond(body: dict[str, Any]) -> Reply:
        if body["model"] != MAIN_MODEL:
            return text("ok")
        last = body["messages"][-1]
        asked.append(str(last["content"]))
        if last["role"] == "user" and str(last["content"]).endswith("let me choose a drink"):
            return tool_use(("offer_choices", {"text": "What would you like?", "options": OPTIONS}))
        return text("Noted." if last["role"] == "tool" else "Got it.")

    world.fake.responder = respond
    return asked


def shows_the_question(world: World, question: functions.messages.SendMessageRequest, message_id: int) -> None:
    """Telegram answers a lookup of the question with the message as sent, its buttons included."""
    answer = world.client.answer

    def with_question(request: Any) -> Any:
        if isinstance(request, functions.messages.GetMessagesRequest):
            found = types.Message(
                id=message_id, peer_id=types.PeerChat(GROUP.id), date=datetime.now(UTC), message=question.message,
                out=True, from_id=types.PeerUser(ME.id), reply_markup=question.reply_markup,
            )  # fmt: skip
            return types.messages.Messages(messages=[found], topics=[], chats=[GROUP], users=[ME])
        return answer(request)

    world.client.answer = with_question  # type: ignore[method-assign]


def press(user: types.User, msg_id: int, data: bytes) -> Any:
    update = types.UpdateBotCallbackQuery(
        query_id=next(_queries), user_id=user.id, peer=types.PeerChat(GROUP.id), msg_id=msg_id, chat_instance=1,
        data=data,
    )  # fmt: skip
    update._entities = {user.id: user, GROUP.id: GROUP}
    return update


def callback_answers(world: World) -> list[str]:
    return [r.message for r in world.client.requests if isinstance(r, functions.messages.SetBotCallbackAnswerRequest)]


async def test_a_bot_offers_buttons_and_a_press_comes_back_as_the_pressers_answer(bot: World) -> None:
    asked = model(bot)
    await deliver(bot, new_message(GROUP, ALICE, "@teleton_bot let me choose a drink"))
    question = next(r for r in bot.client.sent() if r.reply_markup is not None)
    buttons = [(b.text, b.type.data) for row in question.reply_markup.rows for b in row.buttons]
    assert buttons == [(o, f"pick:{i}".encode()) for i, o in enumerate(OPTIONS)]
    assert [len(row.buttons) for row in question.reply_markup.rows] == [1, 1, 1]  # a long option: a row each
    assert question.message.startswith("What would you like?")
    question_id = int((await bot.db.fetchone(
        "select message_id from tg_messages where chat_id = ? and is_outgoing = 1 and text like 'What would%'",
        (GROUP_ID,),
    ))[0])  # fmt: skip
    shows_the_question(bot, question, question_id)

    await deliver(bot, press(ALICE, question_id, b"pick:1"))
    assert "Coffee" in asked[-1] and "What would you like?" in asked[-1]  # the pick, in reply to the question
    assert callback_answers(bot)[-1] == "Coffee"
    assert bot.client.sent()[-1].message == "Got it."  # answered in the group

    await deliver(bot, press(ALICE, question_id, b"pick:7"))  # no such option
    assert callback_answers(bot)[-1] == "This choice is no longer available."


async def test_a_user_account_numbers_the_options_in_the_text(user: World) -> None:
    model(user)
    await deliver(user, new_message(GROUP, ALICE, "@teleton_bot let me choose a drink"))
    question = next(r for r in user.client.sent() if r.message.startswith("What would you like?"))
    assert question.reply_markup is None
    assert question.message.endswith("1. Tea\n2. Coffee\n3. A long option that will not fit in one short row")


async def test_a_deep_links_start_reaches_the_model_as_opening_the_chat_through_it(bot: World) -> None:
    asked = model(bot)
    await deliver(bot, new_message(ADMIN, ADMIN, "/start ref_spring-42"))
    assert 'through a link carrying "ref_spring-42"' in asked[-1]
    await deliver(bot, new_message(ADMIN, ADMIN, "/start"))
    assert "Opened this chat (/start)" in asked[-1]
    await deliver(bot, new_message(ADMIN, ADMIN, "/start <script>"))  # not a payload Telegram would send
    assert "/start <script>" in asked[-1] and "Opened this chat" not in asked[-1]
