"""`teleton feed stats|backfill|search` as a user runs them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from teleton.cli.feed_cmd import app
from teleton.cli.main import app as teleton_app
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.facts.rows import Fact
from teleton.memory.facts.sources import link
from teleton.memory.facts.store import FactStore
from teleton.memory.feed.embedding import embed_pending
from teleton.storage import Database
from tests.telegram.conftest import ALICE, GROUP, make_harness, new_message


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {"storage": {"data_dir": str(tmp_path / "data")}, "telegram": {"api_id": 1, "api_hash": "0" * 32}}
        )
    )
    return path


def _keyword_only_config(tmp_path: Path) -> Path:
    """A config with no embedding model: searches run on keywords alone."""
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}, "embedding": {"provider": "none"}})
    )
    return path


async def test_feed_stats_counts_what_was_archived(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TELETON_CONFIG", str(_config(tmp_path)))
    db = await Database.open(tmp_path / "data" / "teleton.db")
    h = await make_harness(db)
    await h.dispatch(
        new_message(ALICE, ALICE, "one"),
        new_message(GROUP, ALICE, "two", extra=(GROUP,)),
        new_message(GROUP, ALICE, "three", extra=(GROUP,)),
    )
    await h.gateway.stop(grace_s=1)
    await db.close()

    result = await asyncio.to_thread(CliRunner().invoke, app, ["stats"])  # the CLI runs its own loop
    assert result.exit_code == 0, result.output
    assert "messages 3" in result.output and "chats 2" in result.output and "users 1" in result.output
    assert "Book club" in result.output


def test_feed_stats_without_an_archive(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TELETON_CONFIG", str(_config(tmp_path)))
    result = CliRunner().invoke(app, ["stats"])
    assert result.exit_code == 0 and "no archive yet" in result.output


def test_backfill_before_login_says_what_to_do(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TELETON_CONFIG", str(_config(tmp_path)))
    result = CliRunner().invoke(app, ["backfill", "@somechat", "--limit", "10"])
    assert result.exit_code == 1
    assert "teleton setup" in result.output


async def test_feed_search_finds_archived_messages_in_scope(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TELETON_CONFIG", str(_keyword_only_config(tmp_path)))
    db = await Database.open(tmp_path / "data" / "teleton.db")
    h = await make_harness(db)
    await h.dispatch(
        new_message(ALICE, ALICE, "the lighthouse keeper retired"),
        new_message(GROUP, ALICE, "a lighthouse in the group", extra=(GROUP,)),
        new_message(GROUP, ALICE, "nothing relevant", extra=(GROUP,)),
        new_message(ALICE, ALICE, "[/] a beacon [b]"),
    )
    await h.gateway.stop(grace_s=1)
    await db.close()

    runner = CliRunner()
    everywhere = await asyncio.to_thread(runner.invoke, app, ["search", "lighthouse"])
    assert everywhere.exit_code == 0, everywhere.output
    assert "keeper" in everywhere.output and "in the group" in everywhere.output
    scoped = await asyncio.to_thread(runner.invoke, app, ["search", "lighthouse", "--chat", str(ALICE.id)])
    assert "keeper" in scoped.output and "in the group" not in scoped.output
    hostile = await asyncio.to_thread(runner.invoke, app, ["search", '"NEAR( * -lighthouse AND'])
    assert hostile.exit_code == 0, hostile.output
    bracketed = await asyncio.to_thread(runner.invoke, app, ["search", "beacon"])  # shown as written, not markup
    assert bracketed.exit_code == 0 and "[/] a beacon [b]" in bracketed.output, bracketed.output


@pytest.mark.parametrize(("vector_weight", "shown"), [(0.0, False), (1.0, True)])
async def test_feed_search_ranks_with_the_configured_weights(
    tmp_path: Path, monkeypatch: Any, vector_weight: float, shown: bool
) -> None:
    # As the user runs it, ranked as the agent's own searches rank: with keywords alone (vector_weight 0) a
    # message sharing no word with the query is never shown; by meaning alone (1) it is.
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}, "memory": {"vector_weight": vector_weight}})
    )
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    embedder = LocalEmbedder(packaged_model())
    db = await Database.open(tmp_path / "data" / "teleton.db", embedding=(embedder.model_id, embedder.dims))
    texts = ["the plumber comes at nine on Tuesday", "a technician will repair the leaking pipes in the bathroom"]
    await db.write(
        lambda conn: [
            conn.execute(
                "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (7, ?, 'Ann', ?, ?)",
                (n + 1, 1_700_000_000 + n * 86_400, text),  # a day apart: neither is the other's context
            )
            for n, text in enumerate(texts)
        ]
    )
    await embed_pending(db, embedder)
    await db.close()
    embedder.close()

    found = await asyncio.to_thread(CliRunner().invoke, teleton_app, ["feed", "search", "plumber", "--json"])
    assert found.exit_code == 0, found.output
    shown_texts = [hit["text"] for hit in json.loads(found.stdout)]
    assert texts[0] in shown_texts
    assert (texts[1] in shown_texts) is shown


async def test_feed_search_finds_a_message_through_the_fact_drawn_from_it(tmp_path: Path, monkeypatch: Any) -> None:
    # As the agent's own searches find it (issue 37's key expansion): the query shares no word with the
    # message (in group -1007), the fact drawn from it does; `--chat` of another chat does not bring it in.
    monkeypatch.setenv("TELETON_CONFIG", str(_keyword_only_config(tmp_path)))
    db = await Database.open(tmp_path / "data" / "teleton.db")
    hall = "finally finished it, it hangs in the hall now"
    await db.write(
        lambda conn: conn.execute(
            "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (-1007, 1, 'Ann', 1.7e9, ?)",
            (hall,),
        )
    )
    painted = await FactStore(db).save(
        Fact("Ann painted a watercolour of the harbour", category="art", scope="chat:-1007")
    )
    await db.write(lambda conn: link(conn, painted.id, -1007, [1]))
    await db.close()

    def shown(*args: str) -> list[str]:
        found = CliRunner().invoke(teleton_app, ["feed", "search", "harbour watercolour", "--json", *args])
        assert found.exit_code == 0, found.output
        return [hit["text"] for hit in json.loads(found.stdout)]

    assert await asyncio.to_thread(shown) == [hall]
    assert await asyncio.to_thread(shown, "--chat", "-1007") == [hall]
    assert await asyncio.to_thread(shown, "--chat", "-1008") == []
