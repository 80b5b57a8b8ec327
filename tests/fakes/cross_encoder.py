"""A tiny cross-encoder the tests build (a word-level ``tokenizer.json`` whose pairs get type ids 0 and 1, and
an ONNX graph whose logit is the sum of a weight per token of the TEXT, so every score can be worked out by
hand), and a fake Hugging Face on 127.0.0.1 that serves it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from teleton.config.schema import RerankerConfig

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


def hf_config(model: str = "acme/tiny-ce", **pins: str) -> RerankerConfig:
    return RerankerConfig(kind="cross_encoder", model=model, sha256=pins)
