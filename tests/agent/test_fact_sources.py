"""Where a fact came from (issue 37, provenance): every fact the distiller keeps names the archived messages
of its exchange (the person's message and the answer), a fact found again gains the new exchange's, and
forgetting a message drops its link. Real runtime, real SDK, the scripted Messages API and a real database;
the utility model is scripted to extract what a good extractor would.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime
from typing import Any

from teleton.agent.distiller import TRANSCRIPT_HEADER, Distiller
from teleton.gateway.contract import ChatInfo
from teleton.memory.facts.sources import of_facts
from teleton.memory.forget.feed import erase_messages
from teleton.memory.journal.learnings import Learnings
from tests.agent.conftest import OWNER, OWNER_DM, AgentHarness
from tests.fakes.anthropic_server import Body, Reply, text, tool_results, tool_use, user_said


def _record(content: str) -> Reply:
    fact = {"content": content, "category": "pet", "key": "cat_name", "importance": 0.8, "about": "speaker"}
    return tool_use(("record_facts", {"facts": [fact]}))


def _extractor(body: Body) -> Reply:
    said = body["messages"][-1]["content"].split("Facts already remembered")[0]
    if "Whiskerino" in said:
        return _record("Olga's cat is called Whiskerino.")
    return tool_use(("record_facts", {"facts": []}))


async def _sources(h: AgentHarness) -> dict[str, list[tuple[int, int]]]:
    rows = await h.db.fetchall("select id, value from facts")
    links = await h.db.read(lambda conn: of_facts(conn, [int(r[0]) for r in rows]))
    return {str(r[1]): links.get(int(r[0]), []) for r in rows}


async def _exchange_ids(h: AgentHarness, words: str) -> list[tuple[int, int]]:
    """The archived messages of the exchange that began with ``words``: the person's, then our answer."""
    asked = await h.db.fetchone("select chat_id, message_id, date from tg_messages where text = ?", (words,))
    answer = await h.db.fetchone(
        "select message_id from tg_messages where chat_id = ? and is_outgoing = 1 and date >= ? "
        "order by date, message_id limit 1",
        (asked[0], asked[2]),
    )
    return [(int(asked[0]), int(asked[1])), (int(asked[0]), int(answer[0]))]


async def test_a_fact_names_the_messages_it_came_from_and_forgetting_one_drops_its_link(
    harness: AgentHarness,
) -> None:
    h = harness
    distiller = Distiller(h.llm, h.agent.deps.facts, Learnings(h.workspace), principals=h.agent.principals)
    h.agent.deps.distiller = distiller
    h.utility = _extractor
    first = "my cat is called Whiskerino"
    await h.dm(first)
    await distiller.drain()
    sources = await _sources(h)
    assert {k: sorted(v) for k, v in sources.items()} == {
        "Olga's cat is called Whiskerino.": sorted(await _exchange_ids(h, first))
    }

    again = "did I tell you? Whiskerino is my cat"
    await h.dm(again)  # the same fact, found again: it gains this exchange's messages
    await distiller.drain()
    both = sorted(await _exchange_ids(h, first) + await _exchange_ids(h, again))
    assert sorted((await _sources(h))["Olga's cat is called Whiskerino."]) == both

    # The first message is erased from the archive (as /forget does): its link goes, the others stay.
    gone = (await _exchange_ids(h, first))[0]
    row = await h.db.fetchone("select id from tg_messages where chat_id = ? and message_id = ?", gone)
    await h.db.write(lambda conn: erase_messages(conn, [int(row[0])]))
    left = (await _sources(h))["Olga's cat is called Whiskerino."]
    assert gone not in left and len(left) == len(both) - 1


async def test_a_steered_answer_is_not_a_source(harness: AgentHarness) -> None:
    """An owner's turn shown another chat's words distils only what the owner said: its answer is no source."""
    h = harness
    distiller = Distiller(h.llm, h.agent.deps.facts, Learnings(h.workspace), principals=h.agent.principals)
    h.agent.deps.distiller = distiller
    h.utility = _extractor
    await h.group("the bake sale is on Friday", sender=OWNER)  # the group's words, in the archive
    seen: list[Any] = []

    def main(body: Body) -> Reply:
        seen.append(body)
        return tool_use(("search_messages", {"query": "bake sale Friday"})) if len(seen) == 1 else text("Noted.")

    h.main = main
    words = "my cat is called Whiskerino; and when is the bake sale?"
    await h.dm(words)
    await distiller.drain()
    asked = (await _exchange_ids(h, words))[0]
    assert (await _sources(h))["Olga's cat is called Whiskerino."] == [asked]  # the person's message only


async def test_forgetting_a_message_forgets_what_was_learned_only_from_it(harness: AgentHarness) -> None:
    h = harness
    distiller = Distiller(h.llm, h.agent.deps.facts, Learnings(h.workspace), principals=h.agent.principals)
    h.agent.deps.distiller = distiller

    def extractor(body: Body) -> Reply:
        said = body["messages"][-1]["content"].split("Facts already remembered")[0]
        if "Rex" in said:
            fact = {"content": "Olga's dog is called Rex.", "category": "pet", "key": "dog_name",
                    "importance": 0.8, "about": "speaker"}  # fmt: skip
            return tool_use(("record_facts", {"facts": [fact]}))
        return _extractor(body)

    h.utility = extractor
    for words in ("my cat is called Whiskerino", "my dog is called Rex", "again: Whiskerino is my cat"):
        await h.dm(words)
        await distiller.drain()

    async def forget(words: str) -> None:
        target = await h.db.fetchone("select message_id from tg_messages where text = ?", (words,))
        ask = h.message(ChatInfo(id=OWNER.id, type="dm"), OWNER, "/forget", reply_to_id=target[0])
        await h.archive(ask)
        preview = await h.agent.handle(ask)
        assert preview is not None and "Send /forget confirm" in preview
        assert "Forgotten:" in (await h.dm("/forget confirm") or "")

    await forget("my dog is called Rex")  # the dog was learned from that message alone
    await forget("my cat is called Whiskerino")  # the cat was said again in another message
    facts = [r[0] for r in await h.db.fetchall("select value from facts")]
    assert facts == ["Olga's cat is called Whiskerino."]


async def test_a_fact_from_a_transcript_names_the_line_it_came_from_and_takes_its_date(harness: AgentHarness) -> None:
    """The memory flush (and compaction) distil the session as a numbered transcript, each user's line dated. A
    fact names the lines it was taken from: it is linked to those archived messages, and "yesterday" is
    resolved against their date, not the flush's. A number that is not a user's line of the transcript (the
    assistant's, or made up) links nothing. No model request ever carries the session's archive rows."""
    h = harness
    said: dict[str, list[int]] = {}

    def utility(body: Body) -> Reply:
        content = body["messages"][-1]["content"]
        if TRANSCRIPT_HEADER not in content:
            return tool_use(("record_facts", {"facts": []}))
        lines = {int(n): line for n, line in re.findall(r"^\[(\d+)\] (.*)$", content, re.M)}
        said["user"] = [n for n, line in lines.items() if line.startswith("User (") and "Porto" in line]
        said["assistant"] = [n for n, line in lines.items() if line.startswith("Assistant")]
        moved = {"content": "Olga's sister Ana moved to Porto yesterday.", "category": "family", "importance": 0.8,
                 "about": "other:Ana", "from": said["user"]}  # fmt: skip
        dog = {"content": "Olga walks the dog at six.", "category": "habit", "importance": 0.5,
               "from": [*said["assistant"], 999]}  # fmt: skip
        return tool_use(("record_facts", {"facts": [moved, dog]}))

    h.utility = utility
    monday = datetime(2026, 11, 9, 12, 0).timestamp()
    porto = replace(h.message(OWNER_DM, OWNER, "my sister Ana moved to Porto yesterday!"), date=monday)
    await h.archive(porto)
    await h.agent.handle(porto)
    await h.dm("I walk the dog at six, by the way")
    session = await h.agent.sessions.active(OWNER_DM.id)
    await h.agent.compactor.flush(session, h.agent.principals.clearance(OWNER_DM.id))

    assert said["user"] and said["assistant"]  # the model was shown numbered, dated lines
    sources = await _sources(h)
    assert sources["Olga's sister Ana moved to Porto yesterday (8 November 2026)."] == [(OWNER_DM.id, porto.message_id)]
    assert sources["Olga walks the dog at six."] == []
    assert not [b for b in h.fake.requests if "_archived" in json.dumps(b)]


async def test_a_fact_memory_save_keeps_names_the_message_it_was_saved_for(harness: AgentHarness) -> None:
    """The model saves a fact with memory_save while answering a message: the fact names that message, so
    forgetting the message forgets what was saved from it."""
    h = harness

    def model(body: Body) -> Reply:
        if tool_results(body):
            return text("Noted.")
        if "locker" in user_said(body):
            return tool_use(("memory_save", {"value": "Olga's gym locker code is 4417", "category": "home"}))
        return text("ok")

    h.main = model
    await h.dm("remember: my gym locker code is 4417")
    asked = await h.db.fetchone("select message_id from tg_messages where text like 'remember: my gym locker%'")
    assert await _sources(h) == {"Olga's gym locker code is 4417": [(OWNER.id, int(asked[0]))]}

    ask = h.message(OWNER_DM, OWNER, "/forget", reply_to_id=int(asked[0]))
    await h.archive(ask)
    assert "Send /forget confirm" in (await h.agent.handle(ask) or "")
    assert "Forgotten:" in (await h.dm("/forget confirm") or "")
    assert await h.db.fetchall("select value from facts") == []
