"""The whole path with real Telethon: a Telegram update is archived, gated and queued by the Telegram
layer, answered by the agent through the scripted Messages API, and sent back as a real SendMessageRequest."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from telethon.tl import types

from teleton.agent.runtime import Agent, AgentDeps, AgentSettings
from teleton.llm import LLMClient
from teleton.memory.facts.store import FactStore
from teleton.privacy import Principals
from teleton.storage import Database
from teleton.telegram.gateway import TelegramGateway
from teleton.tools.families.memory import memory_tools
from teleton.tools.families.telegram_actions import telegram_tools
from teleton.tools.outbox import Outbox
from teleton.tools.registry import ToolRegistry
from tests.agent.conftest import llm_settings
from tests.fakes.anthropic_server import FakeAnthropic, sequence, text, tool_use, user_said
from tests.telegram.conftest import ADMIN, ALICE, GROUP, ME, RecordingClient, make_settings, new_message


async def test_a_telegram_dm_and_group_mention_are_answered(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    fake_api.responder = lambda body: text(f"echo: {user_said(body)}")
    client = RecordingClient()
    gateway = TelegramGateway(client, db, make_settings())
    gateway.set_me(ME)
    llm = LLMClient(llm_settings(), api_key="test", base_url=fake_api.base_url)
    (tmp_path / "ws").mkdir()
    agent = Agent(
        AgentDeps(
            db=db,
            llm=llm,
            gateway=gateway,
            registry=ToolRegistry(memory_tools()),
            workspace=tmp_path / "ws",
            facts=FactStore(db),
            principals=Principals(owner_id=ADMIN.id),
        ),
        AgentSettings(session_reset_hour=None, session_idle_minutes=None),
    )
    dispatcher = gateway.on_message(agent.handle)
    gateway.install()
    client.session.process_entities(
        types.contacts.ResolvedPeer(peer=types.PeerUser(ALICE.id), chats=[GROUP], users=[ME, ALICE, ADMIN])
    )

    await client._dispatch_update(new_message(ADMIN, ADMIN, "hello from Telegram"))
    await client._dispatch_update(new_message(GROUP, ALICE, "@teleton_bot what's up?", mentioned=True))
    await gateway.batcher.drain()
    await dispatcher.idle()

    sent = {(r.peer.__class__.__name__, r.message) for r in client.sent()}
    assert ("InputPeerUser", "echo: hello from Telegram") in sent
    assert ("InputPeerChat", "echo: Alice (@alice): @teleton_bot what's up?") in sent
    dm_body = next(b for b in fake_api.requests if "hello from Telegram" in str(b["messages"]))
    assert "memory_read" in {t["name"] for t in dm_body["tools"]}  # the owner's DM
    group_body = next(b for b in fake_api.requests if "what's up" in str(b["messages"]))
    assert "memory_read" not in {t["name"] for t in group_body["tools"]}
    # Our replies are archived as outgoing messages of the chat, so the next turn sees them as context.
    rows = await db.fetchall("select text from tg_messages where is_outgoing = 1")
    assert {r["text"] for r in rows} >= {"echo: hello from Telegram"}
    await gateway.stop(grace_s=1)
    await llm.close()


async def test_a_held_send_is_approved_with_a_bot_button(tmp_path: Path, db: Database, fake_api: FakeAnthropic) -> None:
    """Bot account: the owner's notice carries Approve / Deny buttons; a press is the typed command, through
    the same gate, so only the owner's press in the owner's DM sends anything."""
    group_id = -GROUP.id  # Telegram's marked id of the basic group
    fake_api.responder = sequence(
        tool_use(("send_message", {"chat_id": group_id, "text": "The plan is ready."})), then=lambda b: text("ok")
    )
    client = RecordingClient()
    gateway = TelegramGateway(client, db, replace(make_settings(), mode="bot"))
    gateway.set_me(ME)
    llm = LLMClient(llm_settings(), api_key="test", base_url=fake_api.base_url)
    (tmp_path / "ws").mkdir()
    principals = Principals(owner_id=ADMIN.id)
    outbox = Outbox(db, gateway, principals)
    agent = Agent(
        AgentDeps(
            db=db,
            llm=llm,
            gateway=gateway,
            registry=ToolRegistry(telegram_tools()),
            workspace=tmp_path / "ws",
            principals=principals,
            outbox=outbox,
        ),
        AgentSettings(session_reset_hour=None, session_idle_minutes=None),
    )
    dispatcher = gateway.on_message(agent.handle)
    gateway.install()
    client.session.process_entities(
        types.contacts.ResolvedPeer(peer=types.PeerUser(ALICE.id), chats=[GROUP], users=[ME, ALICE, ADMIN])
    )

    await client._dispatch_update(new_message(ADMIN, ADMIN, "tell the book club the plan is ready"))
    await gateway.batcher.drain()
    await dispatcher.idle()
    notice = next(r for r in client.sent() if r.reply_markup is not None)
    assert notice.peer.user_id == ADMIN.id and "The plan is ready." in notice.message
    buttons = [(b.text, b.type.data) for row in notice.reply_markup.rows for b in row.buttons]
    code = (await db.fetchone("select digest from pending_sends where id = 1"))["digest"][:8]
    approve = f"/approve 1 {code}".encode()
    assert buttons == [("Approve", approve), ("Deny", b"/deny 1")]
    assert not [r for r in client.sent() if isinstance(r.peer, types.InputPeerChat)]  # nothing reached the group

    def press(user: types.User, data: bytes) -> types.UpdateBotCallbackQuery:
        update = types.UpdateBotCallbackQuery(
            query_id=7, user_id=user.id, peer=types.PeerUser(user.id), msg_id=99, chat_instance=1, data=data
        )
        update._entities = {user.id: user}
        return update

    await client._dispatch_update(press(ALICE, approve))  # someone else's press in their own DM
    await dispatcher.idle()
    assert not [r for r in client.sent() if isinstance(r.peer, types.InputPeerChat)]
    assert (await db.fetchone("select status from pending_sends where id = 1"))[0] == "pending"
    await client._dispatch_update(press(ADMIN, b"/approve 1"))  # a press without the code is not accepted
    await dispatcher.idle()
    assert (await db.fetchone("select status from pending_sends where id = 1"))[0] == "pending"
    await client._dispatch_update(press(ADMIN, approve))
    await dispatcher.idle()
    to_group = [r for r in client.sent() if isinstance(r.peer, types.InputPeerChat)]
    assert [r.message for r in to_group] == ["The plan is ready."]
    row = await db.fetchone("select status, decided_by from pending_sends where id = 1")
    assert tuple(row) == ("sent", ADMIN.id)
    assert client.sent()[-1].message.startswith("Done #1: Sent to chat -500")  # the owner is told
    await gateway.stop(grace_s=1)
    await llm.close()
