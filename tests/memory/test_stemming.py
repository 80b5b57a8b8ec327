"""Keyword search outside English: a question finds a message that uses another form of its words."""

from __future__ import annotations

import json

import pytest

from teleton.memory.search.corpora import FEED
from teleton.memory.search.fts_query import keyword_terms, query_terms
from teleton.memory.search.hybrid import keyword_leg
from teleton.storage import Database
from teleton.text.language import detect_language
from tests.memory.test_hybrid_search import add_messages

# (language, message, question): the question's word for the thing differs in form from the message's.
CASES = [
    ("ru", "Мы наконец переехали в Казань", "Куда переехала Оля?", "переехала"),
    ("uk", "Ми нарешті купили машину", "Яка в них машина?", "машина"),
    ("es", "Ana trabajaba en un hospital de Sevilla", "¿Dónde trabaja Ana ahora?", "trabaja"),
    ("pt", "Eles viajaram para Lisboa em maio", "Para onde viajou o casal?", "viajou"),
    ("de", "Die Kinder spielen im Garten", "Wo sind die Kindern heute?", "kindern"),
    ("fr", "Nous avons visité trois villes en Italie", "Quelles villes ont-ils visitées ?", "visitées"),
    ("it", "Abbiamo comprato due biciclette nuove", "Che bicicletta ha comprato Marco?", "bicicletta"),
    ("tr", "Kitapları masaya koydum", "Kitap nerede duruyor?", "kitap"),
    ("fa", "این کتاب را خیلی دوست دارم", "کتابها کجا هستند؟", "کتابها"),
    ("ar", "قرأت الكتاب أمس في المساء", "أين كتابي الجديد؟", "كتابي"),
]


@pytest.mark.parametrize(("language", "message", "question", "word"), CASES, ids=[c[0] for c in CASES])
async def test_a_question_finds_another_form_of_its_word(
    mdb: Database, language: str, message: str, question: str, word: str
) -> None:
    await mdb.write(lambda conn: [add_messages(conn, 1, [message]), add_messages(conn, 2, ["другое / otra / other"])])
    assert detect_language(question) == language
    assert word in query_terms(question) and word not in query_terms(message)  # the forms really differ
    found = await mdb.read(lambda conn: keyword_leg(conn, FEED, question, 10, None))
    sql = "select text from tg_messages where id in (select value from json_each(?))"
    texts = await mdb.read(lambda conn: [r[0] for r in conn.execute(sql, (json.dumps(list(found)),))])
    assert texts == [message]


def test_english_words_are_left_to_the_index_stemmer() -> None:
    # Porter in the index already stems English; a prefix would only match more than it should.
    assert keyword_terms("Where did Caroline move to last spring?") == ['"caroline"', '"move"', '"last"', '"spring"']


def test_operators_in_a_foreign_question_stay_quoted() -> None:
    terms = keyword_terms('Куда "переехала" NEAR(Оля) OR* -col:x')
    assert all(term.startswith('"') for term in terms)
    assert '"перееха"*' in terms and '"near"' in terms  # a Latin word in a Russian text stays whole
