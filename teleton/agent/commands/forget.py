"""``/forget``: find a text (or the message replied to) in every layer of memory, show it, erase on confirmation.

``/forget <text>`` (or ``/forget`` as a reply) shows what memory holds with it, per layer, masked;
``/forget confirm`` erases it (the same person, the same chat, within 5 minutes); ``/forget cancel`` drops it.
Who may forget what (``memory.forget.scope_for``), and why another person's answer is no oracle of anyone
else's memory: docs/memory.md, "Forgetting".
"""

from __future__ import annotations

import contextlib

from teleton.agent.core import AgentCore
from teleton.agent.turn import Turn
from teleton.gateway.contract import Thread
from teleton.memory.forget.everywhere import Findings, Needle, NeedleError, Report, erase, find, parse_needle, scope_for
from teleton.memory.forget.feed import forget_deleted
from teleton.tools.families.forget import describe_preview, describe_report

GROUP_REFUSAL = "/forget works only in a private chat with me: in a group, what was said is not one person's to erase."
NOTHING_PENDING = "Nothing to confirm: send /forget <text> first (a request lasts 5 minutes)."


async def cmd_forget(agent: AgentCore, turn: Turn, args: str) -> str:
    scope = scope_for(turn.clearance)
    sender = turn.msg.sender
    if scope is None or sender is None or turn.msg.is_outgoing:
        return GROUP_REFUSAL
    chat_id = turn.msg.chat.id
    store = agent.tool_deps.forget_requests
    word = args.strip().lower()
    if word == "confirm":
        pending = store.take(chat_id, sender.id)
        if pending is None:
            return NOTHING_PENDING
        return describe_report(await _erase(agent, pending.findings))
    if word == "cancel":
        return "Cancelled: nothing was erased." if store.drop(chat_id, sender.id) else "Nothing to cancel."
    try:
        needle = _needle(turn, args)
    except NeedleError as exc:
        return str(exc)
    if needle.text:
        # The command itself holds the text: it is a command, not conversation, and goes at once.
        await agent.deps.db.write(lambda conn: forget_deleted(conn, chat_id, [turn.msg.message_id]))
    findings = await find(agent.deps.db, agent.deps.workspace, needle, scope, chat_history=agent.deps.chat_history)
    if not findings.empty:
        store.put(chat_id, sender.id, findings)
    return describe_preview(findings)


def _needle(turn: Turn, args: str) -> Needle:
    """The text given, or, for a bare /forget sent as a reply, the message it replies to."""
    if not args and turn.msg.reply_to_id:
        return Needle(message=(turn.msg.chat.id, turn.msg.reply_to_id))
    return parse_needle(args)


async def _erase(agent: AgentCore, findings: Findings) -> Report:
    # The distiller finishes first (it may be about to save a fact from the very text).
    if agent.deps.distiller is not None:
        await agent.deps.distiller.drain()
    # Looked up again for the chats whose sessions it touches now: each waits for its running turn, which would
    # otherwise save its copy of the conversation back over the scrubbed one.
    fresh = await find(agent.deps.db, agent.deps.workspace, findings.needle, findings.scope)
    async with contextlib.AsyncExitStack() as stack:
        for chat_id, topic in sorted(fresh.rows.session_threads):
            await stack.enter_async_context(agent.locks.hold(Thread(chat_id, topic)))
        knowledge = agent.deps.knowledge if hasattr(agent.deps.knowledge, "reindex") else None
        history = agent.deps.chat_history
        return await erase(agent.deps.db, agent.deps.workspace, findings, knowledge=knowledge, chat_history=history)
