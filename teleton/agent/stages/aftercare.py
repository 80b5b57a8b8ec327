"""After the reply: what a turn leaves behind (session, daily log, learnings, the distiller's input).

Every write takes its label from the turn (docs/privacy.md): the daily-log line of a group or another person's
DM is quoted with its origin, only the owner's own tool errors become learnings, and the distiller stores
what it finds under the turn's label.
"""

from __future__ import annotations

from datetime import datetime

import structlog

from teleton.agent.core import AgentCore
from teleton.agent.distiller import Exchange
from teleton.agent.messages import sender_label
from teleton.agent.privacy import origin
from teleton.agent.turn import Turn, required
from teleton.agent.window.masking import mask_observations
from teleton.llm.client import Message, Usage
from teleton.memory.facts.subjects import speaker_subject
from teleton.privacy.quoting import origins_text, steered_origin
from teleton.storage import usage

log = structlog.get_logger(__name__)
STOPPED = "(stopped by the user before answering)"


async def persist(agent: AgentCore, turn: Turn) -> None:
    session = required(turn.session)
    if turn.result is None:
        return  # the model never answered: keep the session as it was; the feed still has the message
    kept = [*session.messages, kept_user(turn), *turn.result.new_messages]
    session.messages = mask_observations(kept, agent.settings.masking_keep, agent.settings.masking_step)
    session.account(turn.result.usage, turn.result.last_usage)
    await agent.sessions.save(session)
    await account_spend(agent, turn.result.usage)
    await log_exchange(agent, turn)
    await learn(agent, turn)


async def account_spend(agent: AgentCore, u: Usage) -> None:
    """The turn's tokens and cost into the day's ledger (the dashboard's, /status's and `teleton status`'s day),
    cache reads and writes apart, priced as the provider prices them; a failure only loses a figure."""
    llm = agent.deps.llm
    tokens = (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)
    cost = llm.price.cost(*tokens) if llm.price is not None else None
    day = usage.today()
    try:
        await agent.deps.db.write(lambda conn: usage.add(conn, day, llm.settings.model, tokens, cost))
    except Exception as exc:
        log.warning("usage_not_recorded", error=repr(exc))


async def persist_stopped(agent: AgentCore, turn: Turn) -> None:
    """/stop: keep the user's message and a marker, so the history stays well-formed and honest."""
    session = turn.session
    if session is None or turn.stored_user is None:
        return
    session.messages = [*session.messages, turn.stored_user, {"role": "assistant", "content": STOPPED}]
    try:
        await agent.sessions.save(session)
    except Exception as exc:
        log.warning("stopped_turn_not_saved", error=repr(exc))


async def learn(agent: AgentCore, turn: Turn) -> None:
    """Tool errors to the learnings (the owner's own turns only), the exchange to the distiller."""
    result = required(turn.result)
    msg = turn.msg
    # A group could otherwise write into the owner's prompt through an error message it provoked; and an
    # owner's turn that was shown another chat's words may have been steered by them (a planted call).
    steered = bool(turn.steering())
    if agent.deps.learnings is not None and turn.clearance.is_owner and not steered:
        calls = {c.id: c for c in result.tool_calls}
        for message in result.new_messages:
            for block in message["content"] if isinstance(message["content"], list) else []:
                call = calls.get(block.get("tool_use_id", ""))
                if block.get("type") == "tool_result" and block.get("is_error") and call is not None:
                    try:
                        await agent.deps.learnings.record_error(call.name, str(call.input), block["content"])
                    except Exception as exc:
                        log.warning("learning_not_recorded", error=repr(exc))
    if agent.deps.distiller is not None and not turn.failed:
        agent.deps.distiller.schedule(
            Exchange(
                chat=msg.chat,
                user_name=sender_label(msg.sender),
                # An answer built from another chat's words is not distilled into this label's memory: only
                # what the person here said is (typed: not a forward's words, nor a document's or photo's).
                user_text=turn.typed if steered else msg.text,
                assistant_text="" if steered else (turn.reply or result.text),
                label=turn.clearance.label,
                speaker=speaker_subject(agent.principals, msg.sender.id if msg.sender else None),
                message_ids=(*msg.answers, *(() if steered else turn.reply_ids)),  # what the facts come from
                said_at=msg.date,
            )
        )


def kept_user(turn: Turn) -> Message:
    """The user message as the session keeps it: for a steered exchange, with what steered it, so every
    later turn that still has the exchange in its history is tainted by it (``Taint.absorb``)."""
    user = required(turn.stored_user)
    steering = turn.steering()
    if not steering or not isinstance(user["content"], str):
        return user
    note = f"(This exchange was shown words from elsewhere: {origins_text(steering)}.)"
    return {**user, "content": f"{user['content']}\n\n{note}"}


async def log_exchange(agent: AgentCore, turn: Turn) -> None:
    msg = turn.msg
    said = msg.text if msg.chat.type == "dm" else f"{sender_label(msg.sender)}: {msg.text}"
    answer = turn.reply or (turn.result.text if turn.result else "") or "(answered with tools)"
    where = origin(msg.chat, turn.clearance, sender_label(msg.sender), msg.thread.topic)
    steering = turn.steering()
    if where is None and steering:  # the owner's own line, but steered: quoted, with what steered it
        where = steered_origin(steering)
    try:
        # Dated when the person wrote (the line /forget of that message finds: ``forget.match``).
        when = datetime.fromtimestamp(msg.date).astimezone()
        await agent.daily_logs.append_exchange(said, answer, when, origin=where)
    except Exception as exc:  # persistence is fail-safe, never blocks a reply
        # Logged once per failure streak: a full disk must not also flood the log it cannot write.
        if not agent.daily_log_failing:
            log.error("daily_log_write_failed", error=f"{type(exc).__name__}: {exc}")
        agent.daily_log_failing = True
    else:
        if agent.daily_log_failing:
            log.info("daily_log_write_recovered")
        agent.daily_log_failing = False
