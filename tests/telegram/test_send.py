"""Actions out: what Telethon actually sends for a reply, and how failures surface."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from telethon import errors, functions, utils
from telethon.tl import types

from teleton.agent.turn import Turn
from teleton.agent.voice_replies import VoiceReplies
from teleton.gateway.contract import ChatInfo, GatewayError, IncomingMessage
from teleton.media.speech import SpeechClient
from teleton.privacy import Clearance, Taint
from teleton.telegram.send.split import utf16_len
from tests.fakes.openai_speech import FakeSpeech
from tests.telegram.conftest import ALICE, GROUP, GatewayHarness, new_message
from tests.waiting import until


def flood(seconds: int) -> errors.FloodWaitError:
    return errors.FloodWaitError(request=None, capture=seconds)


async def test_reply_is_sent_with_formatting_entities_and_archived(harness: GatewayHarness) -> None:
    sent = await harness.gateway.send_message(ALICE.id, "Here is **bold** and `code`", reply_to=7)
    [req] = harness.client.sent()
    assert req.message == "Here is bold and code"
    assert [(type(e).__name__, e.offset, e.length) for e in req.entities] == [
        ("MessageEntityBold", 8, 4),
        ("MessageEntityCode", 17, 4),
    ]
    assert req.reply_to.reply_to_msg_id == 7
    row = await harness.db.fetchone(
        "select text, is_outgoing, sender_id from tg_messages where message_id = ?", (sent.message_id,)
    )
    assert tuple(row) == ("Here is bold and code", 1, 1000)


async def test_flood_wait_during_send_sleeps_the_stated_time_and_retries(harness: GatewayHarness) -> None:
    harness.client.failures = [flood(1)]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # what the gateway sleeps, recorded instead of timed
        slept.append(seconds)
        await asyncio.sleep(0)

    harness.gateway._sleep = sleep
    sent = await harness.gateway.send_message(ALICE.id, "after the wait")
    assert slept == [1.0]  # the stated time, once
    assert len(harness.client.sent()) == 2  # the failed try, then the one that went through
    assert sent.message_id > 0


async def test_flood_wait_longer_than_allowed_is_a_clear_error_not_a_crash(harness: GatewayHarness) -> None:
    harness.client.failures = [flood(3600)]
    with pytest.raises(GatewayError, match="asked to wait 3600 s"):
        await harness.gateway.send_message(ALICE.id, "hello")
    # The gateway keeps working afterwards.
    assert (await harness.gateway.send_message(ALICE.id, "hello again")).message_id > 0


async def test_repeated_flood_waits_give_up_after_bounded_tries(harness: GatewayHarness) -> None:
    harness.client.failures = [flood(0), flood(0), flood(0), flood(0)]
    with pytest.raises(GatewayError, match="still limited after 3 tries"):
        await harness.gateway.send_message(ALICE.id, "hello")
    assert len(harness.client.sent()) == 3


async def test_flood_wait_inside_an_agent_turn_does_not_stop_the_lane(harness: GatewayHarness) -> None:
    async def agent(msg: Any) -> None:
        await harness.gateway.send_message(msg.chat.id, f"echo {msg.text}")

    harness.gateway.dispatcher.handler = agent
    harness.client.failures = [flood(3600)]
    await harness.dispatch(new_message(ALICE, ALICE, "one"), new_message(ALICE, ALICE, "two"))
    await harness.settle()
    assert harness.gateway.dispatcher.failures == 1
    assert [r.message for r in harness.client.sent()][-1] == "echo two"


def _long_reply() -> str:
    paragraphs = []
    for i in range(40):
        paragraphs.append(f"Paragraph {i}. " + "This sentence is part of a long answer. " * 6)
    text = "\n\n".join(paragraphs)
    assert len(text) > 10_000
    return text[:10_000].rsplit(" ", 1)[0] + "."


async def test_ten_thousand_char_reply_is_split_at_paragraph_boundaries(harness: GatewayHarness) -> None:
    text = _long_reply()
    await harness.gateway.send_message(ALICE.id, text)
    parts = [r.message for r in harness.client.sent()]
    assert len(parts) == 3
    assert all(utf16_len(p) <= 4096 for p in parts)
    assert all(p.endswith(".") for p in parts)  # each cut falls after a full sentence/paragraph
    assert " ".join(" ".join(p.split()) for p in parts) == " ".join(text.split())  # nothing lost
    assert len(await harness.rows(ALICE.id)) == 3  # every part archived as ours


async def test_split_entities_stay_inside_each_part_with_astral_characters(harness: GatewayHarness) -> None:
    text = ("😀 **bold words here** and more. " * 400).strip()
    await harness.gateway.send_message(ALICE.id, text)
    for req in harness.client.sent():
        size = utf16_len(req.message)
        assert size <= 4096
        for ent in req.entities:
            assert 0 <= ent.offset and ent.offset + ent.length <= size
            chunk = req.message.encode("utf-16-le")[ent.offset * 2 : (ent.offset + ent.length) * 2]
            assert chunk.decode("utf-16-le") == "bold words here"


async def test_rejected_formatting_is_resent_as_plain_text(harness: GatewayHarness) -> None:
    def reject_entities(request: Any) -> Exception | None:
        if isinstance(request, functions.messages.SendMessageRequest) and request.entities:
            return errors.EntityBoundsInvalidError(request=request)
        return None

    harness.client.fail_when = reject_entities
    sent = await harness.gateway.send_message(ALICE.id, "**oops** _broken_ [x](https://e.x)")
    first, second = harness.client.sent()
    assert first.entities and not second.entities
    assert second.message == "oops broken x"
    assert sent.message_id > 0


@pytest.mark.parametrize(
    "text",
    [
        "unclosed **bold and _italic",
        "a * b * c = d",
        "snake_case_name and __init__",
        "```\nno closing fence",
        "[link](javascript:alert(1))",
        "**",
        "_",
        "`",
        "~~~~",
        "# ",
        "> ",
        "- ",
    ],
)
async def test_hostile_markdown_never_fails_the_reply(harness: GatewayHarness, text: str) -> None:
    await harness.gateway.send_message(ALICE.id, text)
    [req] = harness.client.sent()
    assert req.message.strip()
    size = utf16_len(req.message)
    assert all(0 <= e.offset and e.offset + e.length <= size for e in req.entities or [])
    assert not any(isinstance(e, types.MessageEntityTextUrl) for e in req.entities or [])


async def test_ten_megabyte_reply_is_capped_with_a_notice(harness: GatewayHarness) -> None:
    await harness.gateway.send_message(ALICE.id, "word " * 2_000_000)
    parts = [r.message for r in harness.client.sent()]
    assert len(parts) == 10
    assert parts[-1].startswith("[… reply truncated:")


async def test_empty_reply_is_refused_clearly(harness: GatewayHarness) -> None:
    with pytest.raises(GatewayError, match="empty"):
        await harness.gateway.send_message(ALICE.id, "  \n ")
    assert harness.client.sent() == []


async def test_unknown_chat_is_a_gateway_error(harness: GatewayHarness) -> None:
    with pytest.raises(GatewayError, match="resolve chat"):
        await harness.gateway.send_message(-1000000000042, "hello")


async def test_send_uses_the_peer_seen_in_the_update(harness: GatewayHarness) -> None:
    await harness.dispatch(new_message(GROUP, ALICE, "@teleton_bot hi", extra=(GROUP,)))
    await harness.settle()
    await harness.gateway.send_message(utils.get_peer_id(GROUP), "hello group")
    [req] = harness.client.sent()
    assert req.peer == types.InputPeerChat(GROUP.id)


async def test_typing_indicator_while_the_agent_works(harness: GatewayHarness) -> None:
    harness.gateway.dispatcher.typing = harness.gateway.typing
    harness.agent.delay = 0.1
    await harness.dispatch(new_message(ALICE, ALICE, "think hard"))
    await harness.settle()
    typing = [r for r in harness.client.requests if isinstance(r, functions.messages.SetTypingRequest)]
    assert typing and typing[0].peer == types.InputPeerUser(ALICE.id, ALICE.access_hash)


async def test_edit_and_delete_our_reply(harness: GatewayHarness) -> None:
    sent = await harness.gateway.send_message(ALICE.id, "draft **one**")
    await harness.gateway.edit_message(ALICE.id, sent.message_id, "final **two**")
    edit = next(r for r in harness.client.requests if isinstance(r, functions.messages.EditMessageRequest))
    assert (edit.id, edit.message) == (sent.message_id, "final two")
    assert [type(e).__name__ for e in edit.entities] == ["MessageEntityBold"]
    await harness.gateway.delete_messages(ALICE.id, [sent.message_id])
    row = await harness.db.fetchone("select text, deleted from tg_messages where message_id = ?", (sent.message_id,))
    assert tuple(row) == ("draft one", 1)  # deletion marks the archive; the edit arrives as an update
    with pytest.raises(GatewayError, match="empty"):
        await harness.gateway.edit_message(ALICE.id, sent.message_id, " ")


async def test_stop_lets_a_running_turn_finish_its_reply(db: Any) -> None:
    from tests.telegram.conftest import make_harness

    h = await make_harness(db)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_agent(msg: Any) -> None:
        started.set()
        await release.wait()  # the turn runs until the gateway is stopping
        await h.gateway.send_message(msg.chat.id, "done thinking")

    h.gateway.dispatcher.handler = slow_agent
    await h.dispatch(new_message(ALICE, ALICE, "question"))
    await asyncio.wait_for(started.wait(), timeout=60)  # hang guards only
    stopping = asyncio.create_task(h.gateway.stop(grace_s=60))
    await until(lambda: h.gateway.dispatcher._closing)  # the stop has begun: no new turns from here on
    assert not stopping.done()  # waiting for the running turn
    release.set()
    await asyncio.wait_for(stopping, timeout=60)
    assert [r.message for r in h.client.sent()] == ["done thinking"]
    row = await db.fetchone("select count(*) from tg_messages where is_outgoing = 1")
    assert row[0] == 1  # the reply is archived too: the archive is flushed after the last turn


async def test_telegrams_own_transcription_is_asked_again_while_pending(
    harness: GatewayHarness, monkeypatch: Any
) -> None:
    states = iter([True, True, False])
    asked: list[Any] = []

    def answer(request: Any) -> Any:  # Telegram's side: pending twice, then the text
        assert isinstance(request, functions.messages.TranscribeAudioRequest)
        asked.append(request)
        pending = next(states)
        return types.messages.TranscribedAudio(
            transcription_id=7, text="" if pending else "call the dentist on thursday", pending=pending
        )

    monkeypatch.setattr(harness.client, "answer", answer)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    harness.gateway._sleep = sleep
    assert await harness.gateway.transcribe_audio(ALICE.id, 42) == "call the dentist on thursday"
    assert [r.msg_id for r in asked] == [42, 42, 42] and slept == [2.0, 4.0]

    def premium_only(request: Any) -> Any:
        raise errors.PremiumAccountRequiredError(request=request)

    monkeypatch.setattr(harness.client, "answer", premium_only)
    with pytest.raises(GatewayError):
        await harness.gateway.transcribe_audio(ALICE.id, 43)


async def test_a_voice_reply_shows_recording_in_its_topic_before_the_voice_note(
    harness: GatewayHarness, tmp_path: Path
) -> None:
    """While the voice is made, the chat shows "recording a voice message…" (in the forum topic it answers)."""
    with FakeSpeech() as tts:
        speech = SpeechClient(tts.base_url, api_key="k", model="tts-1", voice="nova")
        voice = VoiceReplies("always", speech, harness.gateway, tmp_path)
        await harness.dispatch(new_message(GROUP, ALICE, "hello"))  # the chat is known, as after any message
        msg = IncomingMessage(chat=ChatInfo(utils.get_peer_id(GROUP), "group"), sender=None, message_id=5,
                              text="sing it", date=0.0, topic_id=77)  # fmt: skip
        turn = Turn(msg=msg, is_admin=False, clearance=Clearance(f"chat:{utils.get_peer_id(GROUP)}"), taint=Taint(),
                    reply="La la la.")  # fmt: skip
        await voice.after_reply(turn)
        await speech.aclose()
    shown = [r for r in harness.client.requests if isinstance(r, functions.messages.SetTypingRequest)]
    assert [(type(r.action), r.top_msg_id) for r in shown] == [(types.SendMessageRecordAudioAction, 77)]
    assert tts.requests and tts.requests[0]["input"] == "La la la."  # recording shown, then the voice made
    await harness.gateway.typing(utils.get_peer_id(GROUP))
    assert isinstance(harness.client.requests[-1].action, types.SendMessageTypingAction)  # the default: typing
