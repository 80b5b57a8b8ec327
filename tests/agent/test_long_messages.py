"""One long message never wedges a conversation (``agent.max_input_chars``): a 1 MB paste is kept whole in
the archive and as a workspace file the agent can read in parts; the model and the distiller get its head,
its tail and a note; the next question is answered. A session that already holds a paste and overflows the
model even after compaction has it cut and is answered."""

from __future__ import annotations

import json

from teleton.agent.distiller import Distiller
from teleton.memory.facts.store import FactStore
from teleton.tools.families.workspace import workspace_tools
from tests.agent.conftest import ALICE, GROUP, OWNER_DM, UTILITY_MODEL, AgentHarness
from tests.fakes.anthropic_server import Body, Reply, prompt_too_long, text, tool_results, tool_use, user_said
from tests.waiting import until

LIMIT = 20_000  # the default agent.max_input_chars
PASTE = "HEAD-MARK the start of the log\n" + "line of a long log\n" * 29_000 + "MIDDLE-MARK\n"
PASTE += "another line of it\n" * 27_000 + "TAIL-MARK the last line"


def _too_long_above(chars: int, then: Reply) -> object:
    """The real Messages API's answer to a request over the context window (here: over ``chars``)."""

    def respond(body: Body) -> Reply:
        return prompt_too_long() if len(json.dumps(body)) > chars else then

    return respond


async def test_a_1mb_paste_is_kept_whole_and_the_model_reads_head_tail_and_a_note(harness: AgentHarness) -> None:
    h = harness
    assert len(PASTE) > 1_000_000
    h.agent.deps.distiller = distiller = Distiller(h.llm, FactStore(h.db))
    h.main = _too_long_above(200_000, text("That is a long log."))
    assert await h.dm(PASTE) == "That is a long log."

    (request,) = h.main_requests()
    said = user_said(request)
    assert said.startswith("HEAD-MARK") and said.endswith("TAIL-MARK the last line"), said[:200]
    assert "MIDDLE-MARK" not in said and len(said) < LIMIT + 300
    rel = f"chats/{OWNER_DM.id}/long-messages/"
    assert f"characters cut here; the whole text is the workspace file {rel}" in said
    (kept,) = (h.workspace / rel).iterdir()
    assert kept.read_text() == PASTE and kept.stat().st_mode & 0o777 == 0o600
    archived = await h.db.fetchone("select text from tg_messages where chat_id = ? order by id", (OWNER_DM.id,))
    assert archived[0] == PASTE  # the archive keeps it whole

    await distiller.drain()
    await until(lambda: not distiller._tasks)
    (distilled,) = [b for b in h.fake.requests if b["model"] == UTILITY_MODEL]
    assert "HEAD-MARK" in json.dumps(distilled) and len(json.dumps(distilled)) < 15_000

    h.main = _too_long_above(200_000, text("4"))
    assert await h.dm("what is 2+2") == "4"
    assert len(json.dumps(h.main_requests()[-1])) < 60_000  # the paste does not ride along whole


async def test_the_agent_reads_the_cut_part_from_the_kept_file(harness: AgentHarness) -> None:
    h = harness
    for tool in workspace_tools():
        h.agent.deps.registry.register(tool)

    def model(body: Body) -> Reply:
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            found = "found the middle" if "MIDDLE-MARK" in json.dumps(tool_results(body)) else "no middle"
            return text(found)
        path = user_said(body).split("the whole text is the workspace file ")[1].split(":")[0]
        return tool_use(("workspace_read", {"path": path, "offset": PASTE.index("MIDDLE-MARK") - 100}))

    h.main = model
    assert await h.dm(PASTE) == "found the middle"


async def test_a_session_holding_an_old_paste_is_cut_when_the_model_says_too_long(harness: AgentHarness) -> None:
    h = harness
    session = await h.agent.sessions.create(OWNER_DM.id)
    session.messages = [  # a paste from before the input limit, and its answer
        {"role": "user", "content": PASTE},
        {"role": "assistant", "content": "A long log indeed."},
    ]
    await h.agent.sessions.save(session)
    h.main = _too_long_above(200_000, text("4"))
    assert await h.dm("what is 2+2") == "4"
    # too long; compacted (the paste is among the messages kept) and still too long; cut; answered
    assert len(h.main_requests()) == 3

    start = len(h.fake.requests)
    assert await h.dm("and 3+3?") == "4"
    assert len(h.main_requests(start)) == 1  # the session is healthy again: no overflow, no retry
    active = await h.agent.sessions.active(OWNER_DM.id)
    assert max(len(m["content"]) for m in active.messages if isinstance(m["content"], str)) < LIMIT + 200


async def test_a_paste_the_agent_was_not_asked_about_rides_along_as_its_excerpt(harness: AgentHarness) -> None:
    # In a group, unanswered messages come with the next one addressed to the agent (``earlier_context``).
    h = harness
    pasted = h.message(GROUP, ALICE, PASTE)
    h.main = _too_long_above(200_000, text("Seen it."))
    assert await h.send(GROUP, ALICE, "@teleton what broke?", earlier_context=(pasted,), mentions_us=True) == "Seen it."

    (request,) = h.main_requests()
    said = user_said(request)
    assert "HEAD-MARK" in said and "TAIL-MARK" in said and "MIDDLE-MARK" not in said, said[:300]
    assert said.endswith("Alice (@alice): @teleton what broke?") and len(said) < LIMIT + 500
    kept = h.workspace / f"chats/{GROUP.id}/long-messages/{pasted.message_id}.txt"
    assert kept.read_text() == PASTE and f"the whole text is the workspace file {kept.relative_to(h.workspace)}" in said
    session = await h.agent.sessions.active(GROUP.id)
    stored = [m["content"] for m in session.messages if isinstance(m["content"], str)]
    assert stored and max(len(c) for c in stored) < LIMIT + 500  # later turns carry the excerpt only
