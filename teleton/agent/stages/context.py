"""The context stage: what the model is shown for this turn, within its memory budget.

Retrieval (``prompt.retrieval``), tool choice and the system prompt's parts (``prompt.system``) do not depend
on each other and are built concurrently; then the memory that fits the budget is chosen (``prompt.budget``)
and the turn's taint records what is shown, not what was found (the offered tools' words included).

Laid out for the prompt cache (``llm.prompt_cache``): the tools are the session's (they only grow), the
system blocks change only with memory, and everything of this turn (the time, the sender, the daily logs,
the retrieved context) rides in this turn's user message, after the history, sent once and never stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from teleton.agent.core import AgentCore
from teleton.agent.prompt import budget
from teleton.agent.prompt.system import PromptInputs, SystemParts
from teleton.agent.steering import shown
from teleton.agent.turn import Turn, required
from teleton.tools.registry import SKILL_TOOLS


async def build_context(agent: AgentCore, turn: Turn) -> None:
    msg = turn.msg
    selector = agent.deps.tool_selector
    session_id = required(turn.session).id
    so_far = agent.offered.so_far(session_id)

    async def pick_tools(vector: np.ndarray | None) -> Sequence[str] | None:
        # Tool RAG shares the message's one query embedding with memory retrieval.
        if selector is None:
            return None
        return await selector(msg.text, vector, msg.chat, turn.is_admin, turn.clearance.is_owner, so_far)

    turn.rag, parts = await asyncio.gather(
        agent.context.build(msg, turn.clearance, pick_tools), agent.prompt.parts(prompt_inputs(turn))
    )
    fit_memory(agent, turn, parts)
    picked = required(turn.rag).extra
    skills = agent.deps.skills
    if picked is not None and skills is not None and skills.offered(turn.clearance):
        picked = [*picked, *SKILL_TOOLS]  # the prompt lists skills: the tool that reads them comes with it
    names = agent.offered.offer(session_id, picked)
    offered = agent.deps.registry.available(msg.chat, turn.is_admin, names, is_owner=turn.clearance.is_owner)
    turn.tools = [tool.api_schema() for tool in offered]
    # An outside server's words the owner did not approve as they are steer the turn they are offered to.
    turn.taint.saw(*{tool.steers for tool in offered if tool.steers})


async def rebuild_system(agent: AgentCore, turn: Turn) -> None:
    """After a compaction mid-turn: the summary changed, and with it what is left for the rest."""
    fit_memory(agent, turn, await agent.prompt.parts(prompt_inputs(turn)))


def prompt_inputs(turn: Turn) -> PromptInputs:
    return PromptInputs(
        chat=turn.msg.chat,
        sender=turn.msg.sender,
        clearance=turn.clearance,
        taint=turn.taint,
        summary=required(turn.session).summary,
        flush_note=turn.flush_note,
    )


def fit_memory(agent: AgentCore, turn: Turn, parts: SystemParts) -> None:
    """The system prompt, and the user message with this turn's note and what of its memory fits the budget."""
    limit = agent.settings.memory_budget
    allowance = None if limit is None else max(0, limit - parts.stable.total)
    label = turn.clearance.label
    plan = budget.plan_turn(required(turn.rag), parts.days, turn.msg.text, label, allowance)
    turn.system = agent.prompt.system(parts)
    note = agent.prompt.turn_note(parts, plan.days)
    turn.taint.add(*plan.rag.labels())  # what is shown, not what was found
    turn.taint.saw(*plan.rag.origins())
    turn.memory = parts.stable.plus(plan.usage, limit)
    budget.log_left_out(turn.msg.chat.id, turn.memory)
    text = required(turn.stored_user)["content"]
    rag_text = plan.rag.render(label)
    system = [block["text"] for block in turn.system]
    shown(turn.taint, [*system, note], rag_text, text, required(turn.session).messages)
    blocks = [{"type": "text", "text": rag_text}] if rag_text else []
    # The image is seen in this request only; the session keeps the line that describes it.
    blocks += [{"type": "text", "text": note}, *turn.images, {"type": "text", "text": text}]
    turn.sent_user = {"role": "user", "content": blocks}
