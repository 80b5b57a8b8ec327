"""Slash commands (README.md's list, docs/operations.md): answered by the runtime itself, no model call.

``/stop`` is special: it must reach a chat while its turn is running, so the runtime handles it before the
per-chat lock (see ``Agent.wants_immediate``). Admin commands refuse everyone else; owner commands
(``/approve``, ``/deny``, ``/held``: sends held for approval, docs/privacy.md) work only in the owner's own DM.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from teleton.agent.commands.skills import cmd_skills
from teleton.agent.compactor import CompactionOutcome
from teleton.agent.core import AgentCore
from teleton.agent.stages import answering
from teleton.agent.turn import Turn
from teleton.agent.turn_stats import spend_line, status_lines
from teleton.gateway.contract import IncomingMessage, SentMessage
from teleton.memory.feed import archive as fa
from teleton.memory.feed import reactions, reads
from teleton.privacy import Clearance
from teleton.storage.usage import spent_today
from teleton.text.counts import counted
from teleton.tools.held import CODE_LENGTH

_COMMAND = re.compile(r"^/([a-zA-Z_]+)(?:@\w+)?(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True)
class Command:
    name: str
    args: str


def parse_command(text: str) -> Command | None:
    """'/compact 10' -> Command('compact', '10'); '/status@teleton_bot' works in groups too."""
    match = _COMMAND.match(text.strip())
    if not match:
        return None
    return Command(match.group(1).lower(), (match.group(2) or "").strip())


Handler = Callable[[AgentCore, Turn, str], Awaitable[str]]


@dataclass(frozen=True)
class CommandSpec:
    name: str
    usage: str
    help: str
    handler: Handler
    admin: bool = False
    needs_lock: bool = False  # touches the session, so it waits for a running turn of the chat
    group_admin: bool = False  # in a shared chat, only admins may (one member must not reset it for all)
    owner: bool = False  # only in the owner's own DM (or `teleton chat`)
    # Replied as plain text, never Markdown: the reply quotes someone else's words (a released call's
    # result, a server's tool descriptions), and a link must show where it goes.
    plain: bool = False


async def cmd_new(agent: AgentCore, turn: Turn, args: str) -> str:
    summary = await end_session(agent, turn, "new")
    return "Started a new conversation." + (" The last one is summarised in memory." if summary else "")


async def cmd_compact(agent: AgentCore, turn: Turn, args: str) -> str:
    keep = agent.settings.thresholds.keep_last
    if args:
        if not args.isdigit() or int(args) < 1:
            return "Usage: /compact [N] — N is how many recent messages to keep (a positive number)."
        keep = int(args)
    outcome = await compact_now(agent, turn, keep)
    if outcome is None or outcome.dropped == 0:
        return "Nothing to compact."
    how = " (model unavailable: truncated)" if outcome.fell_back else ""
    return f"Compacted{how}: {counted(outcome.dropped, 'message')} summarised, {len(outcome.session.messages)} kept."


async def cmd_status(agent: AgentCore, turn: Turn, args: str) -> str:
    return await status_text(agent, turn)


async def cmd_stop(agent: AgentCore, turn: Turn, args: str) -> str:
    stopped = agent.stop(turn.msg.thread)
    return "Stopped." if stopped else "Nothing is running."


# Typed only in `teleton chat` and handled there (cli/chat_cmd.py), before a line reaches the agent.
TERMINAL_COMMANDS = (
    ("/attach PATH [caption]", "send a photo, voice note or document from this machine"),
    ("/exit", "leave (or Ctrl-D)"),
)


async def cmd_help(agent: AgentCore, turn: Turn, args: str) -> str:
    lines = ["Commands:"]
    for spec in COMMANDS.values():
        if (spec.admin and not turn.is_admin) or (spec.owner and not turn.clearance.is_owner):
            continue
        lines.append(f"- {spec.usage} — {spec.help}" + (" (admin)" if spec.admin else ""))
    if agent.deps.surface == "terminal":
        lines += [f"- {usage} — {help}" for usage, help in TERMINAL_COMMANDS]
    return "\n".join(lines)


async def cmd_pause(agent: AgentCore, turn: Turn, args: str) -> str:
    agent.paused = True
    return "Paused: I will not answer anyone but admins' commands until /resume."


async def cmd_resume(agent: AgentCore, turn: Turn, args: str) -> str:
    agent.paused = False
    return "Resumed."


async def cmd_policy(agent: AgentCore, turn: Turn, args: str) -> str:
    control = agent.deps.policy
    if control is None:
        return "Policies are not adjustable here (no Telegram policy gate in this process)."
    parts = args.split()
    if not parts:
        return control.describe()
    if len(parts) != 2 or parts[0] not in ("dm", "group"):
        return "Usage: /policy [dm|group open|allowlist|admin-only|disabled]"
    return control.set_policy(parts[0], parts[1])


async def cmd_held(agent: AgentCore, turn: Turn, args: str) -> str:
    """/approve N CODE, /deny N, /held [N]: the owner decides on what waits for approval."""
    outbox = agent.deps.outbox
    if outbox is None:
        return "Nothing is ever held here (no outbox in this process)."
    name = turn.msg.text.strip().split()[0].lstrip("/").split("@")[0].lower()
    words = args.split()
    if name == "held" and not words:
        return await outbox.describe_pending()
    if not words or not words[0].isdigit() or len(words) > (2 if name == "approve" else 1):
        usage = {"approve": "/approve N CODE", "deny": "/deny N", "held": "/held [N]"}[name]
        return f"Usage: {usage} — N is the number of the held item, CODE the code in its notice (see /held)."
    held_id = int(words[0])
    if name == "held":
        return await outbox.show(held_id)
    sender = turn.msg.sender.id if turn.msg.sender else None
    if name == "approve":
        return await outbox.approve(held_id, words[1] if len(words) == 2 else None, by=sender)
    return await outbox.deny(held_id, by=sender)


async def cmd_tools(agent: AgentCore, turn: Turn, args: str) -> str:
    # /tools and /tool enable|disable|reset|scope: overrides persisted in tool_config (issue 6's store).
    from teleton.tools.config_store import ToolConfigStore, handle_tool_command

    name = "/tools" if turn.msg.text.strip().lower().startswith("/tools") else "/tool"
    return await handle_tool_command(f"{name} {args}".strip(), agent.deps.registry, ToolConfigStore(agent.deps.db))


async def cmd_mcp(agent: AgentCore, turn: Turn, args: str) -> str:
    """/mcp: outside tool servers and what waits; /mcp approve NAME [TOOL] [CODE]: what waits shown whole,
    and with the code of that text, approved."""
    servers = agent.deps.mcp
    if servers is None:
        return "No MCP server is configured (mcp.servers; docs/mcp.md)."
    words = args.split()
    if not words:
        return servers.describe()
    if words[0] != "approve" or not 2 <= len(words) <= 4:
        return "Usage: /mcp, or /mcp approve SERVER [TOOL] [CODE]."
    name, rest = words[1], words[2:]
    code = rest.pop() if rest and _is_code(rest[-1]) else None
    tool = rest[0] if rest else None
    if code is None:
        shown = await servers.review(name, tool)
        return shown or f"Nothing of {name} waits for approval."
    approved = await servers.approve(name, code, tool)
    if approved is None:
        shown = await servers.review(name, tool)
        if shown is None:
            return f"Nothing of {name} waits for approval."
        return "That is not the code of what waits now (it changed, or it is another's): nothing approved.\n\n" + shown
    return f"Approved on {name}: {', '.join(approved)}. Offered from your next message."


def _is_code(word: str) -> bool:
    return len(word) == CODE_LENGTH and all(ch in "0123456789abcdef" for ch in word.lower())


async def cmd_forget(agent: AgentCore, turn: Turn, args: str) -> str:
    # Who may forget what is decided by the turn's clearance (memory.forget.scope_for), in the handler.
    from teleton.agent.commands.forget import cmd_forget as forget

    return await forget(agent, turn, args)


COMMANDS: dict[str, CommandSpec] = {
    spec.name: spec
    for spec in (
        CommandSpec(
            "new",
            "/new",
            "start a fresh conversation (the old one is summarised first)",
            cmd_new,
            needs_lock=True,
            group_admin=True,
        ),
        CommandSpec(
            "compact",
            "/compact [N]",
            "summarise the conversation, keeping the last N messages",
            cmd_compact,
            needs_lock=True,
            group_admin=True,
        ),
        CommandSpec("status", "/status", "session size, tokens, cache hits, memory, model", cmd_status),
        CommandSpec("stop", "/stop", "stop the running answer (queued messages still run)", cmd_stop, group_admin=True),
        CommandSpec("help", "/help", "this list", cmd_help),
        CommandSpec(
            "forget", "/forget TEXT (or as a reply), then /forget confirm", "erase a text from all memory", cmd_forget
        ),
        CommandSpec("pause", "/pause", "stop answering until /resume", cmd_pause, admin=True),
        CommandSpec("resume", "/resume", "answer again", cmd_resume, admin=True),
        CommandSpec("policy", "/policy [dm|group VALUE]", "show or change who may talk to me", cmd_policy, admin=True),
        CommandSpec(
            "approve", "/approve N CODE", "release exactly what held item N showed", cmd_held, owner=True, plain=True
        ),
        CommandSpec("deny", "/deny N", "drop a held item", cmd_held, owner=True, plain=True),
        CommandSpec(
            "held", "/held [N]", "what waits for your approval; N: that item, whole", cmd_held, owner=True, plain=True
        ),
        CommandSpec("tools", "/tools", "list tools with their state and scope", cmd_tools, admin=True),
        CommandSpec(
            "mcp",
            "/mcp [approve SERVER [TOOL] [CODE]]",
            "outside tool servers; what waits for approval, shown whole, and approving it",
            cmd_mcp,
            owner=True,
            plain=True,
        ),
        CommandSpec(
            "tool", "/tool enable|disable|reset NAME, /tool scope NAME SCOPE", "change a tool", cmd_tools, admin=True
        ),
        CommandSpec(
            "skills",
            "/skills [show NAME | approve NAME CODE]",
            "the skills this chat may use; what waits for approval, shown whole, and approving it",
            cmd_skills,
            plain=True,
        ),
    )
}


async def run_command(agent: AgentCore, turn: Turn, spec: CommandSpec, args: str) -> None:
    """Answer a slash command in the chat, after the rights it needs are checked."""
    shared = turn.msg.chat.type != "dm"
    if spec.owner and not turn.clearance.is_owner:
        text = f"/{spec.name} works only in the owner's own chat with me."
    elif (spec.admin or (spec.group_admin and shared)) and not turn.is_admin:
        text = f"/{spec.name} is for admins only" + (" in a group." if not spec.admin else ".")
    elif spec.needs_lock:
        async with agent.locks.hold(turn.msg.thread):
            text = await spec.handler(agent, turn, args)
    else:
        text = await spec.handler(agent, turn, args)
    turn.reply = text
    sent = await answering.reply(agent, turn, text, plain=spec.plain)
    await set_aside(agent, turn.msg, sent)


async def set_aside(agent: AgentCore, msg: IncomingMessage, sent: SentMessage | None) -> None:
    """A command and its reply are talk about the agent, not conversation: archived (the archive keeps
    every message), but marked like Telegram's service messages, so they are never a "relevant message",
    recent context or a search hit (``/help`` asked yesterday is not what anyone is looking for)."""
    ids = [msg.message_id] + ([sent.message_id] if sent is not None and sent.chat_id == msg.chat.id else [])
    await agent.deps.db.write(lambda conn: fa.mark_service(conn, msg.chat.id, ids))


async def end_session(agent: AgentCore, turn: Turn, reason: str) -> str:
    session = await agent.sessions.active(turn.msg.chat.id, turn.msg.thread.topic)
    if session is None:
        return ""
    agent.forget(session.id)
    return (await agent.compactor.close(session, turn.clearance, reason)).summary


async def compact_now(agent: AgentCore, turn: Turn, keep: int) -> CompactionOutcome | None:
    session = await agent.sessions.active(turn.msg.chat.id, turn.msg.thread.topic)
    if session is None:
        return None
    outcome = await agent.compactor.compact(session, turn.clearance, keep, reason="manual")
    if outcome.session.id != session.id:
        agent.forget(session.id)
    return outcome


def command_of(msg: IncomingMessage) -> tuple[CommandSpec, str] | None:
    """The known command this message is, with its arguments; unknown '/x' is left to the model."""
    parsed = parse_command(msg.text)
    if parsed is None or parsed.name not in COMMANDS:
        return None
    return COMMANDS[parsed.name], parsed.args


async def status_text(agent: AgentCore, turn: Turn) -> str:
    chat = turn.msg.chat
    session = await agent.sessions.active(chat.id, turn.msg.thread.topic)
    totals = await agent.sessions.totals(chat.id)
    window = agent.settings.thresholds.context_window
    lines = []
    if session is None:
        lines.append("Session: none yet (the next message starts one)")
    else:
        age = _ago(time.time() - session.created_at)
        lines.append(f"Session: {counted(len(session.messages), 'message')}, started {age} ago (id {session.id[:8]})")
        fill = session.last_input_tokens
        lines.append(f"Context: ~{fill:,} of {window:,} tokens ({100 * fill / window:.0f}%)")
        lines.append(
            f"Tokens this session: {session.input_tokens:,} in, {session.output_tokens:,} out; "
            f"cache reads {session.cache_read_tokens:,}, cache writes {session.cache_write_tokens:,}"
        )
    lines.append(
        f"This chat, all sessions: {counted(totals['sessions'], 'session')}, "
        f"{totals['input_tokens']:,} in / {totals['output_tokens']:,} out, "
        f"cache reads {totals['cache_read_tokens']:,}, cache writes {totals['cache_write_tokens']:,}"
    )
    lines.append("Memory: " + await memory_stats(agent, turn.clearance))
    # The day of every chat is the owner's to see: a group learns nothing of how much anyone else talked.
    today = await agent.deps.db.read(spent_today) if turn.clearance.is_owner else None
    lines += status_lines(agent.last_turns.get(chat.id), session, today)
    if turn.clearance.is_owner and agent.deps.policy is not None:
        lines.append(agent.deps.policy.refusals())
    if turn.clearance.is_owner:
        lines.append(await reactions_line(agent))
    llm = agent.deps.llm.settings
    lines.append(
        f"Model: {llm.model} (utility {llm.utility_model}); retries since start: "
        f"{agent.deps.llm.retries}" + ("; PAUSED" if agent.paused else "")
    )
    failover = agent.deps.llm.failover.status()
    if failover:
        lines.append("Failover: " + failover)
    spend = spend_line(agent.deps.llm.price, session, agent.last_turns.get(chat.id), today)
    if spend:
        lines.append(spend)
    # A list, so it reads line by line both as Telegram's plain text and rendered as Markdown (terminal).
    return "\n".join(f"- {line}" for line in lines)


async def reactions_line(agent: AgentCore) -> str:
    """The week's reactions to the agent's answers in every chat (the cheapest feedback people give)."""
    week = await agent.deps.db.read(lambda conn: reactions.on_answers(conn, time.time() - 7 * 86_400))
    given = ", ".join(f"{emoji} {n}" for emoji, n in week.items() if not emoji.startswith("custom:"))
    custom = sum(n for emoji, n in week.items() if emoji.startswith("custom:"))
    given += (", " if given and custom else "") + (f"custom {custom}" if custom else "")
    return f"Reactions to answers this week: {given or 'none'}"


async def memory_stats(agent: AgentCore, clearance: Clearance) -> str:
    """Counts of what this clearance may read (a group learns nothing about the size of anyone else's)."""
    parts = []
    labels = clearance.readable()
    if agent.deps.facts is not None:
        parts.append(counted(await agent.deps.facts.count(labels), "fact"))
    db = agent.deps.db
    if labels is None:
        row = await db.fetchone("select count(*) from knowledge")
    else:
        row = await db.fetchone(
            "select count(*) from knowledge where label in (select value from json_each(?))", (json.dumps(labels),)
        )
    parts.append(counted(int(row[0]), "knowledge chunk"))
    chats = clearance.readable_chats()
    messages = await db.read(lambda conn: reads.count(conn, None if chats is None else list(chats)))
    parts.append(counted(messages, "archived message"))
    return ", ".join(parts)


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{int(seconds)}s"
    if seconds < 5400:
        return f"{int(seconds // 60)}m"
    return f"{seconds / 3600:.1f}h"
