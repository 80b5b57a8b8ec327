"""The answer and reply stages of a turn, and every word a turn sends to its own chat.

The tool loop answers (a context overflow compacts and retries, then cuts oversized messages and retries;
a model failure becomes an apology and a failed record; a user kept waiting past ``agent.slow_notice_s`` is
told once, ``slow_notice``); the reply goes out whole (the gateway splits it
for its chat) after the delivery record says ``sending``; the outcome of the turn is what its messages
become: answered, or failed and why.
"""

from __future__ import annotations

import time

import structlog

from teleton.agent.core import AgentCore
from teleton.agent.delivery import reply_parts
from teleton.agent.delivery.records import DeliveryFailed
from teleton.agent.delivery.streaming import StreamedReply
from teleton.agent.deps import AgentSettings
from teleton.agent.messages import spoke_here
from teleton.agent.stages.context import rebuild_system
from teleton.agent.stages.slow_notice import slow_notice
from teleton.agent.turn import Turn, required
from teleton.agent.window.masking import mask_observations
from teleton.agent.window.oversize import shorten_history
from teleton.config.presets import PRESETS
from teleton.gateway.contract import ReplyStreams, SentMessage
from teleton.llm import prompt_cache
from teleton.llm.client import ContextOverflowError, LLMError, Message
from teleton.llm.progress import WATCHING
from teleton.llm.tool_loop import Prepare, ToolCall, ToolResult, run_tool_loop
from teleton.memory.feed import message_life as life
from teleton.tools.registry import ToolContext

log = structlog.get_logger(__name__)

UNAVAILABLE = "Sorry — I can't reach my language model right now. Please try again in a moment."
TOO_LONG = "That is more than I can read at once, even after compacting. /new starts a fresh conversation."


def unreachable(url: str | None) -> str:
    """The apology for a model API that never answered names where it was tried (the URL, never the key)."""
    where = f" at {url}" if url else ""
    return (
        f"Sorry — I can't connect to my language model's API{where} (no network, the server is not running, "
        "or agent.base_url is wrong). Please try again once it is reachable."
    )


def key_rejected(provider: str | None) -> str:
    """The apology for a rejected key names the variable the owner must set for that provider."""
    env = PRESETS[provider].key_env if provider in PRESETS else None
    where = f"{env} (or agent.api_key)" if env else "agent.api_key"
    return f"Sorry — my language model's API rejected my API key. The owner needs to set a valid {where}."


async def answer(agent: AgentCore, turn: Turn) -> None:
    async with slow_notice(agent.deps.gateway, turn, agent.settings.slow_notice_s, agent.deps.sleep):
        stream = turn.stream = streamed_reply(agent, turn)
        if stream is not None:
            await stream.take_over()  # a restart cut this answer while it streamed: its message goes on
        watching = WATCHING.set(stream.progress()) if stream is not None and stream.live else None
        try:
            await _answer(agent, turn)
        except BaseException:
            if stream is not None:
                stream.abandon()  # /stop, shutdown or a fault: no more words go out
            raise
        finally:
            if watching is not None:
                WATCHING.reset(watching)


def streamed_reply(agent: AgentCore, turn: Turn) -> StreamedReply | None:
    """A private chat's answer streams when the gateway can (``telegram.stream_edits``): never a scheduled
    turn's or one that may end silent, never where a terminal already watches (docs/operations.md). With
    streaming off it is not live, but still finishes a message a restart cut while it streamed."""
    gateway = agent.deps.gateway
    if not isinstance(gateway, ReplyStreams) or turn.msg.chat.type != "dm":
        return None
    if turn.from_task or turn.silent_token is not None or WATCHING.get() is not None or turn.msg.replaces:
        return None
    live = gateway.streams_to(turn.msg.chat)
    return StreamedReply(gateway, turn.delivery, turn.msg.chat.id, live=live)


async def _answer(agent: AgentCore, turn: Turn) -> None:
    ctx = ToolContext(
        chat=turn.msg.chat,
        sender=turn.msg.sender,
        is_admin=turn.is_admin,
        clearance=turn.clearance,
        deps=agent.tool_deps,
        message_id=turn.msg.message_id,
        taint=turn.taint,
        say=lambda text, reply_to: say(agent, turn, text, reply_to=reply_to),
        from_task=turn.from_task,
        typed=turn.typed,
        topic_id=turn.msg.topic_id,
    )

    async def execute(call: ToolCall) -> ToolResult:
        return await agent.deps.registry.execute(call, ctx)

    settings = agent.settings
    for attempt in range(3):
        session = required(turn.session)
        if turn.stream is not None:
            turn.stream.restart()  # a new attempt writes the answer anew
        try:
            turn.result = await run_tool_loop(
                agent.deps.llm,
                system=prompt_cache.marked_system(turn.system, settings.cache_ttl),
                messages=[*session.messages, required(turn.sent_user)],
                tools=turn.tools,
                execute=execute,
                limits=settings.limits,
                prepare=laid_out(settings, history_end=len(session.messages) - 1),
            )
            return
        except ContextOverflowError:
            # First compact; if the session still overflows (a paste from before the input limit), cut
            # its oversized messages to excerpts — kept so, the session is never wedged; then give up.
            if attempt == 0:
                log.warning("context_overflow", chat_id=turn.msg.chat.id, messages=len(session.messages))
                await agent.compact(turn, max(1, settings.thresholds.keep_last // 2))
                await rebuild_system(agent, turn)  # the summary changed
                continue
            cut = shorten_history(session.messages, settings.max_input_chars) if attempt == 1 else 0
            if cut:
                log.warning("context_overflow_shortened", chat_id=turn.msg.chat.id, messages=cut)
                continue
            log.error("context_overflow_after_compaction", chat_id=turn.msg.chat.id)
            turn.failed, turn.reply = "too long for the model, even after compacting", TOO_LONG
            return
        except LLMError as exc:
            log.error("llm_failed", chat_id=turn.msg.chat.id, error=str(exc), url=exc.url)
            turn.failed = f"model unavailable: {exc}"[:300]
            agent.report("model", exc)
            # Waiting cannot fix a bad key; a dead connection is a different fix from an overloaded API.
            if exc.key_rejected:
                turn.reply = key_rejected(exc.provider)
            else:
                turn.reply = unreachable(exc.url) if exc.unreachable else UNAVAILABLE
            return
    turn.failed, turn.reply = "no answer from the model", UNAVAILABLE


def laid_out(settings: AgentSettings, history_end: int) -> Prepare:
    """What each request of the tool loop sends: old results masked in steps, the history's last message
    (``history_end``, where the next turn reads the cache) and the request's last block marked."""

    def prepare(messages: list[Message]) -> list[Message]:
        masked = mask_observations(messages, settings.masking_keep, settings.masking_step)
        return prompt_cache.marked_messages(masked, history_end, settings.cache_ttl)

    return prepare


async def deliver(agent: AgentCore, turn: Turn) -> None:
    """The reply stage: the final text goes to the chat unless a send tool already spoke or it is silent."""
    result = turn.result
    if result is not None:
        if spoke_here(result, agent.settings.send_tools, turn.msg.chat.id):
            turn.reply = ""  # the model already spoke through a tool
            await _drop_stream(turn)
            return
        turn.reply = result.text
    if turn.silent_token and turn.reply.strip().strip(".").upper() == turn.silent_token.upper():
        log.info("turn_silent", chat_id=turn.msg.chat.id)
        turn.reply = ""
        await _drop_stream(turn)
        return
    await reply(agent, turn, turn.reply)


async def say(
    agent: AgentCore,
    turn: Turn,
    text: str,
    *,
    reply_to: int | None = None,
    edits: int | None = None,
    plain: bool = False,
) -> SentMessage:
    """Every word a turn sends to its own chat goes through here: recorded first, then sent once (part 0
    as an edit of ``edits``, the turn's streamed message, when there is one; ``plain``: never as Markdown)."""
    sending = await turn.delivery.sending(text, reply_to, failure=turn.failed or None, edits=edits)
    try:
        sent = await agent.deps.gateway.send_message(
            turn.msg.chat.id, text, reply_to=reply_to, once=sending.once, topic_id=turn.msg.topic_id, plain=plain
        )
    except Exception as exc:
        await turn.delivery.sent(sending, f"{type(exc).__name__}: {exc}")
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from exc
    await turn.delivery.sent(sending)
    return sent


async def reply(agent: AgentCore, turn: Turn, text: str, *, plain: bool = False) -> SentMessage | None:
    msg = turn.msg
    reply_to = msg.message_id if msg.chat.type != "dm" and msg.message_id > 0 else None
    if not text.strip():
        await _drop_stream(turn)
        return None
    stream = _stream_of(turn)
    edits = await stream.end() if stream is not None else reply_parts.edited_into(msg, time.time())
    try:  # whole: the gateway splits it the way its chat needs (Telegram: telegram/send/split.py)
        sent = await say(agent, turn, text, reply_to=reply_to, edits=edits, plain=plain)
    except DeliveryFailed as exc:
        log.error("send_failed", chat_id=msg.chat.id, error=str(exc))
        turn.undelivered = str(exc)[:300]
        agent.report("telegram", exc)
        return None
    turn.reply_ids = sent.parts or ((sent.message_id,) if sent.message_id else ())
    await reply_parts.keep(agent.deps.db, agent.deps.gateway, msg, turn.reply_ids, time.time())
    return sent


def _stream_of(turn: Turn) -> StreamedReply | None:
    """This turn's streamed message, taken: the reply or the drop ends it once."""
    stream, turn.stream = turn.stream, None
    return stream


async def _drop_stream(turn: Turn) -> None:
    """The turn ends with no reply in its chat: words streamed there go (``delivery/streaming.py``)."""
    if (stream := _stream_of(turn)) is not None:
        await stream.drop()


def outcome(turn: Turn) -> tuple[str, str | None]:
    """What a finished turn's messages are now: answered, or failed and why."""
    if turn.undelivered:
        return life.STATE_FAILED, f"reply not delivered: {turn.undelivered}"
    if turn.failed:
        return life.STATE_FAILED, turn.failed
    return life.STATE_ANSWERED, None
