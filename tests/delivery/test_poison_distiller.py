"""One poison exchange does not block the distiller (docs/operations.md): when the utility model always fails on one
chat's exchange, the other chats' commits — and that chat's next exchange — still save their facts, and the
failure is reported (``Distiller.on_error``, the daemon's "distiller" health record)."""

from __future__ import annotations

import asyncio

from teleton.agent.distiller import Distiller, Exchange
from teleton.gateway.contract import ChatInfo
from teleton.llm import LLMClient
from teleton.memory.facts.store import FactStore
from teleton.storage import Database
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, error, tool_use, user_said

POISON = "POISON-PILL"


def _utility(body: Body) -> Reply:
    said = user_said(body)
    if POISON in said:
        return error(500, "api_error", "the model fails on this input every time")
    name = said.split("my name is ", 1)[1].split(".", 1)[0] if "my name is " in said else "nobody"
    return tool_use(("record_facts", {"facts": [{"content": f"The user is called {name}", "category": "person",
                                                "importance": 0.7}]}))  # fmt: skip


async def test_a_poison_exchange_is_reported_and_blocks_no_other_commit(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic
) -> None:
    fake_api.responder = _utility
    reported: list[BaseException] = []
    distiller = Distiller(llm, FactStore(db), on_error=reported.append)
    poisoned = ChatInfo(id=-900, type="group", title="Poisoned")

    def exchange(chat: ChatInfo, said: str) -> Exchange:
        return Exchange(chat, "someone", said, "Nice to meet you.", label=f"chat:{chat.id}")

    tasks = [distiller.schedule(exchange(poisoned, f"{POISON} my name is Mallory."))]
    tasks += [distiller.schedule(exchange(ChatInfo(id=-901 - i, type="group"), f"Hi, my name is Name{i}."))
              for i in range(5)]  # fmt: skip
    tasks.append(distiller.schedule(exchange(poisoned, "And my name is Trent.")))  # behind the poison, same chat
    results = await asyncio.wait_for(asyncio.gather(*tasks), 60)
    await distiller.drain()

    facts = {(r[0], r[1]) for r in await db.fetchall("select scope, value from facts")}
    assert {(f"chat:{-901 - i}", f"The user is called Name{i}") for i in range(5)} <= facts
    assert ("chat:-900", "The user is called Trent") in facts  # the poisoned chat's next exchange went through
    assert not any("Mallory" in value for _, value in facts)
    assert results[0].skipped and "model" in results[0].skipped  # the poison itself saved nothing
    assert len(distiller._locks) == 0
    assert len(reported) == 1, f"the poison exchange's failure was not reported: {results[0].skipped!r}"
    assert "fails on this input" in str(reported[0])
