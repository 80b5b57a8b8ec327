"""The cross-encoder reranker on a tiny model built here: a word-level ``tokenizer.json`` (pairs get type ids 0
and 1) and an ONNX graph whose logit is the sum of a weight per token of the TEXT, so every score can be
worked out by hand. Where its files come from (a folder, a Hugging Face id through a fake server on
127.0.0.1), and which files it refuses (a wrong pin, a download changed afterwards, a file that is no model)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from teleton.config.schema import RerankerConfig
from teleton.memory.embeddings.hf_download import SUMS_FILE, model_dir
from teleton.memory.rerank.cross_encoder import CrossEncoder, RerankerFilesError, load_cross_encoder, reranker_files
from teleton.providers.extras import MissingExtra, install_command
from teleton.providers.pinned_files import ModelFilesError
from tests.conftest import without_extra
from tests.fakes.cross_encoder import (
    NEGATIVE,
    WORDS,
    by_hand,
    hf_config,
    model_folder,
    sha256,
    write_model,
    write_tokenizer,
)
from tests.fakes.hf_hub import FakeHub


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return model_folder(tmp_path / "tiny-ce")


@pytest.fixture
def encoder(folder: Path) -> Iterator[CrossEncoder]:
    model = load_cross_encoder(RerankerConfig(kind="cross_encoder", model_path=folder))
    yield model
    model.close()


# -- what the model says ----------------------------------------------------------------------------------
QUERY = "where is the meeting"
TEXTS = ["the cat sat on the mat", "the meeting moved to room seven", "rain tomorrow", "lunch at the office"]


def test_scores_are_the_models_logits_and_the_relevant_text_comes_first(encoder: CrossEncoder) -> None:
    scores = encoder.scores(QUERY, TEXTS)
    assert scores.dtype == np.float32 and scores.shape == (len(TEXTS),)
    np.testing.assert_allclose(scores, [by_hand(t) for t in TEXTS], rtol=1e-6)
    # Only the text's own tokens count (token type 1): the question's "meeting" lifts no text by itself.
    assert TEXTS[int(np.argmax(scores))] == "the meeting moved to room seven"
    np.testing.assert_allclose(encoder.scores("cat", ["the meeting"]), [by_hand("the meeting")], rtol=1e-6)


def test_many_texts_in_small_batches_keep_their_order_and_no_texts_is_an_empty_array(folder: Path) -> None:
    model = CrossEncoder(reranker_files(RerankerConfig(kind="cross_encoder", model_path=folder)), batch_size=3)
    try:
        texts = [" ".join(WORDS[(i * 7) % len(WORDS) :][: 1 + (i * 5) % 11]) for i in range(40)]  # lengths 1-11
        np.testing.assert_allclose(model.scores(QUERY, texts), [by_hand(t) for t in texts], rtol=1e-6)
        empty = model.scores(QUERY, [])
        assert empty.shape == (0,) and empty.dtype == np.float32
    finally:
        model.close()


def test_a_long_pair_is_cut_to_512_tokens_from_the_longer_side(encoder: CrossEncoder) -> None:
    text = " ".join(WORDS[i % len(WORDS)] for i in range(2000))
    kept = 512 - 3 - len(QUERY.split())  # [CLS] question [SEP] text [SEP]: the text gives way
    expected = by_hand(" ".join(text.split()[:kept]))
    np.testing.assert_allclose(encoder.scores(QUERY, [text]), [expected], rtol=1e-5)


async def test_ascores_gives_what_scores_gives(encoder: CrossEncoder) -> None:
    np.testing.assert_allclose(await encoder.ascores(QUERY, TEXTS), encoder.scores(QUERY, TEXTS))
    assert (await encoder.ascores(QUERY, [])).shape == (0,)


def test_a_two_class_model_scores_the_second_logit_minus_the_first(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "two-class", two_class=True)
    model = load_cross_encoder(RerankerConfig(kind="cross_encoder", model_path=folder))
    try:
        expected = [by_hand(t) - by_hand(t, NEGATIVE) for t in TEXTS]
        np.testing.assert_allclose(model.scores(QUERY, TEXTS), expected, rtol=1e-5, atol=1e-6)
    finally:
        model.close()


# -- where the files come from ----------------------------------------------------------------------------
def test_a_hugging_face_id_is_downloaded_once_with_its_sums_then_read_offline(
    tmp_path: Path, folder: Path, hub: FakeHub
) -> None:
    hub.publish("acme/tiny-ce", folder)
    cache = tmp_path / "cache"
    model = load_cross_encoder(hf_config(), cache_dir=cache, hf_base_url=hub.url)
    model.close()
    target = model_dir(cache, "acme/tiny-ce")
    assert (target / "onnx" / "model.onnx").read_bytes() == (folder / "model.onnx").read_bytes()
    assert not list(cache.rglob("*.part"))
    recorded = (target / SUMS_FILE).read_text().splitlines()
    assert sorted(recorded) == sorted(
        [f"{sha256(folder / 'model.onnx')}  onnx/model.onnx", f"{sha256(folder / 'tokenizer.json')}  tokenizer.json"]
    )
    count = len(hub.requests)
    again = load_cross_encoder(hf_config(), cache_dir=cache, hf_base_url=hub.url)
    offline = load_cross_encoder(hf_config(), cache_dir=cache, hf_base_url="http://127.0.0.1:9", download=False)
    assert len(hub.requests) == count  # the second load and an offline one ask nothing
    np.testing.assert_allclose(again.scores(QUERY, TEXTS), offline.scores(QUERY, TEXTS))
    again.close()
    offline.close()


def test_not_downloaded_and_no_download_says_to_run_setup(tmp_path: Path, hub: FakeHub) -> None:
    with pytest.raises(RerankerFilesError) as caught:
        load_cross_encoder(hf_config(), cache_dir=tmp_path, hf_base_url=hub.url, download=False)
    assert str(caught.value) == "reranker model acme/tiny-ce is not downloaded yet (run `teleton setup` to download it)"
    assert hub.requests == []


def test_a_downloaded_file_changed_afterwards_is_refused(tmp_path: Path, folder: Path, hub: FakeHub) -> None:
    hub.publish("acme/tiny-ce", folder, onnx_at="model.onnx")
    load_cross_encoder(hf_config(), cache_dir=tmp_path, hf_base_url=hub.url).close()
    onnx_file = model_dir(tmp_path, "acme/tiny-ce") / "model.onnx"
    write_model(onnx_file, two_class=True)  # a valid model, but not the one downloaded
    with pytest.raises(ModelFilesError) as caught:
        load_cross_encoder(hf_config(), cache_dir=tmp_path, hf_base_url=hub.url)
    message = str(caught.value)
    assert "\n" not in message and f"{onnx_file} is not the pinned file" in message
    assert "run `teleton setup`" in message
    (onnx_file.parent / SUMS_FILE).unlink()  # and removing the record does not make it acceptable
    with pytest.raises(ModelFilesError, match="has no sum recorded"):
        load_cross_encoder(hf_config(), cache_dir=tmp_path, hf_base_url=hub.url)


def test_pinned_sums_load_the_right_files_and_refuse_a_wrong_one(tmp_path: Path, folder: Path, hub: FakeHub) -> None:
    right = {"model.onnx": sha256(folder / "model.onnx"), "tokenizer.json": sha256(folder / "tokenizer.json")}
    pinned = RerankerConfig(kind="cross_encoder", model_path=folder, sha256={k: v.upper() for k, v in right.items()})
    load_cross_encoder(pinned).close()
    wrong = RerankerConfig(kind="cross_encoder", model_path=folder, sha256={**right, "tokenizer.json": "0" * 64})
    with pytest.raises(ModelFilesError) as caught:
        load_cross_encoder(wrong)
    message = str(caught.value)
    assert "\n" not in message and f"{folder / 'tokenizer.json'} is not the pinned file" in message
    assert "memory.reranker.sha256 for tokenizer.json" in message
    # A download is checked against the config's pins too.
    hub.publish("acme/tiny-ce", folder)
    with pytest.raises(ModelFilesError, match=r"model\.onnx is not the pinned file"):
        load_cross_encoder(hf_config(**{"model.onnx": "f" * 64}), cache_dir=tmp_path, hf_base_url=hub.url)


def test_a_pin_for_a_file_the_model_has_not_is_refused(folder: Path) -> None:
    config = RerankerConfig(kind="cross_encoder", model_path=folder, sha256={"model_onnx": "0" * 64})
    with pytest.raises(RerankerFilesError, match="names model_onnx, which is not a file of the model"):
        reranker_files(config)


def test_a_folder_without_pins_needs_its_files_present(tmp_path: Path) -> None:
    (tmp_path / "half").mkdir()
    write_tokenizer(tmp_path / "half" / "tokenizer.json")
    with pytest.raises(ModelFilesError) as caught:
        load_cross_encoder(RerankerConfig(kind="cross_encoder", model_path=tmp_path / "half"))
    assert "model.onnx not found" in str(caught.value) and "\n" not in str(caught.value)


def test_no_model_named_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ModelFilesError) as caught:
        reranker_files(RerankerConfig(kind="cross_encoder"), cache_dir=tmp_path)
    assert str(caught.value) == (
        "memory.reranker.kind is cross_encoder but no model is named "
        "(set memory.reranker.model (a Hugging Face id) or memory.reranker.model_path)"
    )


def test_a_file_that_is_no_onnx_model_is_the_one_line_error(folder: Path) -> None:
    (folder / "model.onnx").write_bytes(b"<html>rate limited</html>")
    with pytest.raises(ModelFilesError) as caught:
        load_cross_encoder(RerankerConfig(kind="cross_encoder", model_path=folder))
    assert f"{folder / 'model.onnx'} is not a loadable ONNX model" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_without_tokenizers_the_line_names_the_hf_extra_before_any_download(
    tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_extra(monkeypatch, "hf")
    with pytest.raises(MissingExtra) as caught:
        load_cross_encoder(hf_config(), cache_dir=tmp_path, hf_base_url=hub.url)
    assert str(caught.value) == (
        "the reranker acme/tiny-ce needs the hf extra (tokenizers is not installed): "
        f"install it with: {install_command('hf')}"
    )
    assert hub.requests == []
