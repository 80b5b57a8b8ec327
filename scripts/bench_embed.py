"""The local embedding model's own speed: texts to be stored per second, a question alone, and a question
asked while a burst of 256 texts is being embedded (what a turn waits while a busy group is archived).

    python scripts/bench_embed.py                      # this tree
    python scripts/bench_embed.py --tree /tmp/base     # another checkout (a `git worktree`), to compare

The texts are LoCoMo's turns (``../shared/eval/locomo-dev.json``, read in place). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def turns(path: Path) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "text" and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(path.read_text()))
    return found


def pct(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * share))], 1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose teleton/ is measured")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "eval" / "locomo-dev.json")
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree))
    from teleton.memory.embeddings.local import LocalEmbedder  # the measured tree's, hence imported here
    from teleton.memory.embeddings.packaged import packaged_model  # as above

    texts = turns(args.data)
    stored, questions = texts[:768], [t[:80] for t in texts[1000:1100]]
    model = LocalEmbedder(packaged_model())
    model.encode(stored[:32])
    start = time.perf_counter()
    model.encode(stored)
    rate = len(stored) / (time.perf_counter() - start)
    alone = []
    for question in questions:
        start = time.perf_counter()
        model.encode_queries([question])
        alone.append((time.perf_counter() - start) * 1e3)
    burst = asyncio.create_task(model.embed(stored[:256]))
    await asyncio.sleep(0)  # the burst is handed to the model first
    during = []
    for question in questions[:20]:
        start = time.perf_counter()
        await model.embed_queries([question])
        during.append((time.perf_counter() - start) * 1e3)
    await burst
    print(json.dumps({
        "tree": str(args.tree), "texts_per_s": round(rate),
        "question_ms": {"p50": pct(alone, 0.5), "p95": pct(alone, 0.95)},
        "question_during_burst_ms": {"p50": pct(during, 0.5), "max": round(max(during), 1)},
    }))  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
