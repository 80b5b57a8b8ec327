"""The cross-encoder reranker on a tiny model built here: a word-level ``tokenizer.json`` (pairs get type ids 0
and 1) and an ONNX graph whose logit is the sum of a weight per token of the TEXT, so every score can be
worked out by hand. Where its files come from (a folder, a Hugging Face id through a fake server on
127.0.0.1), and which files it refuses (a wrong pin, a download changed afterwards, a file that is no model)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from teleton.config.schema import RerankerConfig
from teleton.memory.embeddings.hf_download import SUMS_FILE, model_dir
from teleton.memory.rerank.cross_encoder import CrossEncoder, RerankerFilesError, load_cross_encoder, reranker_files
from teleton.providers.extras import MissingExtra
from teleton.providers.pinned_files import ModelFilesError
from tests.conftest import without_extra
from tests.fakes.local_http import Quiet, serve, stop

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
WORDS = (
    "where is the meeting tomorrow lunch office moved to room seven cat sat on mat weather rain sunny dinner".split()
)
VOCAB = {token: i for i, token in enumerate(SPECIAL + WORDS)}
# One weight per token id: the special tokens weigh nothing; "meeting" is the word that makes a text relevant.
WEIGHTS = np.array([0.0, -0.25, 0.0, 0.0] + [0.5 if w == "meeting" else 0.1 * (i % 3) for i, w in enumerate(WORDS)])
WEIGHTS = WEIGHTS.astype(np.float32)
# The (batch, 2) model's "not relevant" column: 0.3 per word of the text ([CLS] and [SEP] weigh nothing).
NEGATIVE = np.array([0.0, 0.3, 0.0, 0.0] + [0.3] * len(WORDS), dtype=np.float32)


def by_hand(text: str, weights: np.ndarray = WEIGHTS) -> float:
    """What the model must give: the weights of the text's words (unknown words weigh [UNK]'s)."""
    return float(sum(weights[VOCAB.get(word, VOCAB["[UNK]"])] for word in text.split()))


def write_tokenizer(path: Path) -> None:
    tokenizer = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", VOCAB["[CLS]"]), ("[SEP]", VOCAB["[SEP]"])],
    )
    tokenizer.save(str(path))


def _text_sum(g: list[onnx.NodeProto], inits: list[TensorProto], name: str, weights: np.ndarray) -> str:
    """Nodes giving (batch, 1): sum over the sequence of weights[input_ids] x attention_mask x token_type_ids."""
    inits.append(numpy_helper.from_array(weights, f"{name}_w"))
    g += [
        helper.make_node("Gather", [f"{name}_w", "input_ids"], [f"{name}_per_token"], axis=0),
        helper.make_node("Mul", [f"{name}_per_token", "mask_f"], [f"{name}_masked"]),
        helper.make_node("Mul", [f"{name}_masked", "types_f"], [f"{name}_text"]),
        helper.make_node("ReduceSum", [f"{name}_text", "axis1"], [f"{name}_sum"], keepdims=1),
    ]
    return f"{name}_sum"


def write_model(path: Path, *, two_class: bool = False) -> None:
    """input_ids, attention_mask, token_type_ids -> logits (batch, 1), or (batch, 2) = (NEGATIVE's sum,
    WEIGHTS' sum)."""
    nodes = [
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["types_f"], to=TensorProto.FLOAT),
    ]
    inits = [numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    relevant = _text_sum(nodes, inits, "relevant", WEIGHTS)
    if two_class:
        negative = _text_sum(nodes, inits, "negative", NEGATIVE)
        nodes.append(helper.make_node("Concat", [negative, relevant], ["logits"], axis=1))
    else:
        nodes.append(helper.make_node("Identity", [relevant], ["logits"]))
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in
            ("input_ids", "attention_mask", "token_type_ids")]  # fmt: skip
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2 if two_class else 1])
    graph = helper.make_graph(nodes, "tiny-cross-encoder", ints, [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="test")
    model.ir_version = 8  # what every ONNX Runtime of the last years reads
    onnx.checker.check_model(model, full_check=True)
    path.write_bytes(model.SerializeToString())


def model_folder(path: Path, *, two_class: bool = False) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    write_model(path / "model.onnx", two_class=two_class)
    write_tokenizer(path / "tokenizer.json")
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return model_folder(tmp_path / "tiny-ce")


@pytest.fixture
def encoder(folder: Path) -> Iterator[CrossEncoder]:
    model = load_cross_encoder(RerankerConfig(kind="cross_encoder", model_path=folder))
    yield model
    model.close()


# -- a fake Hugging Face on 127.0.0.1 ---------------------------------------------------------------------
@dataclass
class FakeHub:
    url: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def publish(self, model_id: str, folder: Path, onnx_at: str = "onnx/model.onnx") -> None:
        self.files[f"/{model_id}/resolve/main/tokenizer.json"] = (folder / "tokenizer.json").read_bytes()
        self.files[f"/{model_id}/resolve/main/{onnx_at}"] = (folder / "model.onnx").read_bytes()


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    served = FakeHub()

    class Handler(Quiet):
        def do_GET(self) -> None:
            served.requests.append(self.path)
            body = served.files.get(self.path)
            self.send(200 if body is not None else 404, body or b"", "application/octet-stream")

    server = serve(Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield served
    stop(server)


def hf_config(model: str = "acme/tiny-ce", **pins: str) -> RerankerConfig:
    return RerankerConfig(kind="cross_encoder", model=model, sha256=pins)


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
        "install it with: pip install 'teleton[hf]'"
    )
    assert hub.requests == []
