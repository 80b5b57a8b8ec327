"""``memory_forget`` and what ``/forget`` shares with it: a request waiting for its confirmation, and the
texts that show findings and reports.

The tool only finds and shows. Erasing needs ``/forget confirm`` typed by the same person in the same chat
within ``CONFIRM_S``: a model talked into "forget everything" by a prompt injection cannot erase anything,
and what the person confirms is the runtime's own preview (posted to the chat by the tool), not the model's
account of it. Owner only; another person uses ``/forget`` in their own DM.
"""

from __future__ import annotations

from typing import Any

import structlog

from teleton.llm.tool_loop import ToolResult
from teleton.memory.forget.everywhere import Findings, NeedleError, Report, find, parse_needle, scope_for
from teleton.privacy.quoting import shown_to
from teleton.tools.registry import Tool, ToolContext, schema

log = structlog.get_logger(__name__)


NAMES = {
    "archive": "archived messages (with their keyword rows and vectors)",
    "archive_context": "later messages whose index carried it (rebuilt without it)",
    "people": "names or phone numbers of people and chats",
    "facts": "facts (current and past)",
    "knowledge": "knowledge chunks",
    "files": "lines of memory files",
    "daily_logs": "lines of daily logs",
    "chat_history": "entries of the `teleton chat` input history",
    "sessions": "conversations and their summaries (scrubbed to [forgotten])",
    "records": "finished tasks, decided sends, exec records (scrubbed)",
    "vectors": "vectors",
    "embedding_cache": "cached embeddings",
    "pending_tasks": "scheduled tasks still to run",
    "held_sends": "sends waiting for your approval",
}
HOW_TO_CONFIRM = "Send /forget confirm within 5 minutes to erase all of it, or /forget cancel."


def describe_preview(findings: Findings) -> str:
    """The answer to ``/forget <text>``: what was found and how to confirm, or that nothing was. Made from
    ``findings`` alone, whose counts are the scope's own (``memory.forget``), so a person who is not the
    owner gets the same bytes whatever anyone else's memory holds."""
    if findings.empty:
        return f"I found nothing to forget for {findings.needle.describe()}."
    return f"{describe_findings(findings)}\n\n{HOW_TO_CONFIRM}"


def describe_findings(findings: Findings) -> str:
    lines = [f"Found {findings.needle.describe()} in:"]
    counts = findings.counts()
    lines += [f"- {NAMES[layer]}: {n}" for layer, n in counts.items() if layer not in ("pending_tasks", "held_sends")]
    files = sorted({*findings.files, *findings.daily_logs})
    if files:
        lines.append("  files: " + ", ".join(files[:8]) + (" …" if len(files) > 8 else ""))
    held = [f"{NAMES[layer]}: {n}" for layer, n in counts.items() if layer in ("pending_tasks", "held_sends")]
    if held:
        lines.append("Left alone (promises to deliver; change or cancel them yourself): " + "; ".join(held))
    if findings.excerpts:
        lines.append("For example (the text itself masked):")
        lines += [f"- {excerpt.layer}: {excerpt.text}" for excerpt in findings.excerpts]
    return "\n".join(lines)


def describe_report(report: Report) -> str:
    if not report.erased:
        return "Nothing was left to erase."
    lines = ["Forgotten:"] + [f"- {NAMES.get(layer, layer)}: {n}" for layer, n in report.erased.items()]
    if report.held:
        lines.append("Left alone: " + "; ".join(f"{NAMES[layer]}: {n}" for layer, n in report.held.items()))
    if report.wiped is True:
        lines.append("The database file was read back: no copy of it is left there.")
    elif report.wiped is False:
        lines.append(
            "Old copies may remain in free space of the database file or its WAL (another process was reading "
            "it): forget again later, or with the daemon stopped."
        )
    lines.append("Not touched: " + "; ".join(report.copies) + ".")
    return "\n".join(lines)


async def memory_forget(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    scope = scope_for(ctx.clearance)
    if scope is None or not scope.owner or ctx.sender is None:
        return ToolResult.error("Forgetting is asked for with /forget by the person themselves in their own chat.")
    try:
        needle = parse_needle(str(args.get("text", "")))
    except NeedleError as exc:
        return ToolResult.error(str(exc))
    findings = await find(ctx.deps.db, ctx.deps.workspace, needle, scope, chat_history=ctx.deps.chat_history)
    if findings.empty:
        return f"Nothing in memory holds {needle.describe()}."
    ctx.deps.forget_requests.put(ctx.chat.id, ctx.sender.id, findings)
    shown = describe_findings(findings)
    told = await _show(ctx, f"{shown}\n\n{HOW_TO_CONFIRM}")
    return (
        f"NOTHING HAS BEEN ERASED. {'The user was shown' if told else 'Show the user'} what was found (below). "
        "Erasing needs the user to send /forget confirm themselves within 5 minutes (or /forget cancel); you "
        "cannot confirm for them. Tell them so.\n"
        + "\n".join([shown.split("\nFor example")[0], *_excerpts(findings, ctx)])
    )


async def _show(ctx: ToolContext, text: str) -> bool:
    """Post the preview to the turn's chat: the person confirms what the runtime shows, not the model's account."""
    if ctx.say is None:
        return False
    try:
        await ctx.say(text, None)
    except Exception as exc:  # the model still tells them; the request waits all the same
        log.warning("forget_preview_not_sent", error=repr(exc))
        return False
    return True


def _excerpts(findings: Findings, ctx: ToolContext) -> list[str]:
    """The excerpts as the model may read them: another chat's or person's quoted, with its origin."""
    lines = []
    for excerpt in findings.excerpts:
        label = excerpt.origin(ctx.deps.principals)
        ctx.shown(label)
        line = f"{excerpt.layer}: {excerpt.text}"
        lines.append(shown_to(ctx.clearance.label, label, line))
    return lines


def forget_tools() -> list[Tool]:
    return [
        Tool(
            name="memory_forget",
            description=(
                "Find everything memory holds that contains a text (a phone number, a name, an address): "
                "archived messages, facts, notes, logs, conversations. It shows the findings to the user and "
                "erases nothing; the user erases them by sending /forget confirm."
            ),
            input_schema=schema({"text": {"type": "string", "minLength": 1, "maxLength": 500}}, ("text",)),
            handler=memory_forget,
            scope="dm-only",
            category="memory",
            owner_only=True,
        )
    ]
