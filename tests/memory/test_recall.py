"""The one search over memory (``memory/recall.py``) that the turn's context and the memory tools share: a
clearance finds only what it may read in every layer, and "yesterday" ranks the day before the question first."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from teleton.gateway.contract import ChatInfo
from teleton.memory import recall
from teleton.memory.facts.rows import Fact
from teleton.memory.facts.store import FactStore
from teleton.memory.feed import archive as fa
from teleton.memory.knowledge.rows import store_entry
from teleton.memory.recall import Question
from teleton.memory.search.hybrid import SearchParams
from teleton.privacy import OWNER, PUBLIC, Principals
from teleton.privacy.labels import group_label
from teleton.storage import Database

OWNER_ID, GROUP_A, GROUP_B = 4242, -100111, -100222
PRINCIPALS = Principals(owner_id=OWNER_ID)
PARAMS = SearchParams(limit=10, min_score=0.0)


async def archive(db: Database, chat_id: int, text: str, when: float) -> None:
    def _write(conn: object) -> None:
        fa.upsert_chat(conn, ChatInfo(chat_id, "dm" if chat_id > 0 else "group"), when)
        message_id = (fa.last_message_id(conn, chat_id) or 0) + 1
        fa.insert_message(conn, fa.MessageRecord(chat_id, message_id, when, text, sender_id=7, sender_name="Ann"))

    await db.write(_write)


def ask(text: str, chat_id: int, asked_at: float | None = None) -> Question:
    return Question(text, None, PRINCIPALS.clearance(chat_id), asked_at=asked_at)


async def test_a_group_finds_its_own_messages_and_the_owner_finds_every_chat(db: Database) -> None:
    now = time.time()
    for chat_id in (GROUP_A, GROUP_B, OWNER_ID):
        await archive(db, chat_id, f"the lighthouse keeper moved in chat {chat_id}", now)

    group = await recall.feed(db, ask("lighthouse keeper", GROUP_A), PARAMS, PRINCIPALS)
    owner = await recall.feed(db, ask("lighthouse keeper", OWNER_ID), PARAMS, PRINCIPALS)

    assert {int(h.meta["chat_id"]) for h in group} == {GROUP_A}
    assert {int(h.meta["chat_id"]) for h in owner} == {GROUP_A, GROUP_B, OWNER_ID}


async def test_yesterday_is_the_day_before_the_question(db: Database) -> None:
    asked = datetime(2026, 3, 12, 15, 0).timestamp()
    day_before = (datetime(2026, 3, 12, 15, 0) - timedelta(days=1)).timestamp()
    await archive(db, OWNER_ID, "ferry tickets: the ferry tickets are booked", day_before - 7 * 86400)
    await archive(db, OWNER_ID, "booked the ferry tickets", day_before)

    plain = await recall.feed(db, ask("ferry tickets", OWNER_ID, asked), PARAMS, PRINCIPALS)
    dated = await recall.feed(db, ask("ferry tickets yesterday", OWNER_ID, asked), PARAMS, PRINCIPALS)

    assert plain[0].text.startswith("ferry tickets:")  # the better keyword match, a week older
    assert dated[0].text == "booked the ferry tickets"  # the one from the day before the question


async def test_knowledge_of_another_label_stays_hidden(db: Database) -> None:
    await store_entry(db, "The vault code is kept in the blue binder.", source="memory", path="a.md", label=OWNER)
    await store_entry(db, "The blue binder holds the club rules.", source="memory", path="b.md", label=PUBLIC)
    await store_entry(db, "Group A keeps its blue binder notes here.", source="memory", path="c.md",
                      label=group_label(GROUP_A))  # fmt: skip

    group = await recall.knowledge(db, ask("blue binder", GROUP_A), PARAMS)
    owner = await recall.knowledge(db, ask("blue binder", OWNER_ID), PARAMS)

    assert {h.meta["label"] for h in group} == {PUBLIC, group_label(GROUP_A)}
    assert {h.meta["label"] for h in owner} == {OWNER, PUBLIC, group_label(GROUP_A)}


async def test_shown_facts_keep_the_clearance_and_the_subjects_asked_for(db: Database) -> None:
    facts = FactStore(db)
    for value, subject, scope in (
        ("prefers window seats", "user:1", group_label(GROUP_A)),
        ("prefers aisle seats", "user:2", group_label(GROUP_A)),
        ("prefers window seats on sleeper trains", "user:1", OWNER),
    ):
        await facts.save(Fact(value, category="preference", subject=subject, scope=scope))

    def only_one(subject: str) -> bool:
        return subject == "user:1"

    found = await db.read(lambda conn: recall.shown_facts(conn, ask("seats trains", GROUP_A), PARAMS, 5, only_one))

    assert [h.text for h in found] == ["prefers window seats"]
