"""A model of one's own is used as its card says (issue 56, point 10): its query and document prompts
(``embedding.query_prompt`` / ``document_prompt``, else the known model's own, "" for none) go before every
question and every stored text, a changed prompt re-embeds the store as a changed model does, and its hybrid
search weights are the default for another model, never e5's measured ones.

The model is a real ONNX encoder written here (a token-embedding table: each token's row, masked), read with a
real ``tokenizer.json`` (a Hugging Face WordLevel vocabulary), so a prompt's words change the vector."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.normalizers import Lowercase
from tokenizers.pre_tokenizers import Whitespace

from teleton.cli.doctor import check_embedding_model
from teleton.config.schema import Config, EmbeddingConfig
from teleton.memory.embeddings import create_provider, local_prompts, with_cache
from teleton.memory.embeddings.e5_weights import Graph
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.model_files import DEFAULT_VECTOR_WEIGHT, E5_MODEL_ID
from teleton.memory.embeddings.onnx_proto import FLOAT, INT64, model, tensor, value_info
from teleton.memory.embeddings.openai_compatible import OpenAICompatibleEmbedder
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.embeddings.prompts import resolve_prompts, vector_identity
from teleton.memory.embeddings.query import embed_query
from teleton.memory.feed.embedding import embed_pending
from teleton.memory.search.hybrid import configured_params
from teleton.storage import Database
from tests.fakes.openai_embeddings import FakeEmbeddings

PACKAGED_E5 = ("query: ", "passage: ")
GEMMA_QUERY, GEMMA_DOCUMENT = "task: search result | query: ", "title: none | text: "
WORDS = ["[UNK]", "the", "garage", "code", "is", "4512", "anna", "door", "search", "query", "passage", "note",
         "ask", ":", "|", "task", "result", "title", "none", "text", "when", "what", "lunch", "at", "noon"]  # fmt: skip
DIMS = 16
CHAT = 7
MESSAGES = ["the garage code is 4512", "lunch at noon"]


def tiny_model(folder: Path) -> Path:
    """``folder`` with model.onnx (each token's row of a fixed random table, times its mask) and tokenizer.json."""
    folder.mkdir(parents=True)
    table = np.random.default_rng(5).standard_normal((len(WORDS), DIMS)).astype(np.float32)
    g = Graph()
    rows = g.op("Gather", g.const("table", table), "input_ids", axis=0)
    mask = g.op("Unsqueeze", g.op("Cast", "attention_mask", to=FLOAT), g.const("last", np.array([-1], np.int64)))
    out = g.op("Mul", rows, mask, name="last_hidden_state")
    ids = [value_info(name, INT64, ["batch", "seq"]) for name in ("input_ids", "attention_mask")]
    graph = model("tiny", g.nodes, (tensor(k, v) for k, v in g.inits.items()), ids,
                  [value_info(out, FLOAT, ["batch", "seq", DIMS])], opset=17, producer="test")  # fmt: skip
    (folder / "model.onnx").write_bytes(graph)
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.normalizer = Lowercase()
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def local(folder: Path, **embedding: object) -> LocalEmbedder:
    provider = create_provider(EmbeddingConfig(model_path=folder, **embedding))  # as the daemon builds it
    assert isinstance(provider, LocalEmbedder)
    return provider


def raw(folder: Path) -> LocalEmbedder:
    """The same model with no prompt at all: what the model makes of exactly the text it is given."""
    return local(folder, query_prompt="", document_prompt="")


def same(a: np.ndarray, b: np.ndarray, atol: float = 1e-6) -> bool:
    return bool(np.allclose(a, b, atol=atol))


async def _archive(db: Database, messages: list[str] = MESSAGES) -> None:
    await db.write(
        lambda conn: conn.executemany(
            "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (?, ?, ?, ?, ?)",
            # A day apart: each is embedded alone (no earlier message as its context), as "Anna: <text>".
            [(CHAT, n + 1, "Anna", 1_700_000_000.0 + 86_400 * n, text) for n, text in enumerate(messages)],
        )
    )


async def _stored(db: Database) -> dict[int, np.ndarray]:
    rows = await db.fetchall("select id, vector from tg_messages_vec16 order by id")
    return {int(r[0]): np.frombuffer(r[1], dtype=np.float16).astype(np.float32) for r in rows}


async def _pending(db: Database) -> int:
    return int((await db.fetchone("select count(*) from tg_messages where embedded = 0"))[0])


async def test_the_document_prompt_goes_before_stored_texts_and_the_query_prompt_before_questions(
    tmp_path: Path,
) -> None:
    folder = tiny_model(tmp_path / "my-model")
    plain = raw(folder)
    prompted = local(folder, query_prompt="ask: ", document_prompt="note: ")
    assert (prompted.query_prompt, prompted.document_prompt) == ("ask: ", "note: ")
    assert same(prompted.encode(["search"]), plain.encode(["note: search"]))
    assert not same(prompted.encode(["search"]), plain.encode(["search"]))  # the prompt changes the vector
    assert same(await prompted.embed_queries(["search"]), plain.encode(["ask: search"]))

    # As the daemon stores and asks: the feed worker's stored vector, a question through the embedding cache.
    db = await Database.open(tmp_path / "m.db", embedding=(prompted.model_id, prompted.dims))
    try:
        await _archive(db)
        assert await embed_pending(db, prompted) == len(MESSAGES)
        stored = await _stored(db)
        assert same(stored[1], plain.encode(["note: Anna: the garage code is 4512"])[0], atol=2e-3)  # float16
        cached = with_cache(prompted, db)
        question = await embed_query(cached, "what is the garage code")
        assert question is not None and same(question, plain.encode(["ask: what is the garage code"])[0])
        again = await embed_query(cached, "what is the garage code")  # from the cache: the same question's vector
        assert again is not None and same(again, question)
    finally:
        await db.close()


async def test_a_model_with_only_a_document_prompt_asks_without_it_through_the_cache(tmp_path: Path) -> None:
    # The cache served a question from the stored text's entry whenever there was no query prompt.
    folder = tiny_model(tmp_path / "my-model")
    plain, prompted = raw(folder), local(folder, document_prompt="note: ")
    db = await Database.open(tmp_path / "m.db", embedding=(prompted.model_id, prompted.dims))
    try:
        cached = with_cache(prompted, db)
        assert cached is not None
        stored = await cached.embed(["the garage door"])
        question = await embed_query(cached, "the garage door")
        assert same(stored[0], plain.encode(["note: the garage door"])[0])
        assert question is not None and same(question, plain.encode(["the garage door"])[0])
    finally:
        await db.close()


async def test_a_served_model_gets_its_prompts_before_what_it_is_sent(tmp_path: Path) -> None:
    with FakeEmbeddings(dims={"nomic-embed-text": 8}) as fake:
        embedding = {"provider": "openai_compatible", "base_url": fake.base_url, "model": "nomic-embed-text"}
        provider = create_provider(EmbeddingConfig.model_validate(embedding))
        assert isinstance(provider, OpenAICompatibleEmbedder)
        fake.requests.clear()
        await provider.embed(["the garage code"])
        assert await embed_query(provider, "what code") is not None
        assert fake.texts() == ["search_document: the garage code", "search_query: what code"]
        unprompted = create_provider(EmbeddingConfig.model_validate({**embedding, "query_prompt": "",
                                                                     "document_prompt": ""}))  # fmt: skip
        assert isinstance(unprompted, OpenAICompatibleEmbedder) and unprompted.model_id != provider.model_id
        fake.requests.clear()
        await unprompted.embed(["the garage code"])
        assert fake.texts() == ["the garage code"]
        await provider.aclose()
        await unprompted.aclose()


@pytest.mark.parametrize(
    ("name", "query", "document"),
    [
        ("intfloat/multilingual-e5-base", "query: ", "passage: "),
        ("INTFLOAT/Multilingual-E5-Small", "query: ", "passage: "),
        ("intfloat/e5-large-v2", "query: ", "passage: "),
        ("google/embeddinggemma-300m", GEMMA_QUERY, GEMMA_DOCUMENT),
        ("onnx-community/embeddinggemma-300m-ONNX", GEMMA_QUERY, GEMMA_DOCUMENT),
        ("BAAI/bge-small-en-v1.5", "Represent this sentence for searching relevant passages: ", ""),
        ("Xenova/bge-base-en-v1.5", "Represent this sentence for searching relevant passages: ", ""),
        ("nomic-ai/nomic-embed-text-v1.5", "search_query: ", "search_document: "),
        ("nomic-embed-text:latest", "search_query: ", "search_document: "),  # an Ollama tag
        ("intfloat/multilingual-e5-large-instruct", "", ""),  # wants an instruction of its own: no default
        ("BAAI/bge-m3", "", ""),
        ("my-model", "", ""),
    ],
)
def test_known_models_have_their_cards_prompts(name: str, query: str, document: str) -> None:
    prompts = resolve_prompts(EmbeddingConfig(), [name])
    assert (prompts.query, prompts.document) == (query, document)


def test_known_defaults_apply_unless_set_and_empty_turns_them_off(tmp_path: Path) -> None:
    gemma = tiny_model(tmp_path / "embeddinggemma-300m")  # known by its directory's name
    plain = raw(gemma)
    known = local(gemma)
    assert (known.query_prompt, known.document_prompt) == (GEMMA_QUERY, GEMMA_DOCUMENT)
    assert same(known.encode(["the garage"]), plain.encode([GEMMA_DOCUMENT + "the garage"]))
    assert same(known.encode_queries(["the garage"]), plain.encode([GEMMA_QUERY + "the garage"]))
    # Known by embedding.model, whatever the directory is called; one prompt set keeps the other's default.
    renamed = tiny_model(tmp_path / "onnx-export")
    by_id = local(renamed, model="google/embeddinggemma-300m", query_prompt="ask: ")
    assert (by_id.query_prompt, by_id.document_prompt) == ("ask: ", GEMMA_DOCUMENT)
    off = local(gemma, query_prompt="", document_prompt="")
    assert same(off.encode(["the garage"]), plain.encode(["the garage"])) and off.query_prompt == ""
    # An unknown model takes texts as they are.
    mine = local(tiny_model(tmp_path / "my-model"))
    assert (mine.query_prompt, mine.document_prompt) == ("", "")


async def test_a_changed_prompt_reembeds_the_store_and_an_unchanged_config_does_not(tmp_path: Path) -> None:
    folder = tiny_model(tmp_path / "my-model")
    path = tmp_path / "teleton.db"
    first = local(folder)
    db = await Database.open(path, embedding=(first.model_id, first.dims))
    await _archive(db)
    assert await embed_pending(db, first) == 2
    before = await _stored(db)
    await db.close()

    again = local(folder)  # a restart with the same config: nothing to re-embed
    db = await Database.open(path, embedding=(again.model_id, again.dims))
    try:
        assert not db.info.vectors_reset and await _pending(db) == 0
        assert all(same(v, before[k]) for k, v in (await _stored(db)).items())
    finally:
        await db.close()

    changed = local(folder, document_prompt="note: ")  # the prompt changes: the vectors are another model's
    assert changed.model_id != first.model_id
    db = await Database.open(path, embedding=(changed.model_id, changed.dims))
    try:
        assert db.info.vectors_reset and await _pending(db) == 2 and await _stored(db) == {}
        assert await embed_pending(db, changed) == 2
        stored = await _stored(db)
        assert same(stored[2], raw(folder).encode(["note: Anna: lunch at noon"])[0], atol=2e-3)
    finally:
        await db.close()
    # A query prompt counts too (facts are embedded as questions are); the same prompts written out do not.
    assert local(folder, query_prompt="ask: ").model_id not in (first.model_id, changed.model_id)
    assert local(folder, query_prompt="", document_prompt="note: ").model_id == changed.model_id


def test_the_packaged_default_keeps_its_identity_so_upgrades_reembed_nothing() -> None:
    default = create_provider(EmbeddingConfig())
    assert isinstance(default, LocalEmbedder)
    try:
        assert default.model_id == E5_MODEL_ID and (default.query_prompt, default.document_prompt) == PACKAGED_E5
    finally:
        default.close()
    # The same model id, for the same files, as create_provider gives it (without loading e5 twice more).
    files = packaged_model()

    def identity(**embedding: str) -> str:
        config = EmbeddingConfig(**embedding)
        return vector_identity(files.model_id, local_prompts(config, files), files.baseline_prompts)

    assert identity(query_prompt="query: ", document_prompt="passage: ") == E5_MODEL_ID  # e5's own, written out
    assert identity(document_prompt="") != E5_MODEL_ID


@pytest.mark.parametrize(
    "embedding",
    [
        {"model_path": "~/models/my-model"},
        {"model_path": "~/models/multilingual-e5-small-int8"},  # named like the packaged e5: still the user's
        {"model_path": "~/models/e5", "model": "multilingual-e5-small"},  # a packaged name, the user's files
    ],
)
def test_a_users_own_model_gets_the_weights_for_another_model_not_e5s(embedding: dict[str, str]) -> None:
    params = configured_params(Config.model_validate({"embedding": embedding}))
    assert (params.vector_weight, params.keyword_weight) == (DEFAULT_VECTOR_WEIGHT, 1 - DEFAULT_VECTOR_WEIGHT)
    assert params.stemmed_vector_weight is None  # e5's 0.9 for stemmed languages is e5's too
    downloaded = configured_params(Config.model_validate({"embedding": {"model": "intfloat/multilingual-e5-base"}}))
    assert (downloaded.vector_weight, downloaded.stemmed_vector_weight) == (DEFAULT_VECTOR_WEIGHT, None)  # as before
    shipped = configured_params(Config())
    assert (shipped.vector_weight, shipped.stemmed_vector_weight) == (0.8, 0.9)  # the packaged e5 keeps its own


def test_doctor_names_the_model_its_prompts_and_weights_and_where_each_comes_from(tmp_path: Path) -> None:
    folder = tiny_model(tmp_path / "embeddinggemma-300m")
    check = check_embedding_model(Config.model_validate({"embedding": {"model_path": str(folder)}}))
    assert check.ok is True, check
    assert check.detail.startswith(f"embeddinggemma-300m (model_path: {folder / 'model.onnx'}) · ")
    assert f'prompts: query "{GEMMA_QUERY}", document "{GEMMA_DOCUMENT}" (known model EmbeddingGemma)' in check.detail
    assert check.detail.endswith(" · weights 0.5/0.5 (default for another model)")

    mine = {"model_path": str(folder), "query_prompt": "ask: "}
    check = check_embedding_model(Config.model_validate({"embedding": mine, "memory": {"vector_weight": 0.7}}))
    assert f'query "ask: " (configured), document "{GEMMA_DOCUMENT}" (known model EmbeddingGemma)' in check.detail
    assert check.detail.endswith(" · weights 0.7/0.3 (memory.vector_weight / keyword_weight)")
    plain = check_embedding_model(Config.model_validate({"embedding": {"model_path": str(tiny_model(tmp_path / "m"))}}))
    assert "prompts: none (no known model)" in plain.detail

    shipped = check_embedding_model(Config()).detail
    assert shipped.startswith(f"{E5_MODEL_ID} (packaged default: ")
    assert 'prompts: query "query: ", document "passage: " (known model e5)' in shipped
    assert shipped.endswith(
        f"weights 0.8/0.2 (measured for {E5_MODEL_ID}; 0.9/0.1 for a question in a stemmed language)"
    )
