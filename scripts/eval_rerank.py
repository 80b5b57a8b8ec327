#!/usr/bin/env python
"""Which reranking stage pays (issue 37, item 4): each design re-orders the best 50 fused candidates of
``scripts/eval_locomo.py``'s own search, in the configuration the product ships (key expansion with facts
from LoCoMo's observations, weight 0.25), and is scored with the same R@5 / NDCG@5 / R@10.

Designs that need nothing downloaded:
- ``maxsim``: late interaction over e5's token vectors (the default model's last hidden states: each query
  token's best cosine among the candidate's tokens, averaged), added to the fused score with a weight.
- ``rules``: the signals the search already has, by hand: the score of the turn after a candidate (an answer
  follows its question) and a speaker the question names.
- ``learned``: a logistic scorer over those signals (both legs' scores, the fact's lift, rank, neighbours,
  speaker, length, a question mark, MaxSim), trained on five conversations and tested on the sixth, in turn.
  It learns on the evaluation set itself, so it is an upper bound of what such a scorer could reach, not a
  result to ship.
And ``--cross-encoder DIR`` (a directory with model.onnx and tokenizer.json): the stage the product can run
(``memory.reranker``), its order over the candidates.

    python scripts/eval_rerank.py ../shared/eval/locomo-dev.json [--cross-encoder DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from eval_locomo import (  # scripts/ is the script's path
    EXPANDED_POOL,
    FACT_PARAMS,
    add_observation_facts,
    load_sample,
    metrics,
    params_for,
    summarise,
)

from teleton.config.schema import EmbeddingConfig, MemoryConfig, RerankerConfig
from teleton.memory.embeddings import create_provider
from teleton.memory.embeddings.model_files import search_weights, stemmed_vector_weight
from teleton.memory.facts.sources import of_facts
from teleton.memory.feed.embedding import embed_pending
from teleton.memory.feed.search import search_feed_sync
from teleton.memory.search.corpora import FACTS
from teleton.memory.search.expansion import fuse
from teleton.memory.search.hybrid import hybrid_search
from teleton.process.logging import configure_logging
from teleton.storage.database import Database


@dataclass
class Candidate:
    row: int  # tg_messages.id
    turn: int  # message_id: its place in the conversation
    speaker: str
    text: str
    evidence: frozenset[str]
    score: float  # fused, after key expansion: the order without a reranker
    vector: float
    keyword: float
    lift: float  # the best score of a fact drawn from it


@dataclass
class Asked:
    conversation: int
    question: object  # eval_locomo.Question
    speakers: list[str]
    candidates: list[Candidate]
    tokens: np.ndarray | None = None  # the question's e5 token vectors


async def collect(samples: list[dict], embedder) -> list[Asked]:
    """Every question's 50 best candidates, as the product's search and key expansion rank them."""
    asked: list[Asked] = []
    embedding, memory = EmbeddingConfig(), MemoryConfig()  # the shipped configuration's weights
    weights = search_weights(embedding, memory)[0], stemmed_vector_weight(embedding, memory)
    params = replace(params_for("hybrid", *weights), limit=EXPANDED_POOL)
    with tempfile.TemporaryDirectory() as tmp:
        for n, sample in enumerate(samples):
            db = await Database.open(Path(tmp) / f"r{n}.db", embedding=(embedder.model_id, embedder.dims))
            try:
                store = await load_sample(db, sample, "turns", 1)
                await add_observation_facts(db, store, sample, embedder)
                await embed_pending(db, embedder)
                now = max(r.date for r in store.by_id.values())
                vectors = embedder.encode_queries([q.text for q in store.questions])
                speakers = sorted({r.speaker for r in store.by_id.values()})
                for question, vector in zip(store.questions, vectors, strict=True):

                    def run(conn, s=store, q=question.text, v=vector, t=now) -> list[Candidate]:
                        return candidates(conn, s, q, v, params, t)

                    asked.append(Asked(n, question, speakers, await db.read(run)))
            finally:
                await db.close()
    return asked


def candidates(conn, store, query: str, vector, params, now: float) -> list[Candidate]:
    hits = {h.id: h for h in search_feed_sync(conn, query, vector, [store.chat_id], params, now)}
    fact_hits = hybrid_search(conn, FACTS, query, vector, params=FACT_PARAMS, scope=[f"chat:{store.chat_id}"])
    sources = of_facts(conn, [h.id for h in fact_hits])
    rows = {int(r[1]): (int(r[0]), str(r[2])) for r in conn.execute(
        "select id, message_id, sender_name from tg_messages where chat_id = ?", (store.chat_id,))}  # fmt: skip
    lifts = [(h.score, [rows[m][0] for _c, m in sources.get(h.id, []) if m in rows]) for h in fact_hits]
    lifted: dict[int, float] = {}
    for value, keys in lifts:
        for key in keys:
            lifted[key] = max(lifted.get(key, 0.0), value)
    turn_of = {row: (turn, speaker) for turn, (row, speaker) in rows.items()}
    found = []
    for row, value in fuse(((h.id, h.score) for h in hits.values()), lifts)[:EXPANDED_POOL]:
        hit = hits.get(row)
        turn, speaker = turn_of[row]
        record = store.by_id[row]
        found.append(Candidate(row, turn, speaker, record.text, record.evidence, value,
                               hit.vector_score if hit else 0.0, hit.keyword_score if hit else 0.0,
                               lifted.get(row, 0.0)))  # fmt: skip
    return found


def token_vectors(embedder, texts: list[str]) -> list[np.ndarray]:
    """e5's last hidden states, one row per token (without <s> and </s>), unit length."""
    out = []
    for ids in embedder._token_ids(texts):
        feeds = {"input_ids": np.array([ids], dtype=np.int64)}
        feeds["attention_mask"] = np.ones_like(feeds["input_ids"])
        states = embedder._session.run(None, feeds)[0][0][1:-1]
        out.append(states / np.linalg.norm(states, axis=1, keepdims=True))
    return out


def add_maxsim(asked: list[Asked], embedder) -> dict[tuple[int, int], float]:
    prompt = embedder.document_prompt
    texts = {(a.conversation, c.row): f"{prompt}{c.speaker}: {c.text}" for a in asked for c in a.candidates}
    keys = list(texts)
    docs = dict(zip(keys, token_vectors(embedder, [texts[k] for k in keys]), strict=True))
    queries = token_vectors(embedder, [embedder.query_prompt + a.question.text for a in asked])
    return {
        (a.conversation, a.question.text, c.row): float((q @ docs[(a.conversation, c.row)].T).max(axis=1).mean())
        for a, q in zip(asked, queries, strict=True)
        for c in a.candidates
    }


Order = Callable[[Asked], list[Candidate]]


def by(score: Callable[[Asked, Candidate], float]) -> Order:
    return lambda a: sorted(a.candidates, key=lambda c: -score(a, c))


def maxsim_order(maxsim: dict, weight: float) -> Order:
    def score(a: Asked, c: Candidate) -> float:
        values = [maxsim[(a.conversation, a.question.text, x.row)] for x in a.candidates]
        low, high = min(values), max(values)
        own = maxsim[(a.conversation, a.question.text, c.row)]
        return c.score + weight * (own - low) / (high - low or 1.0)

    return by(score)


def named(a: Asked) -> set[str]:
    return {s for s in a.speakers if s and re.search(rf"\b{re.escape(s)}\b", a.question.text)}


def signals(a: Asked, maxsim: dict) -> np.ndarray:
    at = {c.turn: c for c in a.candidates}
    speakers = named(a)
    rows = []
    for rank, c in enumerate(a.candidates):
        before, after = at.get(c.turn - 1), at.get(c.turn + 1)
        rows.append([
            c.score, c.vector, c.keyword, c.lift, 1 / (rank + 1), before.score if before else 0.0,
            after.score if after else 0.0, float(c.speaker in speakers),
            float(bool(speakers) and c.speaker not in speakers),
            float(np.log1p(len(c.text))), float("?" in c.text), maxsim[(a.conversation, a.question.text, c.row)],
        ])  # fmt: skip
    return np.array(rows)


def learned_orders(asked: list[Asked], maxsim: dict) -> Order:
    """Leave one conversation out: a logistic scorer trained on the others ranks its candidates."""
    features = [signals(a, maxsim) for a in asked]
    labels = [np.array([float(bool(c.evidence & a.question.gold)) for c in a.candidates]) for a in asked]
    orders: dict[int, list[Candidate]] = {}
    for held in sorted({a.conversation for a in asked}):
        train = [i for i, a in enumerate(asked) if a.conversation != held]
        predict = logistic(np.vstack([features[i] for i in train]), np.concatenate([labels[i] for i in train]))
        for i, a in enumerate(asked):
            if a.conversation == held:
                orders[id(a)] = [a.candidates[j] for j in np.argsort(-predict(features[i]), kind="stable")]
    return lambda a: orders[id(a)]


def logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, steps: int = 3000, rate: float = 0.1):
    mean, spread = x.mean(0), x.std(0) + 1e-9
    z = (x - mean) / spread
    w, b = np.zeros(z.shape[1]), 0.0
    share = y.mean()
    balance = np.where(y == 1, 0.5 / share, 0.5 / (1 - share))
    for _ in range(steps):
        g = (1 / (1 + np.exp(-(z @ w + b))) - y) * balance
        w -= rate * (z.T @ g / len(y) + l2 * w)
        b -= rate * g.mean()
    return lambda f: ((f - mean) / spread) @ w + b


def cross_encoder_order(path: Path) -> Order:
    from teleton.memory.rerank.cross_encoder import load_cross_encoder  # deferred: only with --cross-encoder

    model = load_cross_encoder(RerankerConfig(kind="cross_encoder", model_path=path))

    def order(a: Asked) -> list[Candidate]:
        scores = model.scores(a.question.text, [f"{c.speaker}: {c.text}" for c in a.candidates])
        return [a.candidates[j] for j in np.argsort(-scores, kind="stable")]

    return order


def score_order(asked: list[Asked], order: Order) -> dict:
    return summarise([metrics(a.question, [c.evidence for c in order(a)][:10]) for a in asked])


async def main_async(args: argparse.Namespace) -> dict[str, dict]:
    samples = json.loads(await asyncio.to_thread(Path(args.path).read_text))[: args.limit or None]
    embedder = create_provider(EmbeddingConfig())
    asked = await collect(samples, embedder)
    maxsim = add_maxsim(asked, embedder)
    speaker_bonus = by(lambda a, c: c.score + (0.05 if c.speaker in named(a) else 0.0))

    def after_bonus(a: Asked, c: Candidate) -> float:
        after = next((x for x in a.candidates if x.turn == c.turn + 1), None)
        return c.score + 0.05 * (after.score if after else 0.0)

    designs: dict[str, Order] = {"none (fused, key expansion)": lambda a: a.candidates}
    designs |= {f"maxsim, weight {w}": maxsim_order(maxsim, w) for w in (0.1, 0.25, 0.5)}
    designs["maxsim alone"] = by(lambda a, c: maxsim[(a.conversation, a.question.text, c.row)])
    designs["rules: next turn's score x0.05"] = by(after_bonus)
    designs["rules: named speaker +0.05"] = speaker_bonus
    if len({a.conversation for a in asked}) > 1:  # it trains on the other conversations
        designs["learned, leave one conversation out (bound)"] = learned_orders(asked, maxsim)
    if args.cross_encoder:
        designs[f"cross-encoder {args.cross_encoder}"] = cross_encoder_order(args.cross_encoder)
    return {name: score_order(asked, order) for name, order in designs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", help="a LoCoMo-format file with observations (../shared/eval/locomo-dev.json)")
    parser.add_argument("--cross-encoder", type=Path, help="a directory with model.onnx and tokenizer.json")
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    args = parser.parse_args()
    configure_logging("warning", "console", stream=sys.stderr)
    results = asyncio.run(main_async(args))
    print(f"{'reranker over the best 50':48} {'R@5':>6} {'NDCG@5':>7} {'R@10':>6} {'cat1 R@5':>8} {'cat2 R@5':>8}")
    for name, s in results.items():
        row = s["all"]
        print(f"{name:48} {row['r5']:6.3f} {row['ndcg5']:7.3f} {row['r10']:6.3f} "
              f"{s.get('cat1', {}).get('r5', 0):8.3f} {s.get('cat2', {}).get('r5', 0):8.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
