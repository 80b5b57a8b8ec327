"""One text the embedder rejects is quarantined; it never holds up the messages behind it (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from teleton.memory.feed.archive import MessageRecord, insert_message
from teleton.memory.feed.embedding import embed_pending
from teleton.storage import Database


class Rejecting:
    """The real model behind a provider that refuses some inputs, as a remote API answers 400 for one."""

    def __init__(self, inner, *, refuse: str = "POISON", down: bool = False) -> None:
        self.inner, self.refuse, self.down = inner, refuse, down
        self.model_id, self.dims = inner.model_id, inner.dims
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.down:
            raise ConnectionError("embedding service unreachable")
        if any(self.refuse in t for t in texts):
            raise ValueError("input rejected by the embedding service")
        return await self.inner.embed(texts)


async def _archive(db: Database, texts: list[str]) -> None:
    def _write(conn) -> None:
        for i, text in enumerate(texts, start=1):
            insert_message(conn, MessageRecord(chat_id=-5, message_id=i, date=1000.0 + i, text=text, sender_name="A"))

    await db.write(_write)


async def test_a_rejected_text_is_quarantined_and_the_rest_embedded(mdb: Database, embedder) -> None:
    texts = [f"message number {i} about the trip" for i in range(12)]
    texts[3] = "POISON pill nobody can embed"
    await _archive(mdb, texts)
    provider = Rejecting(embedder)
    assert await embed_pending(mdb, provider, batch=8) == 11
    states = {
        r["message_id"]: r["embedded"] for r in await mdb.fetchall("select message_id, embedded from tg_messages")
    }
    assert states[4] == -1 and all(v == 1 for k, v in states.items() if k != 4)
    poison = await mdb.fetchone("select kind, error from quarantine")
    assert tuple(poison) == ("embedding", "ValueError: input rejected by the embedding service")
    assert (await mdb.fetchone("select count(*) from tg_messages_vec16"))[0] == 11
    calls = provider.calls
    assert await embed_pending(mdb, provider, batch=8) == 0 and provider.calls == calls  # never retried
    # Still findable by its words: only the vector is missing.
    hits = await mdb.fetchall("select rowid from tg_messages_fts where tg_messages_fts match 'text : pill'")
    assert len(hits) == 1


async def test_an_outage_quarantines_nothing(mdb: Database, embedder) -> None:
    await _archive(mdb, ["one", "two", "three"])
    with pytest.raises(ConnectionError):
        await embed_pending(mdb, Rejecting(embedder, down=True), batch=8)
    assert (await mdb.fetchone("select count(*) from quarantine"))[0] == 0
    assert await embed_pending(mdb, Rejecting(embedder), batch=8) == 3  # back: everything is embedded
