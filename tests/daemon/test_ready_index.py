"""The daemon says ready only once the in-memory index holds the archive's vectors and every reader has run
a search: the first search after a restart finds them without loading or opening anything."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from teleton.memory.embeddings.model_files import E5_MODEL_ID
from teleton.memory.search.corpora import FEED
from teleton.memory.search.vector_store import write_vectors
from teleton.storage import Database
from tests.daemon.harness import Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = pytest.mark.costly

MESSAGES, PENDING = 300, 200


async def _archive(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = await Database.open(path, embedding=(E5_MODEL_ID, 384))
    vectors = np.random.default_rng(1).normal(size=(MESSAGES, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def fill(conn) -> None:
        rows = []
        for n, vector in enumerate(vectors):
            chat = 1000 + n % 7
            row_id = conn.execute(
                "insert into tg_messages(chat_id, message_id, sender_name, date, text, embedded) "
                "values (?, ?, 'Ann', ?, ?, 1)",
                (chat, n + 1, 1_700_000_000 + n, f"message {n}"),
            ).lastrowid
            rows.append((row_id, chat, vector))
        write_vectors(conn, FEED, rows)
        # Not embedded yet: the embedding worker's first round takes a while, and a search must not wait for it.
        conn.executemany(
            "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (1, ?, 'Bo', 1, ?)",
            [(n, f"a message the worker still has to embed, number {n}") for n in range(1, PENDING + 1)],
        )

    try:
        await db.write(fill)
    finally:
        await db.close()


def _events(root: Path) -> list[str]:
    """The daemon log's events in order, a loaded index with its row count (``vector_index_loaded:300``)."""
    log_file = root / "daemon.log"
    entries = (
        [json.loads(line) for line in log_file.read_text(errors="replace").splitlines()] if log_file.exists() else []
    )
    return [e["event"] + (f":{e['rows']}" if e["event"] == "vector_index_loaded" else "") for e in entries]


def test_the_vector_index_is_loaded_before_the_daemon_says_ready(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    asyncio.run(_archive(daemon_root / "state" / "teleton.db"))
    daemon = Daemon(daemon_root, write_config(daemon_root, pong_api.base_url)).start()
    try:
        while "teleton_ready" not in _events(daemon_root):
            daemon.pump()
        events = _events(daemon_root)
        loads = [e for e in events if e.startswith("vector_index_loaded")]
        assert loads and loads[0] == f"vector_index_loaded:{MESSAGES}"  # the embedded ones, before the worker's round
        assert events.index(loads[0]) < events.index("teleton_ready")
        # Every reader connection ran a search before ready: the first one after it opens nothing.
        assert events.index(loads[0]) < events.index("search_prepared") < events.index("teleton_ready")
        prepared = [json.loads(line) for line in (daemon_root / "daemon.log").read_text().splitlines()]
        assert next(e for e in prepared if e["event"] == "search_prepared")["readers"] == 3
    finally:
        daemon.stop()
