"""A fact has one vector whichever path embeds it: saved live (``FactStore.save``) or re-embedded after a model
change (``reembed.embed_pending_facts``). e5 embeds questions and texts under different prefixes; facts are
embedded as questions are, on both paths, or a re-embedded memory would rank differently than before."""

from __future__ import annotations

import numpy as np
import pytest

from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.facts.store import Fact, FactStore
from teleton.memory.reembed import embed_pending_facts
from teleton.storage import Database

FACTS = [
    Fact("Olga is allergic to peanuts", category="health"),
    Fact("The car's yearly inspection is on 14 March", category="car"),
    Fact("Prefers green tea over coffee", category="preference"),
]


@pytest.fixture(scope="module")
def e5() -> LocalEmbedder:
    return LocalEmbedder(packaged_model("multilingual-e5-small"))


async def vectors(db: Database) -> dict[int, np.ndarray]:
    rows = await db.fetchall("select id, embedding from facts_vec order by id")
    return {int(r[0]): np.frombuffer(r[1], dtype=np.float32) for r in rows}


async def test_a_reembedded_fact_keeps_the_vector_and_the_rank_it_had(tmp_path, e5: LocalEmbedder) -> None:
    db = await Database.open(tmp_path / "m.db", embedding=(e5.model_id, e5.dims))
    try:
        store = FactStore(db, e5)
        for fact in FACTS:
            await store.save(fact)
        saved = await vectors(db)
        before = [f.value for f in await store.recall("is there any food I must avoid?", ["owner"], limit=3)]
        # As after a model change: the vectors are gone and every fact waits for the background re-embedding.
        await db.execute("delete from facts_vec")
        await db.execute("update facts set embedded = 0")
        assert await embed_pending_facts(db, e5) == len(FACTS)
        again = await vectors(db)
        after = [f.value for f in await store.recall("is there any food I must avoid?", ["owner"], limit=3)]
    finally:
        await db.close()
    assert saved.keys() == again.keys()
    # One text in another batch differs a little (int8 activations are scaled per batch: cosine ~0.99); under
    # the passage prefix these facts' vectors are 0.78-0.87 from their question-prefixed ones.
    for fact_id, vector in saved.items():
        assert float(vector @ again[fact_id]) > 0.97
    assert after[0] == before[0] == "Olga is allergic to peanuts"
    assert after == before
