#!/usr/bin/env python
"""LoCoMo retrieval evaluation through Teleton's own feed indexer and hybrid search.

Protocol (../shared/eval/README.md): one record per dialogue turn (``[speaker] text`` plus
`` [image: caption]``), one store per conversation, each question with resolvable evidence searched over its
conversation only; R@k = |gold ∩ top k| / |gold|, NDCG@k with binary relevance; R@5, NDCG@5, R@10 overall
and by category.

The turns go into a temporary Teleton database exactly as the Telegram archive stores messages (one chat per
conversation, speaker as sender, session time as date), are embedded by ``feed_embedding.embed_pending`` and
searched by ``memory.feed.search`` — so what is measured is the product's record design and search, not a copy.

Usage: python scripts/eval_locomo.py ../shared/eval/locomo-dev.json [--mode bm25|vector|hybrid]
       [--shared-store | --in-archive 100000] [--facts-from observations [--facts-weight 0.25]]
       [--keyword-queries [--keyword-df 1-3]]

``--facts-from observations`` measures key expansion (issue 37): LoCoMo's own per-session observations, which
name their evidence turns, stand in for the distiller's output; each is saved as a fact of the chat and linked
to those turns (``fact_sources``, as the distiller links a fact to its exchange), and each question's feed
hits are re-ranked with the chat's fact hits (``fuse``). The report says so beside the figure.

``--keyword-queries`` measures keyword-shaped queries instead of the questions (issue 56, point 7): in each
conversation, every word (letters only, 3+, no stopword) whose own-text document frequency in the chat's
keyword index is within ``--keyword-df`` (1-3) is searched on its own; gold = the turns whose text matches it
there (stemmed, as the index matches). Groups are by that frequency (``df1``..), and ``top`` is the share of
gold turns in the first |gold| places: 1.0 means the messages holding the word rank above every other.

Records are produced by a ``RecordSource`` (``--records``); ``turns`` is the protocol above;
``turns+observations`` indexes each turn with the observations drawn from it appended (document expansion).
``--records observations`` indexes LoCoMo's ``observation`` facts (each carries the dia_id it was drawn from)
through the product's fact store (``FactStore.save``) and recall path (``FactStore.recall``: category tiers,
hybrid relevance, access boost, recency); gold = the facts whose source is in the question's evidence.
Observations carry no topic, so each is saved under one category and the recall tiers fall through to the
whole scope, as they do for an uncategorised fact.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from bench_search import build as build_archive  # scripts/ is the script's path

from teleton.config.schema import EmbeddingConfig, MemoryConfig
from teleton.memory.embeddings import EmbeddingProvider, create_provider
from teleton.memory.embeddings.model_files import search_weights, stemmed_vector_weight
from teleton.memory.facts.dates import dated
from teleton.memory.facts.sources import link, of_facts
from teleton.memory.facts.store import RECALL_PARAMS, Fact, FactStore
from teleton.memory.feed.embedding import embed_pending
from teleton.memory.feed.search import search_feed_sync
from teleton.memory.search.corpora import FACTS, FEED, chat_token
from teleton.memory.search.expansion import WEIGHT, fuse
from teleton.memory.search.fts_query import query_terms
from teleton.memory.search.hybrid import SearchParams, hybrid_search
from teleton.memory.search.stopwords import STOPWORDS
from teleton.process.logging import configure_logging
from teleton.storage.database import Database

CHAT_ID = 1
EXPANDED_POOL = 50  # feed hits re-ranked with the facts (issue 37: the best 50 hold 0.897 of the evidence)
FACT_PARAMS = SearchParams(limit=10)


@dataclass(frozen=True)
class Record:
    """One searchable item; ``evidence`` = the dia_ids a hit on it counts for."""

    key: str
    speaker: str
    text: str
    date: float
    evidence: frozenset[str]


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    gold: frozenset[str]


def parse_session_date(value: str) -> float:
    # LoCoMo writes e.g. "1:56 pm on 8 May, 2023".
    try:
        return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").timestamp()
    except ValueError:
        return 0.0


def turn_records(sample: dict) -> Iterator[Record]:
    conversation = sample["conversation"]
    session = 1
    while f"session_{session}" in conversation:
        start = parse_session_date(conversation.get(f"session_{session}_date_time", ""))
        for i, turn in enumerate(conversation[f"session_{session}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            yield Record(turn["dia_id"], turn["speaker"], text, start + i, frozenset([turn["dia_id"]]))
        session += 1


def turns_with_observations(sample: dict) -> Iterator[Record]:
    """Turns whose indexed text carries the observations drawn from them: the other design of key expansion
    (the facts in the message's own keyword row and vector, not a fused score), measured against it."""
    drawn: dict[str, list[str]] = {}
    for _speaker, text, sources in observation_facts(sample):
        for source in sources:
            drawn.setdefault(source, []).append(text)
    for record in turn_records(sample):
        yield replace(record, text=" ".join([record.text, *drawn.get(record.key, [])]))


RECORD_SOURCES: dict[str, Callable[[dict], Iterator[Record]]] = {
    "turns": turn_records,
    "turns+observations": turns_with_observations,
}


def questions(sample: dict, known: set[str]) -> list[Question]:
    found = []
    for qa in sample["qa"]:
        gold = frozenset(e for e in qa.get("evidence", []) if e in known)
        if gold:
            found.append(Question(qa["question"], int(qa["category"]), gold))
    return found


def ndcg(ranked: list[frozenset[str]], gold: frozenset[str], k: int) -> float:
    seen: set[str] = set()
    dcg = 0.0
    for rank, evidence in enumerate(ranked[:k]):
        new = (evidence & gold) - seen
        if new:
            dcg += 1.0 / math.log2(rank + 2)
            seen |= new
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal


def recall(ranked: list[frozenset[str]], gold: frozenset[str], k: int) -> float:
    found: set[str] = set()
    for evidence in ranked[:k]:
        found |= evidence & gold
    return len(found) / len(gold)


async def load_store(db: Database, records: list[Record], chat_id: int = CHAT_ID) -> dict[int, Record]:
    def insert(conn) -> dict[int, Record]:
        ids = {}
        for n, record in enumerate(records):
            cur = conn.execute(
                "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (?, ?, ?, ?, ?)",
                (chat_id, n + 1, record.speaker, record.date, record.text),
            )
            ids[int(cur.lastrowid)] = record
        return ids

    return await db.write(insert)


def params_for(mode: str, vector_weight: float | None = None, stemmed: float | None = None) -> SearchParams:
    """``vector_weight``: memory.vector_weight (keyword weight: 1 - it), as a config would set it; ``stemmed``:
    the vector share of a question the keyword leg stems (``model_files.stemmed_vector_weight``)."""
    base = SearchParams(limit=10, stemmed_vector_weight=stemmed)
    if vector_weight is not None:
        base = replace(base, vector_weight=vector_weight, keyword_weight=1.0 - vector_weight)
    if mode == "vector":
        return replace(base, vector_weight=1.0, keyword_weight=0.0, keyword_candidates=0, min_score=0.0)
    return base


@dataclass
class Store:
    """One conversation loaded into a database as one chat."""

    chat_id: int
    by_id: dict[int, Record]
    questions: list[Question]


async def load_sample(db: Database, sample: dict, source: str, chat_id: int) -> Store:
    records = list(RECORD_SOURCES[source](sample))
    by_id = await load_store(db, records, chat_id)
    return Store(chat_id, by_id, questions(sample, {e for r in records for e in r.evidence}))


def metrics(question: Question, ranked: list[frozenset[str]]) -> dict:
    return {
        "category": question.category,
        "r5": recall(ranked, question.gold, 5),
        "ndcg5": ndcg(ranked, question.gold, 5),
        "r10": recall(ranked, question.gold, 10),
        "top": recall(ranked, question.gold, len(question.gold)),
    }


def rare_word_queries(conn, store: Store, df: tuple[int, int]) -> list[Question]:
    """One-word queries: each word of the chat's turns whose own-text document frequency (the turns whose
    ``text`` column matches it in the chat's keyword index, stemmed as search matches) is within ``df``;
    gold = those turns, ``category`` = that frequency."""
    words = sorted({w for r in store.by_id.values() for w in query_terms(r.text, max_terms=10_000)
                    if w.isalpha() and len(w) >= 3 and w not in STOPWORDS})  # fmt: skip
    chat = f'chat : "{chat_token(store.chat_id)}"'
    found = []
    for word in words:
        sql = f"select rowid from {FEED.fts} where {FEED.fts} match ?"
        rows = [int(r[0]) for r in conn.execute(sql, (f'text : "{word}" AND {chat}',))]
        gold = [store.by_id[i] for i in rows if i in store.by_id]
        if df[0] <= len(gold) <= df[1]:
            found.append(Question(word, len(gold), frozenset(e for r in gold for e in r.evidence)))
    return found


def observation_facts(sample: dict) -> Iterator[tuple[str, str, frozenset[str]]]:
    """(speaker, fact text, source dia_ids) for every observation of every session."""
    for by_speaker in sample.get("observation", {}).values():
        for speaker, items in by_speaker.items():
            for text, source in items:
                sources = source if isinstance(source, list) else [source]
                yield speaker, text, frozenset(s.strip() for s in sources if isinstance(s, str))


async def evaluate_observations(
    samples: list[dict], embedder: EmbeddingProvider, mode: str, vector_weight: float, stemmed: float | None
) -> list[dict]:
    # As the daemon's fact store: every search's weights (agent/factory.py).
    params = replace(RECALL_PARAMS, vector_weight=vector_weight, keyword_weight=1.0 - vector_weight,
                     stemmed_vector_weight=stemmed)  # fmt: skip
    if mode == "vector":
        raise SystemExit("--records observations measures the recall path: use --mode hybrid or bm25")
    scope = f"chat:{CHAT_ID}"
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, sample in enumerate(samples):
            facts = list(observation_facts(sample))
            db = await Database.open(Path(tmp) / f"obs{n}.db", embedding=(embedder.model_id, embedder.dims))
            try:
                store = FactStore(db, embedder if mode == "hybrid" else None, params=params)
                evidence: dict[int, frozenset[str]] = {}
                for _speaker, text, sources in facts:
                    saved = await store.save(Fact(value=text, category="observation", scope=scope, source="locomo"))
                    evidence[saved.id] = evidence.get(saved.id, frozenset()) | sources
                qs = questions(sample, {e for _, _, sources in facts for e in sources})
                vectors = embedder.encode_queries([q.text for q in qs]) if mode == "hybrid" else [None] * len(qs)
                for question, vector in zip(qs, vectors, strict=True):
                    found = await store.recall(question.text, [scope], limit=10, query_vector=vector)
                    results.append(metrics(question, [evidence[f.id] for f in found]))
            finally:
                await db.close()
    return results


async def add_observation_facts(db: Database, store: Store, sample: dict, embedder: EmbeddingProvider | None) -> int:
    """LoCoMo's own per-session observations as the distiller's output: each saved as a fact of the chat's
    label and linked (``fact_sources``) to the turns it names as its evidence, as the distiller links a fact
    to the messages of its exchange. Returns how many facts were saved."""
    message_of = {record.key: message_id for message_id, record in store.by_id.items()}
    facts = FactStore(db, embedder)
    saved = 0
    for _speaker, text, sources in observation_facts(sample):
        rows = [message_of[s] for s in sources if s in message_of]
        # As the distiller stores it: a relative time resolved against when its exchange took place.
        said_at = min((store.by_id[r].date for r in rows), default=None)
        fact = Fact(value=dated(text, said_at), category="observation", scope=f"chat:{store.chat_id}")
        found = await facts.save(fact)
        ids = await db.read(lambda conn, r=rows: [int(conn.execute(
            "select message_id from tg_messages where id = ?", (i,)).fetchone()[0]) for i in r])  # fmt: skip
        await db.write(lambda conn, f=found.id, i=ids: link(conn, f, store.chat_id, i))
        saved += 1
    return saved


async def score(
    db: Database,
    store: Store,
    embedder: EmbeddingProvider,
    mode: str,
    vector_weight: float | None = None,
    facts_weight: float = 0.0,
    stemmed: float | None = None,
) -> list[dict]:
    qs = store.questions
    vectors = embedder.encode_queries([q.text for q in qs]) if mode != "bm25" else [None] * len(qs)
    params = params_for(mode, vector_weight, stemmed)
    if facts_weight:  # a deeper feed list: a message a fact lifts may rank below the first ten on its own words
        params = replace(params, limit=EXPANDED_POOL)
    now = max(record.date for record in store.by_id.values())  # the questions are asked after the conversation
    results = []
    for question, vector in zip(qs, vectors, strict=True):
        hits = await db.read(
            lambda conn, q=question, v=vector: search_feed_sync(conn, q.text, v, [store.chat_id], params, now)
        )
        ranked = [h.id for h in hits]
        if facts_weight:
            ranked = await db.read(lambda conn, q=question, v=vector, h=hits: expanded(conn, store, q.text, v, h,
                                                                                       facts_weight))  # fmt: skip
        results.append(metrics(question, [store.by_id[i].evidence for i in ranked[:10]]))
    return results


def expanded(conn, store: Store, query: str, vector, hits: list, weight: float) -> list[int]:
    """The feed's hits re-ranked with the chat's facts as extra keys (``memory.search.expansion.fuse``, as the
    product's turn does it)."""
    fact_hits = hybrid_search(conn, FACTS, query, vector, params=FACT_PARAMS, scope=[f"chat:{store.chat_id}"])
    sources = of_facts(conn, [h.id for h in fact_hits])
    row_of = {int(r[1]): int(r[0]) for r in conn.execute(
        "select id, message_id from tg_messages where chat_id = ?", (store.chat_id,))}  # fmt: skip
    facts = [(h.score, [row_of[m] for _c, m in sources.get(h.id, []) if m in row_of]) for h in fact_hits]
    return [key for key, _ in fuse(((h.id, h.score) for h in hits), facts, weight)]


async def evaluate(
    samples: list[dict],
    embedder: EmbeddingProvider,
    mode: str,
    source: str,
    shared: bool,
    archive: int = 0,
    vector_weight: float | None = None,
    facts_weight: float = 0.0,
    stemmed: float | None = None,
    keyword_df: tuple[int, int] | None = None,
) -> list[dict]:
    """One temporary store per conversation (the protocol), or all in one store as separate chats
    (``shared``: what a real archive looks like; each search is scoped to its conversation's chat), and with
    ``archive`` synthetic messages in other chats around them (scripts/bench_search.py's archive)."""
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        groups = [samples] if shared or archive else [[s] for s in samples]
        for n, group in enumerate(groups):
            db = await Database.open(Path(tmp) / f"eval{n}.db", embedding=(embedder.model_id, embedder.dims))
            try:
                if archive:
                    await build_archive(db, archive, embedder, pool=2_000, rng=random.Random(7))
                stores = [await load_sample(db, s, source, CHAT_ID + i) for i, s in enumerate(group)]
                if facts_weight:
                    for store, sample in zip(stores, group, strict=True):
                        await add_observation_facts(db, store, sample, embedder if mode != "bm25" else None)
                if mode != "bm25":
                    await embed_pending(db, embedder)
                if keyword_df is not None:  # one-word queries of rare words instead of the questions
                    for store in stores:
                        store.questions = await db.read(lambda conn, s=store: rare_word_queries(conn, s, keyword_df))
                for store in stores:
                    results += await score(db, store, embedder, mode, vector_weight, facts_weight, stemmed)
            finally:
                await db.close()
    return results


def summarise(results: list[dict]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        groups["all"].append(r)
        groups[f"cat{r['category']}"].append(r)
    return {
        name: {
            "n": len(rows),
            **{m: sum(r[m] for r in rows) / len(rows) for m in ("r5", "ndcg5", "r10", "top")},
        }
        for name, rows in sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0]))
    }


def keyword_df(value: str) -> tuple[int, int]:
    low, _, high = value.partition("-")
    return int(low), int(high or low)


def store_label(args: argparse.Namespace) -> str:
    if args.in_archive:
        return f"inside a {args.in_archive}-message archive"
    return "shared" if args.shared_store else "per conversation"


async def main_async(args: argparse.Namespace) -> dict:
    samples = json.loads(await asyncio.to_thread(Path(args.path).read_text))
    if args.limit:
        samples = samples[: args.limit]
    embedder = create_provider(EmbeddingConfig(model=args.model))
    started = time.perf_counter()
    # As the daemon searches: the model's own weight unless one is given.
    embedding, memory = EmbeddingConfig(model=args.model), MemoryConfig(vector_weight=args.vector_weight)
    weight, _ = search_weights(embedding, memory)
    stemmed = stemmed_vector_weight(embedding, memory)
    if args.records == "observations":
        results = await evaluate_observations(samples, embedder, args.mode, weight, stemmed)
    else:
        facts_weight = args.facts_weight if args.facts_from == "observations" else 0.0
        df = keyword_df(args.keyword_df) if args.keyword_queries else None
        results = await evaluate(samples, embedder, args.mode, args.records, args.shared_store, args.in_archive, weight,
                                 facts_weight, stemmed, df)  # fmt: skip
    summary = summarise(results)
    summary["_meta"] = {
        "mode": args.mode,
        "records": args.records,
        "store": store_label(args),
        "facts_from": args.facts_from,  # "observations": LoCoMo's own, standing in for the distiller's output
        "queries": f"one rare word (df {args.keyword_df})" if args.keyword_queries else "questions",
        "model": embedder.model_id,
        "seconds": time.perf_counter() - started,
    }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", help="locomo JSON file (e.g. ../shared/eval/locomo-dev.json)")
    parser.add_argument("--mode", choices=("bm25", "vector", "hybrid"), default="hybrid")
    parser.add_argument("--records", choices=[*sorted(RECORD_SOURCES), "observations"], default="turns")
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    parser.add_argument(
        "--shared-store", action="store_true", help="all conversations in one store, one chat each (scoped search)"
    )
    parser.add_argument(
        "--in-archive", type=int, default=0, metavar="N",
        help="all conversations in one store among N synthetic messages of other chats (scoped search)",
    )  # fmt: skip
    parser.add_argument("--model", default=None, help="embedding.model (default: the configured default)")
    parser.add_argument(
        "--vector-weight", type=float, help="memory.vector_weight (keyword weight: 1 - it); default the model's own"
    )
    parser.add_argument(
        "--facts-from", choices=("none", "observations"), default="none",
        help="key expansion: facts linked to the turns they came from (observations: LoCoMo's own, which name "
        "their evidence turns, standing in for what the distiller would write)",
    )  # fmt: skip
    parser.add_argument("--facts-weight", type=float, default=WEIGHT, help="with --facts-from: a fact's share")
    parser.add_argument(
        "--keyword-queries", action="store_true",
        help="one-word queries of each conversation's rare words instead of its questions (gold: the turns holding it)",
    )  # fmt: skip
    parser.add_argument("--keyword-df", default="1-3", help="with --keyword-queries: the document frequencies, A-B")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args()
    configure_logging("info", "console", stream=sys.stderr)  # stdout carries the results only
    summary = asyncio.run(main_async(args))
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
        return
    meta = summary.pop("_meta")
    expansion = f" key expansion: facts from {meta['facts_from']}" if meta["facts_from"] != "none" else ""
    print(
        f"LoCoMo retrieval — mode={meta['mode']} records={meta['records']} store={meta['store']}{expansion} "
        f"queries={meta['queries']} ({meta['seconds']:.1f} s)"
    )
    by_df = args.keyword_queries  # the groups are document frequencies, not question categories
    print(f"{'group':8} {'n':>5} {'R@5':>7} {'NDCG@5':>7} {'R@10':>7} {'top':>7}")
    for name, row in summary.items():
        label = name.replace("cat", "df") if by_df else name
        print(f"{label:8} {row['n']:5d} {row['r5']:7.3f} {row['ndcg5']:7.3f} {row['r10']:7.3f} {row['top']:7.3f}")


if __name__ == "__main__":
    main()
