"""Embedding providers: the local model, integrity checks, HF download, Voyage over HTTP, the factory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from teleton.config.schema import EmbeddingConfig
from teleton.memory.embeddings import create_provider, local_model_files
from teleton.memory.embeddings.hf_download import cached_or_download
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.local_strings import MAX_CHARS, StringsEmbedder
from teleton.memory.embeddings.model_files import PACKAGED_SHA256, ModelFiles
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.embeddings.voyage import VoyageEmbedder, VoyageError
from teleton.providers.pinned_files import ModelFilesError
from tests.conftest import requires_extra


# -- a scripted HTTP server on 127.0.0.1 ------------------------------------------------------------------
@dataclass
class Served:
    url: str
    requests: list[dict[str, Any]]
    script: list[tuple[int, Any]]  # responses to POSTs, in order (the last one repeats)
    files: dict[str, bytes]


@pytest.fixture
def server() -> Iterator[Served]:
    served = Served("", [], [], {})

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            served.requests.append({"method": "GET", "path": self.path})
            body = served.files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("content-length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers["content-length"])))
            served.requests.append(
                {"method": "POST", "path": self.path, "json": payload, "auth": self.headers.get("authorization")}
            )
            status, body = served.script.pop(0) if len(served.script) > 1 else served.script[0]
            if callable(body):
                body = body(payload)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield served
    httpd.shutdown()
    httpd.server_close()


# -- local model --------------------------------------------------------------------------------------
async def test_local_model_embeds_normalised_vectors_in_input_order(embedder: LocalEmbedder):
    texts = ["a short one", "a considerably longer sentence about cats sleeping in the sun " * 3, "cats nap"]
    vectors = await embedder.embed(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Batching and length sorting do not reorder rows: each row is the text embedded alone. Not bit-equal with
    # the default model: its int8 graph quantises each batch's activations with one scale, and the rounding
    # depends on the CPU's int8 kernels (cosine 0.979-0.996 seen; the texts among themselves: 0.18-0.46).
    alone = np.stack([(await embedder.embed([text]))[0] for text in texts])
    same = alone @ vectors.T
    assert list(np.argmax(same, axis=1)) == [0, 1, 2] and np.diag(same).min() > 0.95
    assert float(vectors[1] @ vectors[2]) > float(vectors[0] @ vectors[2])  # semantics, roughly
    assert (await embedder.embed([])).shape == (0, 384)


@requires_extra("minilm")
def test_packaged_minilm_is_found_without_network_and_pinned() -> None:
    files = packaged_model("all-MiniLM-L6-v2")
    assert files.onnx.name == "model.onnx" and files.tokenizer.name == "tokenizer.json"
    assert files.pinned == {name: PACKAGED_SHA256[name] for name in ("model.onnx", "tokenizer.json")}
    files.verify()


# -- the packaged multilingual model --------------------------------------------------------------------
@pytest.fixture(scope="module")
def multilingual() -> StringsEmbedder:
    provider = create_provider(EmbeddingConfig(model="use-multilingual"))
    assert isinstance(provider, StringsEmbedder)
    return provider


@requires_extra("use-multilingual")
def test_multilingual_model_is_packaged_and_pinned() -> None:
    files = packaged_model("use-multilingual")
    assert files.tokenizer is None  # the graph tokenises inside
    assert files.pinned == {files.onnx.name: PACKAGED_SHA256["universal-sentence-encoder-multilingual.onnx"]}
    files.verify()


@requires_extra("use-multilingual")
def test_multilingual_model_matches_a_sentence_across_languages(multilingual: StringsEmbedder) -> None:
    porto = ["I moved to Porto last month", "Я переехал в Порту в прошлом месяце", "Me mudé a Oporto el mes pasado"]
    other = ["Die Katze schläft auf dem Sofa", "قیمت نان دوباره بالا رفت"]
    vectors = multilingual.encode(porto + other)
    assert vectors.shape == (5, 512) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    for i in range(3):  # each language's Porto sentence is nearest to the other two, never to the others
        nearest = sorted(range(5), key=lambda j: -sims[i, j])[1:3]
        assert set(nearest) == {0, 1, 2} - {i}
    # Batching keeps rows in input order. Not bit-equal: the int8 graph quantises each batch with its own scale.
    for text, row in zip(porto + other, vectors, strict=True):
        assert float(multilingual.encode([text])[0] @ row) > 0.995
    assert multilingual.encode([]).shape == (0, 512)


@requires_extra("use-multilingual")
def test_multilingual_model_reads_a_huge_paste_as_its_beginning(multilingual: StringsEmbedder) -> None:
    paste = "Our wifi password is on the fridge. " * 30 + "Stock markets fell sharply. " * 350_000  # ~10 MB
    vector = multilingual.encode([paste, ""])
    assert float(vector[0] @ multilingual.encode([paste[:MAX_CHARS]])[0]) > 0.995
    assert np.isfinite(vector).all()  # an empty text is a vector too, not a crash


@requires_extra("use-multilingual")
def test_tampered_multilingual_model_is_refused(tmp_path: Path) -> None:
    files = packaged_model("use-multilingual")
    copy = tmp_path / files.onnx.name
    data = bytearray(files.onnx.read_bytes()[:4096])  # a truncated copy under the pinned name
    copy.write_bytes(bytes(data))
    with pytest.raises(ModelFilesError, match=r"universal-sentence-encoder-multilingual\.onnx.*sha256"):
        StringsEmbedder(ModelFiles(files.model_id, copy, None, files.pinned))


@requires_extra("minilm")
def test_tampered_model_file_is_refused_with_its_name(tmp_path: Path) -> None:
    files = packaged_model("all-MiniLM-L6-v2")
    tokenizer = tmp_path / "tokenizer.json"
    data = bytearray(files.tokenizer.read_bytes())
    data[-2] ^= 0x01
    tokenizer.write_bytes(bytes(data))
    tampered = ModelFiles(files.model_id, files.onnx, tokenizer, files.pinned)
    with pytest.raises(ModelFilesError, match=r"tokenizer\.json.*sha256"):
        LocalEmbedder(tampered)


@requires_extra("minilm")
def test_model_path_directory_loads_without_pins(tmp_path: Path) -> None:
    files = packaged_model("all-MiniLM-L6-v2")  # laid out as a Hugging Face repo: model.onnx, tokenizer.json
    (tmp_path / "onnx").mkdir()
    shutil.copy(files.onnx, tmp_path / "onnx" / "model.onnx")
    shutil.copy(files.tokenizer, tmp_path / "tokenizer.json")
    config = EmbeddingConfig(model_path=tmp_path, batch_size=8)
    provider = create_provider(config)
    assert provider is not None and provider.dims == 384 and provider.model_id == tmp_path.name
    assert isinstance(provider, LocalEmbedder)
    assert np.allclose(provider.encode(["hi"]), LocalEmbedder(files).encode(["hi"]), atol=1e-5)


def test_factory_none_and_unknown() -> None:
    assert create_provider(EmbeddingConfig(provider="none")) is None
    with pytest.raises(ValueError, match="unknown"):
        create_provider(EmbeddingConfig.model_construct(provider="openai"))


# -- Hugging Face download ----------------------------------------------------------------------------
def test_hf_model_is_downloaded_once_and_then_read_from_cache(tmp_path: Path, server: Served) -> None:
    server.files = {
        "/acme/tiny-embed/resolve/main/tokenizer.json": b'{"tokenizer": true}',
        "/acme/tiny-embed/resolve/main/model.onnx": b"\x08\x01" * 5000,  # no onnx/ subfolder in this repo
    }
    files = cached_or_download("acme/tiny-embed", tmp_path, server.url, show_progress=False)
    assert files.onnx.read_bytes() == b"\x08\x01" * 5000
    assert files.tokenizer.read_bytes() == b'{"tokenizer": true}'
    assert not list(tmp_path.rglob("*.part"))
    count = len(server.requests)
    again = cached_or_download("acme/tiny-embed", tmp_path, server.url, show_progress=False)
    assert again == files and len(server.requests) == count  # offline from now on

    config = EmbeddingConfig(model="acme/tiny-embed")
    assert local_model_files(config, cache_dir=tmp_path, hf_base_url=server.url) == files


def test_hf_model_without_onnx_export_is_a_clear_error(tmp_path: Path, server: Served) -> None:
    server.files = {"/acme/no-onnx/resolve/main/tokenizer.json": b"{}"}
    with pytest.raises(ModelFilesError, match="no ONNX export"):
        cached_or_download("acme/no-onnx", tmp_path, server.url, show_progress=False)


# -- Voyage (the `anthropic` provider) ------------------------------------------------------------------
def fake_embeddings(payload: dict) -> dict:
    data = []
    for i, text in enumerate(payload["input"]):
        vector = np.zeros(1024)
        vector[len(text) % 1024] = 3.0
        data.append({"object": "embedding", "index": i, "embedding": vector.tolist()})
    return {"object": "list", "data": list(reversed(data)), "model": payload["model"], "usage": {"total_tokens": 1}}


async def test_voyage_batches_authenticates_and_normalises(server: Served) -> None:
    server.script = [(200, fake_embeddings)]
    provider = VoyageEmbedder("voyage-3.5-lite", api_key="vk-test", base_url=server.url + "/v1", batch_size=3)
    try:
        texts = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff", "g"]
        vectors = await provider.embed(texts)
    finally:
        await provider.aclose()
    posts = [r for r in server.requests if r["method"] == "POST"]
    assert [len(r["json"]["input"]) for r in posts] == [3, 3, 1]
    assert all(r["auth"] == "Bearer vk-test" and r["path"] == "/v1/embeddings" for r in posts)
    assert vectors.shape == (7, 1024) and provider.model_id == "voyage:voyage-3.5-lite"
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert all(vectors[i, len(t)] == pytest.approx(1.0) for i, t in enumerate(texts))  # order by index


async def test_voyage_retries_rate_limits_and_server_errors(server: Served) -> None:
    server.script = [(429, {"detail": "slow down"}), (503, {"detail": "busy"}), (200, fake_embeddings)]
    provider = VoyageEmbedder(api_key="k", base_url=server.url, max_wait=0.05)
    try:
        vectors = await provider.embed(["hello"])
    finally:
        await provider.aclose()
    assert vectors.shape == (1, 1024) and len(server.requests) == 3


async def test_voyage_does_not_retry_a_bad_request(server: Served) -> None:
    server.script = [(400, {"detail": "bad model"})]
    provider = VoyageEmbedder(api_key="k", base_url=server.url, max_wait=0.05)
    try:
        with pytest.raises(Exception, match="400"):
            await provider.embed(["hello"])
    finally:
        await provider.aclose()
    assert len(server.requests) == 1


def test_voyage_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(VoyageError, match="VOYAGE_API_KEY"):
        VoyageEmbedder()
    monkeypatch.setenv("VOYAGE_API_KEY", "from-env")
    config = EmbeddingConfig(provider="anthropic", voyage_model="voyage-3-lite")
    provider = create_provider(config)
    assert provider is not None and provider.dims == 512


def test_the_local_model_writes_nothing_under_home(tmp_path: Path) -> None:
    """ONNX Runtime's telemetry would leave a device id in ~/.cache/Microsoft (and upload events). (The model
    cache is the test run's XDG_CACHE_HOME, already built: test_e5_model checks a first build in a fresh home.)"""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORT_")} | {"HOME": str(home)}
    script = (
        "import asyncio\n"
        "from teleton.memory.embeddings.local import LocalEmbedder\n"
        "from teleton.memory.embeddings.packaged import packaged_model\n"
        "print(asyncio.run(LocalEmbedder(packaged_model()).embed(['hello'])).shape)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "(1, 384)", proc.stderr
    assert [p.relative_to(home).as_posix() for p in home.rglob("*")] == []
