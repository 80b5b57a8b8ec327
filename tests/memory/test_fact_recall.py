"""Three-tier fact recall with the real model and sqlite-vec: categories, a search inside them, a flat fallback;
ranking by relevance with an access-count boost and recency decay."""

from __future__ import annotations

import time

from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.facts.recall import category_key, label_overlap, pick_categories
from teleton.memory.facts.store import Fact, FactStore
from teleton.memory.search.corpora import FACTS
from teleton.memory.search.hybrid import SearchParams, hybrid_search
from teleton.privacy import group_label as chat_scope
from teleton.storage import Database

PERSONAL = [
    ("pet", "Rex is a golden retriever who loves the beach"),
    ("work", "Olga works at Acme as a data engineer"),
    ("health", "Olga is allergic to peanuts"),
    ("travel", "Flight to Lisbon on May 3"),
    ("food", "Olga's favourite dish is ramen"),
]


async def seed(store: FactStore, facts: list[tuple[str, str]], scope: str = "owner") -> None:
    for category, value in facts:
        await store.save(Fact(value, category=category, scope=scope))


async def flat_top(db: Database, store: FactStore, query: str, scopes: list[str]) -> list[str]:
    """What a plain hybrid search over every fact in scope returns (the old recall's candidate list)."""
    vector = await store._embed(query)
    hits = await db.read(
        lambda conn: hybrid_search(conn, FACTS, query, vector, params=SearchParams(limit=20), scope=scopes)
    )
    return [hit.text for hit in hits]


def test_pick_categories_keeps_close_calls_only() -> None:
    assert pick_categories({"pet": 0.52, "family": 0.19}, {"work": 0.15}) == ["pet"]
    assert pick_categories({"plan": 0.43, "work": 0.39, "family": 0.34}, {}) == ["plan", "work"]
    assert pick_categories({"general": 0.1}, {"general": 0.62, "pet": 0.58}) == ["general", "pet"]
    assert pick_categories({"pet": 0.2}, {"work": 0.3}) == []  # nothing clearly relevant: search everything
    assert pick_categories({f"c{i}": 0.5 for i in range(6)}, {}, most=3) == ["c0", "c1", "c2"]
    assert category_key("Pet  Food") == category_key("pet_food") == "pet_food"
    assert label_overlap("what about my pets?", ["pet", "work", "pet_food"]) == {"pet": 1.0, "pet_food": 1.0}


async def test_a_pet_query_picks_the_pet_category_past_thirty_stronger_keyword_matches(
    mdb: Database, embedder: LocalEmbedder
) -> None:
    store = FactStore(mdb, embedder)
    await seed(store, PERSONAL)
    await seed(store, [("projects", f"The name of project {n} is Falcon-{n}") for n in range(30)])
    await store.save(Fact("The group's dog is called Pluto", category="pet", scope=chat_scope(-5)))
    query = "What is my dog's name?"
    # A flat search ranks the 30 facts sharing the word "name" first; the dog fact is cut from the top 20.
    assert "Rex is a golden retriever who loves the beach" not in await flat_top(mdb, store, query, ["owner"])

    found = await store.retrieve(query, ["owner"], limit=3)
    assert found.categories == ("pet",)
    assert found.facts[0].value == "Rex is a golden retriever who loves the beach"
    # One pet fact is too few for three: the rest comes from every fact in scope, never from another scope.
    assert found.fell_back and len(found.facts) == 3
    assert all(f.scope == "owner" for f in found.facts)
    assert "Pluto" not in " ".join(f.value for f in found.facts)


async def test_too_few_in_the_categories_falls_back_to_all_facts_in_scope(
    mdb: Database, embedder: LocalEmbedder
) -> None:
    store = FactStore(mdb, embedder)
    await seed(store, PERSONAL)
    await store.save(Fact("The chess tournament is in May", category="hobby", scope=chat_scope(-7)))

    allergy = await store.retrieve("am I allergic to anything?", ["owner"], limit=1)
    assert allergy.categories == ("health",) and not allergy.fell_back
    assert [f.value for f in allergy.facts] == ["Olga is allergic to peanuts"]

    # e5 (the default) also picks "health" for this one, the peanut allergy being about eating too, and ranks
    # it first; MiniLM picks "food" alone. Either way the dish is among the focused facts, before the rest.
    about_olga = await store.retrieve("what does Olga eat?", ["owner"], limit=3)
    assert about_olga.categories[0] == "food" and set(about_olga.categories) <= {"food", "health"}
    assert about_olga.fell_back and len(about_olga.facts) == 3
    focused = [f.value for f in about_olga.facts[: len(about_olga.categories)]]
    assert "Olga's favourite dish is ramen" in focused
    assert {f.category for f in about_olga.facts} <= {"food", "health", "work", "travel", "pet"}

    # A query hardly about any category (e5 reads "May" as travel, MiniLM as nothing) searches everything in
    # scope too, and only in scope.
    vague = await store.retrieve("anything about May?", ["owner"], limit=10)
    assert set(vague.categories) <= {"travel"} and vague.fell_back
    assert [f.value for f in vague.facts] == ["Flight to Lisbon on May 3"]
    everywhere = await store.retrieve("anything about May?", None, limit=10)
    assert {f.value for f in everywhere.facts} == {"Flight to Lisbon on May 3", "The chess tournament is in May"}


async def test_an_explicit_category_filters_inside_the_search(mdb: Database, embedder: LocalEmbedder) -> None:
    store = FactStore(mdb, embedder)
    await seed(store, [("work", f"The team meeting number {n} is on Monday in room {n}") for n in range(30)])
    await store.save(Fact("Rex gets nervous when meeting other dogs", category="pet"))
    await store.save(Fact("Pluto loves meeting new people", category="pet", scope=chat_scope(-5)))
    query = "Where is the team meeting on Monday?"
    assert "Rex gets nervous when meeting other dogs" not in await flat_top(mdb, store, query, ["owner"])

    found = await store.recall(query, ["owner"], category="pet")
    assert [f.value for f in found] == ["Rex gets nervous when meeting other dogs"]
    assert [f.value for f in await store.recall(query, ["owner"], category=" Pet ")] == [found[0].value]
    assert await store.recall(query, ["owner"], category="travel") == []  # a filter, never a fallback
    work = await store.recall(query, ["owner"], category="work", limit=5)
    assert len(work) == 5 and all(f.category == "work" for f in work)


async def test_the_category_filter_also_works_keyword_only(db: Database) -> None:
    store = FactStore(db)  # no embedder: FTS alone
    await seed(store, [("work", f"The team meeting number {n} is on Monday in room {n}") for n in range(30)])
    await store.save(Fact("Rex gets nervous when meeting other dogs", category="pet"))
    found = await store.recall("team meeting Monday", ["owner"], category="pet")
    assert [f.value for f in found] == ["Rex gets nervous when meeting other dogs"]
    # Keyword-only, a category is picked when the query names it.
    picked = await store.retrieve("which pet gets nervous at meetings?", ["owner"], limit=1)
    assert picked.categories == ("pet",) and picked.facts[0].category == "pet"


async def test_access_boost_and_recency_decay_reorder_close_calls(mdb: Database, embedder: LocalEmbedder) -> None:
    store = FactStore(mdb, embedder, half_life_days=7)
    green = (await store.save(Fact("Ana drinks green tea every morning", category="drink"))).id
    black = (await store.save(Fact("Ana drinks black tea every morning", category="drink"))).id
    query = "what tea does Ana drink in the morning?"

    async def state(fact_id: int, uses: int, days_ago: float) -> None:
        await mdb.execute(
            "update facts set access_count = ?, last_access = ?, updated_at = ? where id = ?",
            (uses, time.time() - days_ago * 86400, time.time() - days_ago * 86400, fact_id),
        )

    async def order(s: FactStore = store) -> list[int]:
        return [f.id for f in await s.recall(query, ["owner"], limit=2)]

    await state(green, 0, 0)
    await state(black, 0, 0)
    first, second = await order()
    # The one ranked second gets used a lot: the access boost lifts it over the other.
    await state(first, 0, 0)
    await state(second, 40, 0)
    assert await order() == [second, first]
    # Unused for a year (many half-lives): decay sinks it again ...
    await state(first, 0, 0)
    await state(second, 40, 365)
    assert await order() == [first, second]
    # ... unless the half-life is long enough that a year hardly counts.
    await state(first, 0, 0)
    await state(second, 40, 365)
    assert await order(FactStore(mdb, embedder, half_life_days=3650)) == [second, first]


async def test_recall_bumps_access_of_what_it_returns(mdb: Database, embedder: LocalEmbedder) -> None:
    store = FactStore(mdb, embedder)
    await seed(store, PERSONAL)
    before = time.time()
    found = await store.recall("am I allergic to anything?", ["owner"], limit=1)
    row = await mdb.fetchone("select access_count, last_access from facts where id = ?", (found[0].id,))
    assert row["access_count"] == 1 and row["last_access"] >= before
    untouched = await mdb.fetchone("select sum(access_count) from facts where id != ?", (found[0].id,))
    assert untouched[0] == 0
