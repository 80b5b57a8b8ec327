"""Forgetting at the memory layer: what a needle matches, who may erase what, deleted Telegram messages, and the
inputs that must not hurt (empty, one character, FTS operators, a symlink out of the workspace). Real SQLite
with sqlite-vec and the real ONNX model."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from teleton.gateway.contract import ChatInfo
from teleton.memory.embeddings.cached import CachedProvider, text_hash
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.facts.rows import Fact
from teleton.memory.facts.store import FactStore
from teleton.memory.feed import archive as fa
from teleton.memory.feed.embedding import embed_pending, index_text, load_context, read_pending
from teleton.memory.forget.everywhere import OWNER_SCOPE, ForgetScope, NeedleError, erase, find, parse_needle
from teleton.memory.forget.match import compile_needle
from teleton.storage import Database
from teleton.telegram.receive.archiver import ArchiveBatcher
from teleton.telegram.receive.pipeline import FeedPipeline

ANN, BOB = 5151, 6262
GROUP = -100777
PHONE = "+351 912 345 678"


async def archive(db: Database, chat_id: int, texts: list[tuple[int, str]], start: float | None = None) -> list[int]:
    """Archive ``(sender, text)`` messages one second apart; return their row ids."""
    now = start or time.time()

    def _write(conn: Any) -> list[int]:
        fa.upsert_chat(conn, ChatInfo(chat_id, "dm" if chat_id > 0 else "group"), now)
        base = (fa.last_message_id(conn, chat_id) or 0) + 1
        return [
            fa.insert_message(
                conn, fa.MessageRecord(chat_id, base + i, now + i, text, sender_id=sender, sender_name=f"u{sender}")
            ).row_id
            for i, (sender, text) in enumerate(texts)
        ]

    return await db.write(_write)


def test_needles_that_would_match_everything_are_refused() -> None:
    for bad in ("", "   ", "a", "ab", " x "):
        with pytest.raises(NeedleError):
            parse_needle(bad)
    with pytest.raises(NeedleError, match="too long"):
        parse_needle("x" * 501)
    assert parse_needle("  Ana   Lisboa ").text == "Ana Lisboa"


def test_a_phone_number_matches_whatever_its_spacing() -> None:
    matcher = compile_needle(PHONE)
    for same in ("call 351912345678", "(351) 912-345-678", "+351.912.345.678", "00351 912 345 678 ok"):
        assert matcher.hit(same), same
    for other in ("+351 912 345 679", "912 345 678", "351 912 34 56 79"):
        assert not matcher.hit(other), other
    assert matcher.sub("mine: +351 912-345-678.") == ("mine: [forgotten].", 1)
    # A text needle: case and spacing do not matter, the rest does.
    text = compile_needle("Rua das  Flores")
    assert text.hit("lives at RUA DAS\nflores 12") and not text.hit("Rua das Flor")


async def test_an_fts_operator_needle_is_plain_text(mdb: Database, tmp_path: Path) -> None:
    await archive(mdb, ANN, [(ANN, "the query NEAR( OR * broke the search"), (ANN, "near or far, we go")])
    findings = await find(mdb, tmp_path, parse_needle("NEAR( OR *"), OWNER_SCOPE)
    assert findings.counts()["archive"] == 1
    report = await erase(mdb, tmp_path, findings)
    assert report.erased["archive"] == 1
    left = await mdb.fetchall("select text from tg_messages_fts where tg_messages_fts match '\"near\"'")
    assert [r[0] for r in left] == ["near or far, we go"]


async def test_a_symlink_out_of_the_workspace_is_never_read_or_written(mdb: Database, tmp_path: Path) -> None:
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    (workspace / "memory").mkdir(parents=True)
    outside.mkdir()
    secret = outside / "notes.md"
    secret.write_text(f"- Ann: {PHONE}\n")
    (workspace / "memory" / "linked.md").symlink_to(secret)
    (workspace / "chats").symlink_to(outside, target_is_directory=True)
    (workspace / "MEMORY.md").write_text(f"# Me\n- Ann's phone {PHONE}\n- Ann likes tea\n")
    os.symlink("../outside/notes.md", workspace / "USER.md")

    findings = await find(mdb, workspace, parse_needle(PHONE), OWNER_SCOPE)
    assert findings.files == {"MEMORY.md": 1}
    report = await erase(mdb, workspace, findings)
    assert report.erased["files"] == 1
    assert (workspace / "MEMORY.md").read_text() == "# Me\n- Ann likes tea\n"
    assert secret.read_text() == f"- Ann: {PHONE}\n" and (workspace / "memory" / "linked.md").is_symlink()


async def test_another_person_forgets_only_their_own(mdb: Database, tmp_path: Path, embedder: LocalEmbedder) -> None:
    facts = FactStore(mdb, embedder)
    own = await archive(mdb, ANN, [(ANN, f"my number is {PHONE}"), (0, "Thanks Ann, noted.")])
    in_group = await archive(mdb, GROUP, [(ANN, f"Ann here: {PHONE}"), (BOB, f"Bob saw {PHONE} too")])
    await archive(mdb, 4242, [(4242, f"Ann's number: {PHONE}")])  # the owner's DM
    await facts.save(Fact(f"Ann's phone is {PHONE}", scope=f"user:{ANN}"))
    await facts.save(Fact(f"Ann's phone is {PHONE}", scope="owner"))
    await facts.save(Fact(f"Ann's phone is {PHONE}", scope=f"chat:{GROUP}"))
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    log = workspace / "memory" / "2025-01-02.md"
    log.write_text(
        f"[09:00] User: Ann's is {PHONE} | Assistant: ok\n"
        f"> [09:01] (from DM with Ann (user:{ANN})) User: it is {PHONE} | Assistant: noted\n"
        f"> [09:02] (from DM with Bob (user:{BOB})) User: Ann's is {PHONE} | Assistant: ok\n"
    )

    ann = ForgetScope(user_id=ANN)
    findings = await find(mdb, workspace, parse_needle(PHONE), ann)
    counts = findings.counts()
    # Her DM's message: what she said in the group is the group's (label chat:), not hers to count or erase.
    assert counts["archive"] == 1 and counts["facts"] == 1 and counts["daily_logs"] == 1
    report = await erase(mdb, workspace, findings)
    assert report.erased["archive"] == 1 and report.erased["facts"] == 1 and report.wiped is None

    left = {r[0] for r in await mdb.fetchall("select id from tg_messages")}
    assert own[0] not in left and in_group[0] in left and in_group[1] in left and own[1] in left
    scopes = sorted(r[0] for r in await mdb.fetchall("select scope from facts"))
    assert scopes == [f"chat:{GROUP}", "owner"]
    assert f"(user:{ANN})" not in log.read_text() and log.read_text().count(PHONE) == 2
    # The owner's scope takes the rest.
    report = await erase(mdb, workspace, await find(mdb, workspace, parse_needle(PHONE), OWNER_SCOPE))
    assert report.erased["archive"] == 3 and report.erased["facts"] == 2 and report.wiped is True


@pytest.mark.parametrize("mode", ["erase", "keep"])
async def test_a_message_deleted_in_telegram(mdb: Database, embedder: LocalEmbedder, mode: str) -> None:
    cached = CachedProvider(embedder, mdb)
    ids = await archive(
        mdb,
        GROUP,
        [(ANN, "who is bringing the cake?"), (BOB, "zanzibarcake is on me"), (ANN, "great"), (BOB, "see you")],
    )
    before = await mdb.read(lambda conn: read_pending(conn, 10))
    gone_text = index_text(before.messages[1], before.contexts[1])
    assert await embed_pending(mdb, cached) == 4
    assert await mdb.fetchone("select 1 from embedding_cache where hash = ?", (text_hash(gone_text),))

    batcher = ArchiveBatcher(mdb)
    pipeline = FeedPipeline(mdb, batcher, deleted_messages=mode)
    try:
        assert await pipeline.delete(GROUP, [2]) == 1
    finally:
        await batcher.close()

    row = await mdb.fetchone("select deleted from tg_messages where id = ?", (ids[1],))
    keyword = await mdb.fetchall("select rowid from tg_messages_fts where tg_messages_fts match 'zanzibarcake'")
    vectors = await mdb.fetchall("select id from tg_messages_vec16 where id = ?", (ids[1],))
    halves = await mdb.fetchall("select id from tg_messages_vec16 where id = ?", (ids[1],))
    cache = await mdb.fetchone("select 1 from embedding_cache where hash = ?", (text_hash(gone_text),))
    if mode == "keep":
        assert row[0] == 1 and len(keyword) == 3 and vectors and halves and cache
        return
    assert row is None and keyword == [] and vectors == [] and halves == [] and cache is None
    # The next two messages carried it as context: rebuilt from what is left, and embedded again without it.
    embedded = await mdb.fetchall("select id, embedded from tg_messages order by id")
    assert [tuple(r) for r in embedded] == [(ids[0], 1), (ids[2], 0), (ids[3], 0)]
    context = await mdb.read(lambda conn: [m.text for m in load_context(conn, before.messages[3])])
    assert context == ["who is bringing the cake?", "great"]
    assert await embed_pending(mdb, cached) == 2


async def test_old_copies_in_free_pages_are_vacuumed_away(mdb: Database, tmp_path: Path) -> None:
    await archive(mdb, ANN, [(ANN, f"my number is {PHONE}")])
    # Deleted before forgetting, without secure_delete: its bytes stay in a free page of the file.
    row = await archive(mdb, ANN, [(ANN, f"old note zebracopy {PHONE}")])
    await mdb.execute("delete from tg_messages where id = ?", (row[0],))
    await mdb.checkpoint()
    assert b"zebracopy" in mdb.path.read_bytes()

    report = await erase(mdb, tmp_path, await find(mdb, tmp_path, parse_needle(PHONE), OWNER_SCOPE))
    assert report.erased["archive"] == 1 and report.wiped is True
    data = mdb.path.read_bytes()
    assert b"zebracopy" not in data and b"912 345 678" not in data


def test_the_cli_finds_asks_and_erases(tmp_path: Path, isolated_home: Path) -> None:
    from typer.testing import CliRunner

    from teleton.cli.main import app

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(f"# Me\n- phone {PHONE}\n- tea\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"storage:\n  data_dir: {tmp_path / 'data'}\n  workspace: {ws}\nembedding:\n  provider: none\n")
    runner = CliRunner()
    assert runner.invoke(app, ["-c", str(config), "memory", "index"]).exit_code == 0

    kept = runner.invoke(app, ["-c", str(config), "memory", "forget", PHONE], input="n\n")
    assert kept.exit_code == 0, kept.output
    assert "lines of memory files: 1" in kept.output and "nothing erased" in kept.output
    assert PHONE in (ws / "MEMORY.md").read_text()

    done = runner.invoke(app, ["-c", str(config), "memory", "forget", PHONE, "--yes"])
    assert done.exit_code == 0, done.output
    assert "Forgotten:" in done.output and "knowledge chunks: 1" in done.output
    assert (ws / "MEMORY.md").read_text() == "# Me\n- tea\n"

    again = runner.invoke(app, ["-c", str(config), "memory", "forget", PHONE])
    assert again.exit_code == 0 and again.output.strip() == "nothing in memory holds “+3…” (16 characters)"
    bad = runner.invoke(app, ["-c", str(config), "memory", "forget", "a"])
    assert bad.exit_code == 2 and "too short" in bad.output


async def test_a_message_erased_while_the_embedder_holds_its_neighbour(mdb: Database, embedder: LocalEmbedder) -> None:
    from teleton.memory.feed.embedding import store_batch
    from teleton.memory.forget.feed import forget_deleted

    ids = await archive(mdb, GROUP, [(ANN, f"ring me on {PHONE}"), (BOB, "will do tonight")])
    batch = await mdb.read(lambda conn: read_pending(conn, 10))  # the worker read both, the number in context
    stale = index_text(batch.messages[1], batch.contexts[1])
    assert PHONE in stale
    vectors = await embedder.embed([index_text(m, c) for m, c in zip(batch.messages, batch.contexts, strict=True)])
    await mdb.execute(  # what CachedProvider writes before the batch is stored
        "insert into embedding_cache(model, hash, dims, embedding, created_at, last_access) values (?, ?, ?, ?, 0, 0)",
        (embedder.model_id, text_hash(stale), embedder.dims, vectors[1].tobytes()),
    )
    assert await mdb.write(lambda conn: forget_deleted(conn, GROUP, [1])) == 1

    model = (embedder.model_id, embedder.dims)
    assert await mdb.write(lambda conn: store_batch(conn, batch, vectors, model)) == 0
    assert await mdb.fetchone("select 1 from embedding_cache where hash = ?", (text_hash(stale),)) is None
    assert await mdb.fetchall("select id from tg_messages_vec16 where id = ?", (ids[1],)) == []
    context = await mdb.fetchone("select context from tg_messages_fts where rowid = ?", (ids[1],))
    assert "912" not in context[0]
    assert await embed_pending(mdb, embedder) == 1  # embedded again, from what is left


async def test_the_all_chat_index_forgets_erased_vectors(
    mdb: Database, embedder: LocalEmbedder, tmp_path: Path
) -> None:
    from teleton.memory.search.bit_index import index_for, nearest
    from teleton.memory.search.corpora import FEED

    await archive(mdb, ANN, [(ANN, f"my number is {PHONE}"), (ANN, "I like green tea")])
    ids = await archive(mdb, GROUP, [(BOB, f"Ann's number is {PHONE}"), (BOB, "the match starts at nine")])
    await embed_pending(mdb, embedder)
    query = (await embedder.embed(["what is Ann's phone number?"]))[0]
    before = await mdb.read(lambda conn: nearest(conn, FEED, query, 4))
    assert ids[0] in before and len(await mdb.read(lambda conn: index_for(conn, FEED))) == 4

    await erase(mdb, tmp_path, await find(mdb, tmp_path, parse_needle(PHONE), OWNER_SCOPE))
    after = await mdb.read(lambda conn: nearest(conn, FEED, query, 4))
    assert ids[0] not in after
    # Rebuilt from the table: no copy of an erased vector stays in memory; the two messages after them had
    # embedded them as context, and are embedded again from what is left.
    assert len(await mdb.read(lambda conn: index_for(conn, FEED))) == 0
    assert await embed_pending(mdb, embedder) == 2
    assert len(await mdb.read(lambda conn: index_for(conn, FEED))) == 2
