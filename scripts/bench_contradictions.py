"""Fact updates: does recall say what is true now, and never what stopped being true? (issue 15)

    python scripts/bench_contradictions.py [--data scripts/eval_data/contradictions.json] [--json]

Each scenario of the data set (moves, job changes, renamed pets, changed preferences, undone plans, group
members stating different values, …) is replayed through the real distiller path: every turn is an exchange
in the owner's DM or a group, the utility model is a scripted server speaking the Messages API that answers
with the facts the scenario lists for that turn — reading the remembered facts the distiller shows it to
fill ``replaces`` with the right id, as a model would — and the facts are saved by the real fact store with
the real embedding model. Then the question is asked through recall (as the asker, so a group's other
members' facts are not theirs). Current-fact accuracy: the recalled facts include the current value.
Stale-fact leakage: a recalled fact holds a value that stopped being true (or another member's value).
Results on stdout (``--json`` for the JSON), logs on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fakes: the scripted Messages API

from teleton.agent.distiller import Distiller, Exchange
from teleton.gateway.contract import ChatInfo
from teleton.llm import LLMClient, LLMSettings
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.facts.store import FactStore
from teleton.memory.facts.subjects import attributable, speaker_subject
from teleton.memory.feed import archive as fa
from teleton.privacy import Principals, chat_label
from teleton.process.logging import configure_logging
from teleton.storage import Database
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, tool_use

OWNER_ID = 1000
GROUP = ChatInfo(id=-100500, type="group", title="Friends")
DM = ChatInfo(id=OWNER_ID, type="dm", title="")
SHOWN = re.compile(r"- id (\d+): \[[^\]]*\] (.*)")
RECALL_LIMIT = 5


class ScriptedExtractor:
    """The utility model: answers each distillation with the current turn's facts, ``replaces`` resolved
    from the facts the prompt shows (a replaced fact that was not shown cannot be named, as for a model)."""

    def __init__(self) -> None:
        self.facts: list[dict[str, Any]] = []
        self.named = 0
        self.unseen = 0

    def __call__(self, body: Body) -> Reply:
        shown = {m.group(2): int(m.group(1)) for m in SHOWN.finditer(body["messages"][-1]["content"])}
        out = []
        for fact in self.facts:
            item = {k: fact.get(k) for k in ("content", "category", "key", "about")} | {"importance": 0.6}
            if fact.get("replaces"):
                item["replaces"] = shown.get(fact["replaces"])
                self.named += item["replaces"] is not None
                self.unseen += item["replaces"] is None
            out.append(item)
        return tool_use(("record_facts", {"facts": out}))


async def run_scenario(
    scenario: dict[str, Any], embedder: LocalEmbedder, fake: FakeAnthropic, extractor: ScriptedExtractor, folder: Path
) -> dict[str, Any]:
    principals = Principals(owner_id=OWNER_ID)
    db = await Database.open(folder / f"{scenario['id']}.db", embedding=(embedder.model_id, embedder.dims))
    llm = LLMClient(
        LLMSettings(model="main", utility_model="utility", max_tokens=512), api_key="x", base_url=fake.base_url
    )
    try:
        store = FactStore(db, embedder)
        distiller = Distiller(llm, store, principals=principals)
        chat = GROUP if scenario["chat"] == "group" else DM
        ids: dict[str, int] = defaultdict(lambda: 2000 + len(ids))
        ids["owner"] = OWNER_ID
        for n, turn in enumerate(scenario["turns"]):
            sender = ids[turn["speaker"]]
            await db.write(lambda conn, t=turn, s=sender, i=n: _archive(conn, chat, s, t, i))
            extractor.facts = turn["facts"]
            await distiller.distill(
                Exchange(
                    chat,
                    turn["speaker"],
                    turn["text"],
                    "Noted.",
                    chat_label(chat.id, {OWNER_ID}),
                    speaker=speaker_subject(principals, sender),
                )
            )
        asker = speaker_subject(principals, ids[scenario["asker"]])
        group = chat is GROUP
        found = await store.recall(
            scenario["question"],
            [chat_label(chat.id, {OWNER_ID})],
            limit=RECALL_LIMIT,
            keep=(lambda s: attributable(s, asker)) if group else (lambda s: True),
        )
        texts = [f.value.lower() for f in found]
        return {
            "id": scenario["id"],
            "kind": scenario["kind"],
            "chat": scenario["chat"],
            "current": any(scenario["current"].lower() in t for t in texts),
            "stale": any(s.lower() in t for s in scenario["stale"] for t in texts),
            "recalled": [f.value for f in found],
        }
    finally:
        await llm.close()
        await db.close()


def _archive(conn: Any, chat: ChatInfo, sender: int, turn: dict[str, Any], n: int) -> None:
    """The message as the Telegram layer archives it (a group's members are known by their messages)."""
    fa.upsert_chat(conn, ChatInfo(id=chat.id, type=chat.type, title=chat.title), time.time())
    fa.insert_message(
        conn,
        fa.MessageRecord(
            chat_id=chat.id,
            message_id=n + 1,
            date=time.time() - 3600 + n,
            text=turn["text"],
            sender_id=sender,
            sender_name=turn["speaker"],
        ),
    )


def summarise(results: list[dict[str, Any]], extractor: ScriptedExtractor, seconds: float) -> dict[str, Any]:
    def rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "n": len(rows),
            "current_accuracy": round(sum(r["current"] for r in rows) / len(rows), 3),
            "stale_leakage": round(sum(r["stale"] for r in rows) / len(rows), 3),
        }

    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in results:
        by_kind[row["kind"]].append(row)
    return {
        "all": rates(results),
        "dm": rates([r for r in results if r["chat"] == "dm"]),
        "group": rates([r for r in results if r["chat"] == "group"]),
        "by_kind": {kind: rates(rows) for kind, rows in sorted(by_kind.items())},
        "replaced_by_id": extractor.named,
        "replaced_fact_not_shown": extractor.unseen,
        "failures": [r for r in results if not r["current"] or r["stale"]],
        "seconds": round(seconds, 1),
    }


async def main_async(scenarios: list[dict[str, Any]], model: str | None = None) -> dict[str, Any]:
    embedder = LocalEmbedder(packaged_model(model))
    extractor = ScriptedExtractor()
    started = time.perf_counter()
    results = []
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.responder = extractor
        for scenario in scenarios:
            results.append(await run_scenario(scenario, embedder, fake, extractor, Path(tmp)))
    return summarise(results, extractor, time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).parent / "eval_data" / "contradictions.json"))
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    parser.add_argument(
        "--model", help="a packaged local model (default multilingual-e5-small; all-MiniLM-L6-v2, use-multilingual)"
    )
    args = parser.parse_args()
    configure_logging("warning", "console", stream=sys.stderr)
    summary = asyncio.run(main_async(json.loads(Path(args.data).read_text()), args.model))
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
        return
    kinds = Counter({k: v["n"] for k, v in summary["by_kind"].items()})
    overall = summary["all"]
    print(
        f"{overall['n']} scenarios ({dict(kinds)}): current-fact accuracy {overall['current_accuracy']:.3f}, "
        f"stale-fact leakage {overall['stale_leakage']:.3f}"
    )
    for row in summary["failures"]:
        print(f"  {row['id']}: current={row['current']} stale={row['stale']} recalled={row['recalled']}")


if __name__ == "__main__":
    main()
