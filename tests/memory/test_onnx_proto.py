"""The e5 model file is written without the ``onnx`` package: checked here against ``onnx`` itself (its
checker and reader) and against ONNX Runtime's own dynamic quantiser, which built the model before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from teleton.memory.embeddings import onnx_proto
from teleton.memory.embeddings.e5_weights import Graph
from teleton.memory.embeddings.local import import_onnxruntime
from teleton.memory.embeddings.onnx_proto import FLOAT

ort = import_onnxruntime()


def _write(path: Path, g: Graph, out: str, width: int) -> Path:
    path.write_bytes(
        onnx_proto.model(
            "t",
            g.nodes,
            (onnx_proto.tensor(name, value) for name, value in g.inits.items()),
            [onnx_proto.value_info("x", FLOAT, ["batch", "seq", 8])],
            [onnx_proto.value_info(out, FLOAT, ["batch", "seq", width])],
            opset=17,
            producer="test",
        )
    )
    return path


def _run(path: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_the_file_passes_onnx_checker_and_reads_back_as_written(tmp_path: Path) -> None:
    g = Graph()
    norm = g.op(
        "LayerNormalization",
        "x",
        g.const("w", np.ones(8, np.float32)),
        g.const("b", np.zeros(8, np.float32)),
        axis=-1,
        epsilon=1e-12,
    )
    moved = g.op("Transpose", norm, perm=[0, 2, 1])
    g.op("BitShift", g.const("u8", np.array([3], np.uint8)), g.const("one", np.uint8(1)), direction="LEFT")
    out = g.op("Transpose", moved, perm=[0, 2, 1], name="y")
    model = onnx.load(str(_write(tmp_path / "m.onnx", g, out, 8)))
    onnx.checker.check_model(model, full_check=True)

    attrs = {
        n.op_type + str(i): {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        for i, n in enumerate(model.graph.node)
    }
    assert attrs["LayerNormalization0"]["axis"] == -1
    assert np.float32(attrs["LayerNormalization0"]["epsilon"]) == np.float32(1e-12)
    assert attrs["Transpose1"]["perm"] == [0, 2, 1]
    assert attrs["BitShift2"]["direction"] == b"LEFT"
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert inits["one"].shape == () and inits["one"].dtype == np.uint8  # a scalar stays a scalar
    assert inits["u8"].tolist() == [3]
    assert [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == ["batch", "seq", 8]
    x = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
    assert _run(tmp_path / "m.onnx", x).shape == (2, 3, 8)


def test_int8_layers_are_onnx_runtimes_own_quantisation_to_the_bit(tmp_path: Path) -> None:
    """Two linear layers on one input and one on its result, as in e5: the weights, the scales and every output
    equal what ``quantize_dynamic(per_channel=True)`` makes of the float graph."""
    rng = np.random.default_rng(7)
    w1, w2, w3 = (rng.standard_normal(shape).astype(np.float32) for shape in ((8, 16), (8, 16), (16, 4)))
    w1[:, 3] = 0.0  # an all-zero column

    float_graph = Graph()
    a = float_graph.op("MatMul", "x", float_graph.const("w1", w1))
    b = float_graph.op("MatMul", "x", float_graph.const("w2", w2))
    out = float_graph.op("MatMul", float_graph.op("Add", a, b), float_graph.const("w3", w3), name="y")
    quantized = tmp_path / "ort.onnx"
    quantize_dynamic(
        _write(tmp_path / "float.onnx", float_graph, out, 4),
        quantized,
        op_types_to_quantize=["MatMul"],
        weight_type=QuantType.QInt8,
        per_channel=True,
    )

    ours = Graph()
    a = ours.int8_matmul("x", "w1", w1)
    b = ours.int8_matmul("x", "w2", w2)
    ours.op("Identity", ours.int8_matmul(ours.op("Add", a, b), "w3", w3), name="y")
    _write(tmp_path / "ours.onnx", ours, "y", 4)

    theirs = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(quantized)).graph.initializer}
    mine = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "ours.onnx")).graph.initializer}
    assert mine.keys() == theirs.keys()
    for name, value in theirs.items():
        assert mine[name].dtype == value.dtype and np.array_equal(mine[name], value), name
    ops = [n.op_type for n in onnx.load(str(tmp_path / "ours.onnx")).graph.node]
    assert ops.count("DynamicQuantizeLinear") == 2  # x once for both of its layers, then the sum

    x = rng.standard_normal((3, 5, 8)).astype(np.float32)
    assert np.array_equal(_run(tmp_path / "ours.onnx", x), _run(quantized, x))
