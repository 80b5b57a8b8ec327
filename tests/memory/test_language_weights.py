"""A question in a language the keyword leg matches by stem prefixes leans more on the meaning of the words
(``model_files.STEMMED_VECTOR_WEIGHTS``): "where does Lucía work now?" finds the message saying where she
started, not the one that merely repeats her name and "works". The real e5 model and a real database."""

from __future__ import annotations

from dataclasses import replace

import pytest

from teleton.agent.deps import AgentSettings
from teleton.config.schema import Config
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.feed.embedding import embed_pending
from teleton.memory.feed.search import search_feed
from teleton.memory.search.hybrid import weighed_for
from teleton.storage import Database

CASES = [
    ("¿Dónde trabaja ahora Lucía?", "Entró en una consultora en el centro, de analista",
     "Lucía ahora está muy cansada, trabaja mucho"),
    ("Wo arbeitet Jonas jetzt?", "Er hat bei einer Versicherung in Köln angefangen",
     "Jonas arbeitet jetzt viel zu viel, der Arme"),
]  # fmt: skip


@pytest.mark.parametrize(("question", "meant", "wordy"), CASES)
async def test_a_question_in_a_stemmed_language_finds_what_it_means_before_what_shares_its_words(
    mdb: Database, embedder: LocalEmbedder, question: str, meant: str, wordy: str
) -> None:
    said = [wordy, meant, "Mañana hace calor, morgen regnet es"]
    await mdb.write(lambda conn: [conn.execute(
        "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (1, ?, 'Anna', ?, ?)",
        (n + 1, 1_000 + n, text)) for n, text in enumerate(said)])  # fmt: skip
    await embed_pending(mdb, embedder)
    shipped = AgentSettings.from_config(Config()).context.params

    async def first(params) -> str:
        return (await search_feed(mdb, question, chat_ids=[1], provider=embedder, params=params))[0].text

    assert await first(shipped) == meant
    assert await first(replace(shipped, stemmed_vector_weight=None)) == wordy  # English questions' weights


def test_the_share_follows_the_question_and_the_users_own_weights_win() -> None:
    def shares(**config: object) -> list[tuple[float, float]]:
        params = AgentSettings.from_config(Config.model_validate(config)).context.params
        questions = ("where does Lucía work now?", "¿Dónde trabaja ahora Lucía?", "Где сейчас работает Миша?", "?!")
        return [(p.vector_weight, round(p.keyword_weight, 3)) for p in (weighed_for(q, params) for q in questions)]

    assert shares() == [(0.8, 0.2), (0.9, 0.1), (0.9, 0.1), (0.8, 0.2)]  # English and no words: the model's own
    assert shares(memory={"vector_weight": 0.6}) == [(0.6, 0.4)] * 4  # set by the user: every question
    assert shares(embedding={"model": "all-MiniLM-L6-v2"}) == [(0.5, 0.5)] * 4  # an English model: no lean
