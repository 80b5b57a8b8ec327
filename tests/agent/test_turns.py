"""End-to-end turns through the runtime and the gateway, the model played by the scripted API."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from dataclasses import replace
from datetime import datetime

from teleton.agent.prompt.memory import FEED_HEADER, KNOWLEDGE_HEADER
from teleton.gateway.contract import ChatInfo, IncomingMessage, Thread, UserInfo
from teleton.llm.tool_loop import ToolResult
from teleton.llm.types import sendable
from teleton.telegram.receive.dispatch import Dispatcher, Gate
from teleton.telegram.receive.policy import PolicyConfig
from teleton.telegram.receive.policy_control import GatePolicy
from teleton.telegram.receive.ratelimit import RateLimiter
from teleton.tools.registry import Tool, ToolContext
from tests.agent.conftest import ALICE, GROUP, OWNER, OWNER_DM, AgentHarness
from tests.fakes.anthropic_server import (
    Body,
    Reply,
    body_text,
    error,
    last_user_text,
    overloaded,
    prompt_too_long,
    result_text,
    sequence,
    text,
    tool_results,
    tool_use,
    user_said,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.turn_message import turn_message
from tests.waiting import until


async def add_knowledge(h: AgentHarness, chunk: str, path: str = "MEMORY.md") -> None:
    now = time.time()
    await h.db.execute(
        "insert into knowledge(source, path, heading, text, hash, created_at, updated_at) "
        "values ('memory', ?, '', ?, ?, ?, ?)",
        (path, chunk, str(hash(chunk)), now, now),
    )


def today_log(h: AgentHarness) -> str:
    path = h.workspace / "memory" / f"{datetime.now().astimezone():%Y-%m-%d}.md"
    return path.read_text() if path.exists() else ""


async def test_dm_question_answered_from_a_knowledge_chunk(any_harness: AgentHarness) -> None:
    h = any_harness
    await add_knowledge(h, "The wifi password at the lake cabin is pinecone42.")
    await add_knowledge(h, "Olga's dentist appointment is on the 3rd.", path="memory/health.md")

    def model(body: Body) -> Reply:
        user = last_user_text(body)
        if KNOWLEDGE_HEADER in user and "pinecone42" in user:
            return text("The cabin wifi password is pinecone42.")
        return text("I don't know.")

    h.main = model
    reply = await h.dm("What's the wifi password at the lake cabin?")
    assert reply == "The cabin wifi password is pinecone42."
    assert h.gateway.sent[-1].text == reply and h.gateway.sent[-1].chat_id == OWNER_DM.id
    assert "pinecone42" in h.console_out.getvalue()
    sent_user = h.fake.requests[-1]["messages"][-1]["content"]
    assert sent_user[0]["text"].startswith(KNOWLEDGE_HEADER) and "dentist" not in sent_user[0]["text"]
    # The exchange is in today's log, and the session stores the message without the RAG block.
    assert "User: What's the wifi password at the lake cabin? | Assistant: The cabin wifi password" in today_log(h)
    session = await h.agent.sessions.active(OWNER_DM.id)
    assert sendable(session.messages[0]) == {"role": "user", "content": "What's the wifi password at the lake cabin?"}


async def test_system_prompt_layout_and_cache_hits(harness: AgentHarness) -> None:
    h = harness
    (h.workspace / "SOUL.md").write_text("You are Teleton, dry and kind.")
    (h.workspace / "MEMORY.md").write_text("Olga prefers short answers.")
    await h.dm("hello there, how are you doing today?")
    await h.dm("tell me something about rivers please")
    first, second = h.main_requests()
    system = second["system"]
    assert system[0]["text"].startswith("# SOUL.md\nYou are Teleton") and system[0]["cache_control"]
    assert "Olga prefers short answers." in system[1]["text"] and system[1]["cache_control"]
    assert len(system) == 2 and "You are answering" not in json.dumps(system)  # what changes each turn is not in it
    note = turn_message(second).note  # ... but in the turn's own message, after the history
    assert "User: hello there" in note and "## Now" in note and "You are answering your owner, Olga" in note
    assert first["system"] == system  # byte-identical across turns
    status = await h.dm("/status")
    session = await h.agent.sessions.active(OWNER_DM.id)
    assert session.cache_read_tokens > 0
    assert f"cache reads {session.cache_read_tokens:,}" in status
    assert "Model: claude-test" in status and "messages" in status


async def test_trivial_messages_skip_retrieval(harness: AgentHarness) -> None:
    h = harness
    await add_knowledge(h, "ok ok ok thanks thanks")
    await h.dm("thanks!")
    sent = h.fake.requests[-1]["messages"][-1]["content"]
    assert KNOWLEDGE_HEADER not in json.dumps(sent)


async def test_feed_block_has_recent_messages_of_this_chat(harness: AgentHarness) -> None:
    h = harness
    for i in range(12):
        msg = h.message(GROUP, ALICE, f"group chatter number {i} about mushrooms")
        await h.archive(msg)
    await h.group("what were we saying about mushrooms?")
    context_block = h.fake.requests[-1]["messages"][-1]["content"][0]["text"]
    feed = context_block.split(FEED_HEADER)[1]
    recent, found = feed.split("number 11 about mushrooms")
    assert all(f"number {i} " in recent for i in range(2, 11)) and "number 1 " not in recent
    # Older matches come from the search, once each: the recent ones are not repeated.
    assert "number 0 " in found and "number 1 " in found and found.count("chatter") == 2
    assert "what were we saying" not in feed  # the message being answered is not its own context


async def test_a_529_storm_ends_in_a_reply(any_harness: AgentHarness) -> None:
    h = any_harness
    h.fake.queue(overloaded(), overloaded(0.01), overloaded(), overloaded(), text("Here I am."))
    assert await h.dm("are you there? please answer") == "Here I am."
    assert h.llm.retries == 4
    assert h.fake.pending == 0  # every scripted 529 was met by a retry, then the answer


async def test_model_down_gets_an_apology_and_the_session_stays_clean(any_harness: AgentHarness) -> None:
    h = any_harness
    h.fake.queue(*[overloaded() for _ in range(6)])
    reply = await h.dm("are you there? please answer")
    assert reply is not None and "can't reach" in reply
    session = await h.agent.sessions.active(OWNER_DM.id)
    assert session.messages == []


async def test_context_overflow_compacts_and_retries_once(any_harness: AgentHarness) -> None:
    h = any_harness
    for i in range(15):
        await h.dm(f"message number {i} about the garden")
    before = await h.agent.sessions.active(OWNER_DM.id)
    h.main = sequence(prompt_too_long(), text("Fits now."))
    assert await h.dm("and the roses?") == "Fits now."
    after = await h.agent.sessions.active(OWNER_DM.id)
    assert after.id != before.id and after.summary.startswith("Summary:")
    assert len(after.messages) < len(before.messages)
    h.main = sequence(prompt_too_long(), prompt_too_long())
    assert (await h.dm("x" * 5000)).startswith("That is more than I can read at once")


async def test_text_answer_is_not_repeated_after_a_send_tool(harness: AgentHarness) -> None:
    h = harness

    async def send_message(args: dict, ctx: ToolContext) -> ToolResult:
        sent = await ctx.deps.gateway.send_message(ctx.chat.id, args["text"])
        return ToolResult(f"sent #{sent.message_id}")

    h.agent.deps.registry.register(
        Tool(
            "send_message",
            "send a message",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            send_message,
        )
    )
    h.fake.queue(
        tool_use(("send_message", {"text": "first"}), ("send_message", {"text": "second"})),
        text("I sent two messages."),
    )
    assert await h.dm("send me two messages please") is None
    assert [m.text for m in h.gateway.sent] == ["first", "second"]


async def test_tool_errors_reach_the_model(any_harness: AgentHarness) -> None:
    h = any_harness
    h.fake.queue(tool_use(("memory_recall", {"query": 5})), text("fixed"))
    await h.dm("recall something please")
    (result,) = tool_results(h.fake.requests[-1])
    assert result["is_error"] and "Invalid input for memory_recall" in result_text(result)


async def test_daily_log_failure_never_blocks_a_reply(harness: AgentHarness) -> None:
    h = harness
    (h.workspace / "memory").write_text("not a directory")  # every daily-log write now fails
    assert await h.dm("hello, can you hear me?") == "ok"
    assert h.gateway.sent[-1].text == "ok"


async def test_stop_cancels_the_running_turn_and_queued_messages_wait(any_harness: AgentHarness) -> None:
    h = any_harness
    # The essay's answer stalls far longer than any turn here (a retry after a request timeout stalls again):
    # only /stop can end that turn.
    h.main = lambda body: text("too slow", delay=120) if "whales" in user_said(body) else text("second answer")
    first = asyncio.create_task(h.dm("write me a long essay on whales"))
    await until(lambda: h.main_requests())
    second = asyncio.create_task(h.dm("and a haiku after that"))
    await until(lambda: h.agent.locks._users[Thread(OWNER_DM.id)] == 2)
    assert not second.done()  # queued behind the running turn
    assert await h.dm("/stop") == "Stopped."
    assert await asyncio.wait_for(first, timeout=60) is None  # hang guard: the stalled request was cancelled
    assert await second == "second answer"
    assert "too slow" not in [m.text for m in h.gateway.sent]
    session = await h.agent.sessions.active(OWNER_DM.id)
    roles = [m["role"] for m in session.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert "stopped" in session.messages[1]["content"]
    assert await h.dm("/stop") == "Nothing is running."


async def test_commands(harness: AgentHarness) -> None:
    h = harness
    assert "/compact [N]" in await h.dm("/help")
    assert "/exit" not in await h.dm("/help")  # the terminal's own commands are listed only there
    assert "/pause" not in await h.dm("/help", sender=ALICE)
    assert await h.dm("/pause", sender=ALICE) == "/pause is for admins only."
    assert (await h.dm("/pause")).startswith("Paused")
    assert await h.dm("hello? anyone home?", sender=ALICE) is None
    assert await h.dm("/resume") == "Resumed."
    assert await h.dm("hello? anyone home?", sender=ALICE) == "ok"
    assert "not adjustable" in await h.dm("/policy")
    assert "memory_read" in await h.dm("/tools")
    assert "disabled" in (await h.dm("/tool disable memory_search")).lower()
    assert "memory_search" not in {t["name"] for t in h.agent.deps.registry.schemas(OWNER_DM, True)}
    assert await h.dm("/tools", sender=ALICE) == "/tools is for admins only."
    assert await h.group("/new", sender=ALICE) == "/new is for admins only in a group."
    assert (await h.group("/new", sender=OWNER)).startswith("Started a new conversation")
    for i in range(6):
        await h.dm(f"note number {i} for the record")
    assert (await h.dm("/compact 4")).startswith("Compacted: 8 messages summarised, 4 kept")
    assert (await h.dm("/compact x")).startswith("Usage: /compact [N]")
    assert "ended" not in (await h.dm("/new"))
    assert await h.agent.sessions.active(OWNER.id) is None


async def test_unknown_slash_text_goes_to_the_model(harness: AgentHarness) -> None:
    assert await harness.dm("/shrug what do you think") == "ok"


async def test_group_replies_quote_the_message_and_log_with_the_group(harness: AgentHarness) -> None:
    h = harness
    await h.group("hey bot, what's up?")
    assert h.gateway.sent[-1].chat_id == GROUP.id
    # The owner's log keeps the group's exchange as quoted data, with where it came from.
    assert "> [" in today_log(
        h
    ) and '(from group "Book club" (chat:-100777)) User: Alice (@alice): hey bot' in today_log(h)
    assert "Alice (@alice): hey bot, what's up?" in last_user_text(h.fake.requests[-1])
    assert "Book club" in body_text(h.fake.requests[-1]["system"])


async def test_hard_threshold_by_reported_tokens(any_harness: AgentHarness) -> None:
    h = any_harness
    for i in range(12):
        await h.dm(f"chat line {i} about the weather")
    h.main = sequence(text("big", usage={"input_tokens": 151_000, "output_tokens": 100}))  # 75.5% of 200k
    await h.dm("and tomorrow?")
    before = await h.agent.sessions.active(OWNER.id)
    assert before.last_input_tokens == 151_100
    await h.dm("and the day after?")
    after = await h.agent.sessions.active(OWNER.id)
    assert after.id != before.id and len(after.messages) == 22  # 20 kept + this exchange
    assert "Context: ~" in await h.dm("/status")


async def test_group_context_that_did_not_trigger_a_reply_is_included(harness: AgentHarness) -> None:
    h = harness
    earlier = (h.message(GROUP, OWNER, "I'll bring the wine"), h.message(GROUP, ALICE, "I'll bring cheese"))
    await h.group("@teleton who brings what?")
    await h.send(GROUP, ALICE, "@teleton and now?", earlier_context=earlier, mentions_us=True)
    said = h.fake.requests[-1]["messages"][-1]["content"][-1]["text"]
    assert said.splitlines() == [
        "[Earlier messages in this chat, not addressed to you]",
        "Olga (@olga): I'll bring the wine",
        "Alice (@alice): I'll bring cheese",
        "[Message to you]",
        "Alice (@alice): @teleton and now?",
    ]


async def test_a_burst_to_us_is_labelled_to_us_and_the_chatter_around_it_is_not(harness: AgentHarness) -> None:
    """A debounced burst: the messages that addressed the agent are under "to you", in order; only the
    chatter that did not is "not addressed to you"."""
    h = harness
    chatter = h.message(GROUP, OWNER, "I'll bring the wine")
    first = h.message(GROUP, ALICE, "@teleton who brings bread?", mentions_us=True)
    last = h.message(GROUP, ALICE, "@teleton and dessert?", mentions_us=True)
    for msg in (chatter, first, last):
        await h.archive(msg)
    await h.agent.handle(replace(last, earlier_context=(chatter, first), answering=(first.message_id, last.message_id)))
    said = h.fake.requests[-1]["messages"][-1]["content"][-1]["text"]
    assert said.splitlines() == [
        "[Earlier messages in this chat, not addressed to you]",
        "Olga (@olga): I'll bring the wine",
        "[Messages to you]",
        "Alice (@alice): @teleton who brings bread?",
        "Alice (@alice): @teleton and dessert?",
    ]


async def test_a_long_answer_reaches_the_gateway_whole(harness: AgentHarness) -> None:
    """Splitting is the gateway's: Telegram's entity-aware split (tests/telegram/test_send.py), the terminal
    shows it whole."""
    h = harness
    long = "\n\n".join(f"Paragraph {i}. " + " ".join(["word"] * 150) for i in range(12))
    h.main = sequence(text(long))
    await h.dm("write a lot please")
    assert [m.text for m in h.gateway.sent] == [long]


async def test_tool_rag_pick_limits_the_tools_sent(harness: AgentHarness) -> None:
    h = harness
    seen = []

    async def selector(
        query: str, vector: object, chat: object, is_admin: bool, is_owner: bool, offered: object
    ) -> list[str]:
        seen.append((query, is_admin))
        return ["memory_recall", "memory_read"]

    h.agent.deps.tool_selector = selector
    await h.dm("what do you remember about my cat?")
    await h.group("what do you remember about the book?")
    dm, group = h.main_requests()
    assert [t["name"] for t in dm["tools"]] == ["memory_read", "memory_recall"]
    assert [t["name"] for t in group["tools"]] == ["memory_recall"]  # the pick is still scope-filtered
    assert seen == [("what do you remember about my cat?", True), ("what do you remember about the book?", False)]


async def test_a_group_sees_its_own_facts_in_context(harness: AgentHarness) -> None:
    from teleton.memory.facts.store import Fact
    from teleton.privacy import group_label as chat_scope

    h = harness
    facts = h.agent.deps.facts
    await facts.save(Fact("The next book club book is Dune", category="plan", scope=chat_scope(GROUP.id)))
    await facts.save(Fact("Olga's next dentist visit is in March, book it", category="health"))
    await h.group("which book is next?")
    block = h.fake.requests[-1]["messages"][-1]["content"][0]["text"]
    assert block.startswith(KNOWLEDGE_HEADER) and "(fact, plan) The next book club book is Dune" in block
    assert "dentist" not in body_text(h.fake.requests[-1])
    await h.dm("which book should I read next?")
    assert "Dune" in body_text(h.fake.requests[-1])  # the owner's DM sees every scope


async def test_scheduled_turns_speak_in_their_chat(harness: AgentHarness) -> None:
    h = harness
    h.main = lambda body: text("Reminder: water the plants." if "water" in user_said(body) else "ok")
    await h.group("hello everyone")  # the archive now knows the group
    reply = await h.agent.run_scheduled(GROUP.id, "[Scheduled task #3 is due: remind]\nremind them to water plants")
    assert reply == "Reminder: water the plants."
    assert h.gateway.sent[-1].chat_id == GROUP.id
    body = h.fake.requests[-1]
    assert "memory_read" not in {t["name"] for t in body["tools"]}  # a group turn, with a group's rights
    assert await h.agent.run_scheduled(OWNER.id, "water check") == "Reminder: water the plants."
    assert h.gateway.sent[-1].chat_id == OWNER.id


async def test_a_reply_carries_the_message_it_answers(harness: AgentHarness) -> None:
    h = harness
    await h.group("which date works for the next meeting?")
    answer = h.gateway.sent[-1]
    await h.send(GROUP, ALICE, "yes, that one", reply_to_id=answer.message_id, mentions_us=True)
    said = h.fake.requests[-1]["messages"][-1]["content"][-1]["text"]
    assert said == "[In reply to you: ok]\nAlice (@alice): yes, that one"


async def test_chats_run_in_parallel_and_one_chat_in_order(harness: AgentHarness) -> None:
    h = harness
    in_flight: Counter[str] = Counter()  # what each request in flight answers (a retry is the same turn)
    peak = 0
    together = threading.Condition()

    def three_at_once(body: Body) -> Reply:
        """Holds each answer until three turns are at the model together (or a hang guard passes)."""
        nonlocal peak
        said = user_said(body)
        with together:
            in_flight[said] += 1
            peak = max(peak, len(+in_flight))
            together.notify_all()
            together.wait_for(lambda: peak >= 3, timeout=60)
            in_flight[said] -= 1
        return text(f"re: {said}")

    h.main = three_at_once
    replies = await asyncio.gather(
        h.dm("one from olga"), h.dm("one from alice", sender=ALICE), h.group("one from the group")
    )
    assert peak == 3  # three chats at once, not one after another
    assert replies == ["re: one from olga", "re: one from alice", "re: Alice (@alice): one from the group"]

    release = threading.Event()

    def first_waits(body: Body) -> Reply:
        if user_said(body) == "first":
            release.wait(60)  # hang guard only: the test releases it
        return text(f"re: {user_said(body)}")

    h.main = first_waits
    start = len(h.main_requests())
    both = asyncio.gather(h.dm("first"), h.dm("second"))
    # The first turn is held at the model; "second" reaches the chat's lock or (if turns of one chat ran
    # side by side) the model. Either way the first answer is released only then.
    await until(
        lambda: (
            len(h.main_requests(start)) >= 2
            or (len(h.main_requests(start)) == 1 and h.agent.locks._users[Thread(OWNER_DM.id)] == 2)
        )
    )
    assert {user_said(b) for b in h.main_requests(start)} == {"first"}
    release.set()
    assert await both == ["re: first", "re: second"]
    # one chat: strictly one turn after the other, the second turn built on the first one's answer
    second_body = h.main_requests(start)[-1]
    assert user_said(second_body) == "second" and "re: first" in body_text(second_body)
    session = await h.agent.sessions.active(OWNER.id)
    # (The owner's turns were shown the other chats' messages of this test, so each keeps a note of them.)
    said = [m["content"].split("\n\n(This exchange was shown")[0] for m in session.messages if m["role"] == "user"]
    assert said[-2:] == ["first", "second"]


async def test_tool_picks_are_sticky_so_the_prompt_cache_keeps_hitting(harness: AgentHarness) -> None:
    h = harness
    (h.workspace / "SOUL.md").write_text("You are Teleton, dry and kind. " * 200)  # over the cache's minimum
    picks = iter([["memory_recall"], ["memory_search"], ["memory_recall"], ["memory_recall"]])

    async def selector(
        query: str, vector: object, chat: object, is_admin: bool, is_owner: bool, offered: object
    ) -> list[str]:
        return next(picks)

    h.agent.deps.tool_selector = selector
    for question in ("what is my cat called?", "search for the cabin trip", "and my dog?", "and my fish?"):
        await h.dm(question)
    bodies = h.main_requests()
    assert [[t["name"] for t in b["tools"]] for b in bodies] == [
        ["memory_recall"],
        ["memory_recall", "memory_search"],
        ["memory_recall", "memory_search"],
        ["memory_recall", "memory_search"],
    ]
    session = await h.agent.sessions.active(OWNER.id)
    assert session.cache_read_tokens > 0  # turns 3 and 4 read the cached tools + system prefix


async def test_the_owners_status_counts_refused_messages_and_a_groups_does_not(harness: AgentHarness) -> None:
    h = harness
    refusing = PolicyConfig.build(dm_policy="disabled")
    gate = Dispatcher(handler=h.agent.handle, gate=Gate(refusing, RateLimiter(9, 9)))
    stranger = UserInfo(id=77, first_name="Stranger")
    for i in range(2):
        gate.offer(IncomingMessage(ChatInfo(id=77, type="dm"), stranger, i, "hello?", date=0))
    h.agent.deps.policy = GatePolicy(gate.gate)
    assert "Refused by policy since start: 2 DM messages, 0 group messages" in (await h.dm("/status") or "")
    assert "Refused" not in (await h.group("/status") or "")


async def test_the_agent_knows_its_account_once_telegram_has_connected(harness: AgentHarness) -> None:
    h = harness
    h.gateway.me = None  # the daemon builds the agent before Telegram says who it is
    await h.dm("hello")
    h.gateway.me = UserInfo(id=8080, first_name="Teleton", username="teleton_agent")  # connected: get_me()
    await h.dm("who are you?")
    before, after = (json.dumps(b["system"]) for b in h.main_requests())
    assert "Your Telegram account" not in before
    assert "Your Telegram account: Teleton (@teleton_agent)" in after


async def test_a_rejected_api_key_is_said_at_once_not_retried(any_harness: AgentHarness) -> None:
    h = any_harness
    h.main = lambda body: error(401, "authentication_error", "invalid x-api-key")
    reply = await h.dm("hello?")
    key = "OPENAI_API_KEY" if isinstance(h.fake, FakeOpenAI) else "ANTHROPIC_API_KEY"
    assert reply is not None and "rejected my API key" in reply and f"set a valid {key} " in reply
    assert len(h.main_requests()) == 1  # a bad key does not get better by asking again
