"""An ONNX model file written directly in protobuf's wire format, for the one graph Teleton builds (e5).

The ``onnx`` package (31 MB with its checker and ml_dtypes) was only ever used to write that graph once; the
part of ``onnx.proto`` a plain graph needs is a handful of fields, encoded here. ONNX Runtime checks the model
when it loads it, as it checks any file. Field numbers are ``onnx/onnx.proto``'s.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

IR_VERSION = 8
# TensorProto.DataType
FLOAT, UINT8, INT8, INT32, INT64, FLOAT16 = 1, 2, 3, 6, 7, 10
_DATA_TYPES = {
    np.dtype(np.float32): FLOAT,
    np.dtype(np.uint8): UINT8,
    np.dtype(np.int8): INT8,
    np.dtype(np.int32): INT32,
    np.dtype(np.int64): INT64,
    np.dtype(np.float16): FLOAT16,
}
# AttributeProto.AttributeType
_ATTR_FLOAT, _ATTR_INT, _ATTR_STRING, _ATTR_INTS = 1, 2, 3, 7

Attribute = float | int | str | Sequence[int]


@dataclass
class Node:
    op_type: str
    inputs: list[str]
    outputs: list[str]
    name: str
    attrs: dict[str, Attribute] = field(default_factory=dict)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as protobuf writes them: ten bytes of two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _float(number: int, value: float) -> bytes:
    return _varint(number << 3 | 5) + struct.pack("<f", value)


def tensor(name: str, array: np.ndarray) -> bytes:
    """A TensorProto: dims, data type, name, raw data (C order, little endian; a scalar has no dims)."""
    dims = b"".join(_int(1, d) for d in array.shape)
    raw = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
    return dims + _int(2, _DATA_TYPES[array.dtype]) + _bytes(8, name) + _bytes(9, raw)


def _attribute(name: str, value: Attribute) -> bytes:
    if isinstance(value, float):
        return _bytes(1, name) + _float(2, value) + _int(20, _ATTR_FLOAT)
    if isinstance(value, int):
        return _bytes(1, name) + _int(3, value) + _int(20, _ATTR_INT)
    if isinstance(value, str):
        return _bytes(1, name) + _bytes(4, value) + _int(20, _ATTR_STRING)
    return _bytes(1, name) + b"".join(_int(8, v) for v in value) + _int(20, _ATTR_INTS)


def _node(node: Node) -> bytes:
    parts = [_bytes(1, i) for i in node.inputs] + [_bytes(2, o) for o in node.outputs]
    parts += [_bytes(3, node.name), _bytes(4, node.op_type)]
    parts += [_bytes(5, _attribute(k, v)) for k, v in node.attrs.items()]
    return b"".join(parts)


def value_info(name: str, elem_type: int, dims: Iterable[int | str]) -> bytes:
    """A ValueInfoProto of a tensor; a str dimension is symbolic (``batch``)."""
    shape = b"".join(_bytes(1, _bytes(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    name: str,
    nodes: Iterable[Node],
    initializers: Iterable[bytes],
    inputs: Iterable[bytes],
    outputs: Iterable[bytes],
    *,
    opset: int,
    producer: str,
) -> bytes:
    """A ModelProto of one graph in the default domain, serialised."""
    graph = b"".join(_bytes(1, _node(n)) for n in nodes) + _bytes(2, name)
    graph += b"".join(_bytes(5, t) for t in initializers)
    graph += b"".join(_bytes(11, v) for v in inputs) + b"".join(_bytes(12, v) for v in outputs)
    opset_id = _bytes(1, "") + _int(2, opset)
    return _int(1, IR_VERSION) + _bytes(8, opset_id) + _bytes(2, producer) + _bytes(7, graph)
