"""/forget is no oracle (docs/privacy.md, issue 29): what another person is told is made of their own rows only.

Two worlds on real SQLite files with sqlite-vec, the real ONNX model behind the embedding cache and a real
knowledge index over a real workspace: (a) only Bob's own rows, (b) the same rows plus the owner's MEMORY.md,
notes, daily-log lines and summary, facts, DM messages, session, task and searches, a group's messages (one
of them Bob's), public knowledge, and another person's DM, facts and daily-log lines, all holding the owner's
PIN and therefore every prefix of it. Bob guesses the PIN one digit at a time, as the attack of issue 29 did:
his findings and the bytes of his answers are the same in both worlds and for every digit, while the owner's
/forget still finds the owner's copies.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.memory.embeddings.cached import CachedProvider
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.facts.rows import Fact
from teleton.memory.facts.store import FactStore
from teleton.memory.feed import archive as fa
from teleton.memory.feed.embedding import embed_pending
from teleton.memory.forget.everywhere import (
    OWNER_SCOPE,
    Findings,
    ForgetScope,
    Needle,
    erase,
    find,
    parse_needle,
    scope_for,
)
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.privacy import Clearance, Principals
from teleton.scheduler.task_store import NewTask, insert_task
from teleton.storage import Database
from teleton.tools.families.forget import describe_preview, describe_report

OWNER_ID, BOB, CAROL, MALLORY = 4242, 2002, 3003, 6006
GROUP = -100555
PIN = "PIN 73914"  # the owner's; every guess below is a prefix of it, or one digit off
GUESSES = [f"PIN 7{d}" for d in range(10)]
HIT = "PIN 73"
BOB_SCOPE = ForgetScope(user_id=BOB)
DAY = "memory/2025-03-04.md"
T0 = 1_740_000_000.0  # Bob's messages have the same dates in both worlds (their neighbours are by date)
APART = 7 * 3600.0  # Bob's guesses, further apart than a message's context reaches: alike for every digit


@dataclass
class World:
    db: Database
    workspace: Path
    knowledge: KnowledgeIndex
    bob_message: int  # the Telegram id of Bob's message holding HIT, in his DM


async def _archive(db: Database, chat_id: int, said: list[tuple[int, str, float]]) -> None:
    """Archive ``(sender, text, date)`` messages in one chat."""

    def _write(conn: Any) -> None:
        fa.upsert_chat(conn, ChatInfo(chat_id, "dm" if chat_id > 0 else "group"), T0)
        base = (fa.last_message_id(conn, chat_id) or 0) + 1
        for i, (sender, text, date) in enumerate(said):
            record = fa.MessageRecord(chat_id, base + i, date, text, sender_id=sender, sender_name=f"u{sender}")
            fa.insert_message(conn, record)

    await db.write(_write)


async def _session(db: Database, session_id: str, chat_id: int, said: list[str], summary: str = "") -> None:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": s} for i, s in enumerate(said)]
    await db.execute(
        "insert into sessions(id, chat_id, active, summary, messages_json, created_at, updated_at) "
        "values (?, ?, 1, ?, ?, ?, ?)",
        (session_id, chat_id, summary, json.dumps(messages), T0, T0),
    )


def _bob_line(i: int, text: str) -> str:
    return f"> [07:{10 + i:02d}] (from DM with Bob (user:{BOB})) User: {text} | Assistant: noted\n"


async def build(tmp_path: Path, embedder: LocalEmbedder, *, others: bool) -> World:
    """Bob's rows, the same in both worlds; with ``others``, everyone else's copies of the PIN too."""
    root = tmp_path / ("b" if others else "a")
    workspace = root / "workspace"
    (workspace / "memory").mkdir(parents=True)
    db = await Database.open(root / "teleton.db", embedding=(embedder.model_id, embedder.dims))
    cached = CachedProvider(embedder, db)
    knowledge = KnowledgeIndex(db, workspace, provider=cached, principals=Principals(owner_id=OWNER_ID))
    facts = FactStore(db, cached)

    # Bob's own: one guess per message of his DM (with the agent's answers), per fact, per daily-log line,
    # per summary of his; his conversation and a scheduled task of his DM hold them all.
    await db.write(lambda conn: fa.upsert_user(conn, UserInfo(BOB, "Bob", username="bob"), T0))
    said = [line for guess in GUESSES for line in (f"my guess: {guess}", "noted")]
    await _archive(
        db, BOB, [(BOB if i % 2 == 0 else OWNER_ID, s, T0 + i // 2 * APART + i % 2) for i, s in enumerate(said)]
    )
    for guess in GUESSES:
        await facts.save(Fact(f"Bob guessed {guess}", category="bob", scope=f"user:{BOB}"))
        await knowledge.add_entry(f"Bob guessed {guess}.", "session", f"sessions/{BOB}/{guess}", label=f"user:{BOB}")
    await _session(db, "bob", BOB, said)
    reminder = NewTask("remind Bob", "agent", {"prompt": " ".join(GUESSES)}, T0 + 9e5, BOB, clearance=f"user:{BOB}")
    await db.write(lambda conn: insert_task(conn, reminder))
    log = "".join(_bob_line(i, f"my guess: {guess}") for i, guess in enumerate(GUESSES))

    if others:
        log = await _plant_others(db, workspace, cached, facts, log)
    (workspace / DAY).write_text(log)
    await knowledge.reindex()
    await embed_pending(db, cached)
    row = await db.fetchone(
        "select message_id from tg_messages where chat_id = ? and text = ?", (BOB, f"my guess: {HIT}")
    )
    return World(db, workspace, knowledge, int(row[0]))


async def _plant_others(db: Database, workspace: Path, cached: CachedProvider, facts: FactStore, log: str) -> str:
    """Everyone else's copies of the PIN; returns the daily log with their lines around Bob's."""
    (workspace / "MEMORY.md").write_text(f"# Olga\n\n## Bank\nThe card {PIN} is for the blue card.\n")
    (workspace / "memory" / "notes.md").write_text(f"# Notes\n\nOld codes: {PIN}, PIN 7000, PIN 7555.\n")
    (workspace / "public").mkdir()
    (workspace / "public" / "faq.md").write_text(f"# FAQ\n\nThe door takes {PIN} on weekdays.\n")
    (workspace / "chats" / str(CAROL)).mkdir(parents=True)
    (workspace / "chats" / str(CAROL) / "note.md").write_text(f"Carol's copy: {PIN}\n")
    await facts.save(Fact(f"Olga's bank card is {PIN}", category="finance"))
    await facts.save(Fact(f"Carol heard {PIN}", category="gossip", scope=f"user:{CAROL}"))
    await facts.save(Fact(f"the group's PIN is {PIN}", category="club", scope=f"chat:{GROUP}"))
    await _archive(db, OWNER_ID, [(OWNER_ID, f"my card is {PIN}", T0 - 500), (OWNER_ID, "noted", T0 - 499)])
    await _archive(db, CAROL, [(CAROL, f"Olga's card: {PIN}", T0 - 400), (OWNER_ID, "ok", T0 - 399)])
    # A group: Mallory repeats it, and Bob says his guess there (a group's row, the group's label).
    await _archive(db, GROUP, [(MALLORY, f"Olga's PIN is {PIN}", T0 - 300), (BOB, f"my guess: {HIT}", T0 - 299)])
    await _session(db, "owner", OWNER_ID, [f"my card is {PIN}", "noted"], summary=f"Olga's card {PIN}")
    await _session(db, "carol", CAROL, [f"Olga's card: {PIN}", "ok"])

    def _tasks(conn: Any) -> None:
        insert_task(conn, NewTask(f"check {PIN}", "agent", {"prompt": PIN}, T0 + 9e5, OWNER_ID, clearance="owner"))
        # Not written by any path today: a task of the owner's clearance in Bob's chat is still not his.
        insert_task(conn, NewTask(f"tell Bob {PIN}", "agent", {"prompt": PIN}, T0 + 9e5, BOB, clearance="owner"))
        held = {"from_chat_id": OWNER_ID, "to_chat_id": GROUP, "kind": "message", "payload": json.dumps({"text": PIN}),
                "preview": PIN, "created_at": T0, "expires_at": T0 + 9e5}  # fmt: skip
        if "body" in {r[1] for r in conn.execute("pragma table_info(pending_sends)")}:
            # Schema 4 binds a held item to its bytes (docs/privacy.md "Approval is bound to content").
            digest = hashlib.sha256(PIN.encode()).hexdigest()
            held |= {"body": PIN.encode(), "body_sha256": digest, "digest": digest}
        marks = ", ".join("?" * len(held))
        conn.execute(f"insert into pending_sends({', '.join(held)}) values ({marks})", tuple(held.values()))

    await db.write(_tasks)
    # The owner searched for it, and for the prefix Bob is about to try: both are in the embedding cache.
    await cached.embed([PIN, HIT])
    owner = f"[07:00] User: my card is {PIN} | Assistant: noted\n"
    carol = f"> [07:40] (from DM with Carol (user:{CAROL})) User: Olga's card: {PIN} | Assistant: ok\n"
    summary = f"\n## [08:00] Session summary\nOlga changed her card to {PIN}.\n"
    return owner + log + carol + summary


async def answers(world: World, needle: Needle, scope: ForgetScope = BOB_SCOPE) -> tuple[Findings, str]:
    findings = await find(world.db, world.workspace, needle, scope)
    return findings, describe_preview(findings)


def shape(findings: Findings) -> tuple[Any, ...]:
    """Everything a findings holds that an answer could be made of."""
    return (findings.counts(), findings.empty, findings.files, findings.daily_logs, findings.excerpts)


@pytest.fixture
async def worlds(tmp_path: Path, embedder: LocalEmbedder) -> Any:
    alone, crowded = await build(tmp_path, embedder, others=False), await build(tmp_path, embedder, others=True)
    yield alone, crowded
    await alone.db.close()
    await crowded.db.close()


def test_a_non_owner_scope_is_their_dm() -> None:
    assert scope_for(Clearance("owner")) is OWNER_SCOPE
    assert scope_for(Clearance(f"user:{BOB}")) == BOB_SCOPE and BOB_SCOPE.label == f"user:{BOB}"
    assert scope_for(Clearance(f"chat:{GROUP}")) is None


async def test_guessing_the_pin_digit_by_digit_learns_nothing(worlds: tuple[World, World]) -> None:
    alone, crowded = worlds
    replies = set()
    for guess in GUESSES:
        needle = parse_needle(guess)
        mine, theirs = await answers(alone, needle), await answers(crowded, needle)
        assert shape(mine[0]) == shape(theirs[0]), guess
        assert mine[1] == theirs[1], guess
        replies.add(theirs[1])
    # One answer for every digit: his own guess each time, and nothing of anyone else's.
    (reply,) = replies
    assert reply.startswith("Found “PI…” (6 characters) in:\n"), reply
    for line in (
        "- archived messages (with their keyword rows and vectors): 1\n",
        "- facts (current and past): 1\n",
        "- knowledge chunks: 1\n",
        "- lines of daily logs: 1\n",
        "- conversations and their summaries (scrubbed to [forgotten]): 1\n",
        f"  files: {DAY}\n",
        "- archive: my guess: ░░░\n",
        "- later messages whose index carried it (rebuilt without it): 1\n",
        "Left alone (promises to deliver; change or cancel them yourself): scheduled tasks still to run: 1\n",
    ):
        assert line in reply, line
    assert "cached embeddings" not in reply and "vectors:" not in reply

    # The owner's own /forget still sees every copy, and tells the right digit from the others.
    hit, _ = await answers(crowded, parse_needle(HIT), OWNER_SCOPE)
    miss, _ = await answers(crowded, parse_needle("PIN 75"), OWNER_SCOPE)
    assert hit.counts()["archive"] > miss.counts()["archive"] and hit.counts()["knowledge"] > miss.counts()["knowledge"]
    assert hit.counts()["embedding_cache"] and set(hit.files) == {"MEMORY.md", "memory/notes.md", "public/faq.md",
                                                                  f"chats/{CAROL}/note.md"}  # fmt: skip


async def test_the_whole_pin_and_a_reply_give_the_same_answer_in_both_worlds(worlds: tuple[World, World]) -> None:
    alone, crowded = worlds
    # Nowhere in Bob's rows, everywhere in the owner's (the owner even searched for it): "nothing" both times.
    for needle in (parse_needle(PIN), parse_needle("PIN 739"), parse_needle("Olga's card")):
        mine, theirs = await answers(alone, needle), await answers(crowded, needle)
        assert shape(mine[0]) == shape(theirs[0]) and mine[1] == theirs[1]
        assert theirs[1] == f"I found nothing to forget for {needle.describe()}."
    # /forget as a reply to his own message: its text is also a group's message (Bob's there) in (b).
    needle = Needle(message=(BOB, alone.bob_message))
    assert crowded.bob_message == alone.bob_message
    mine, theirs = await answers(alone, needle), await answers(crowded, needle)
    assert shape(mine[0]) == shape(theirs[0]) and mine[1] == theirs[1]
    assert "archived messages (with their keyword rows and vectors): 1" in theirs[1]


@pytest.mark.parametrize("guess", [HIT, "PIN 75"])
async def test_the_erase_report_is_the_same_in_both_worlds(worlds: tuple[World, World], guess: str) -> None:
    alone, crowded = worlds
    needle = parse_needle(guess)
    owner_before = (await answers(crowded, parse_needle("PIN 739"), OWNER_SCOPE))[0]
    reports = []
    for world in (alone, crowded):
        findings, _ = await answers(world, needle)
        reports.append(describe_report(await erase(world.db, world.workspace, findings, knowledge=world.knowledge)))
        after, reply = await answers(world, needle)
        assert after.empty and reply == f"I found nothing to forget for {needle.describe()}."
    assert reports[0] == reports[1], reports
    report = reports[1]
    for line in (
        "- archived messages (with their keyword rows and vectors): 1\n",
        "- facts (current and past): 1\n",
        "- knowledge chunks: 1\n",
        "- lines of daily logs: 1\n",
    ):
        assert line in report, line
    # Nothing that is anyone else's to count, and no claim about the whole file either way.
    assert "vectors:" not in report and "cached embeddings" not in report and "database file" not in report

    # Everything of everyone else's is where it was: the owner finds the same copies as before.
    owner_after = (await answers(crowded, parse_needle("PIN 739"), OWNER_SCOPE))[0]
    before, after = owner_before.counts(), owner_after.counts()
    for layer in ("archive", "facts", "knowledge", "files", "daily_logs", "sessions", "pending_tasks", "held_sends"):
        assert before[layer] == after[layer], layer
    assert f"my guess: {HIT}" in [r[0] for r in await crowded.db.fetchall("select text from tg_messages")]
    log = (crowded.workspace / DAY).read_text()
    assert log.count(PIN) == 3 and f"my guess: {guess}" not in log
