"""The in-memory index's code of a vector: two bits per dimension and two levels (104 bytes at 384 dims).

Bits: each coordinate's sign, and whether it is above the row's mean magnitude; levels: the mean magnitude of
the coordinates below and of those above. A coordinate is then approximated by +-small or +-big, which ranks a
query's nearest codes well enough to read back only the best few exactly (``bit_index``). The row's median as
the cut found the same neighbours and cost 40% of a load.

The code is computed when a vector is written and stored beside it (``tg_messages_vec16.code``), so a start
reads 104 bytes a row instead of the 768-byte vector and computes nothing.
"""

from __future__ import annotations

import numpy as np


def words(dims: int) -> int:
    """uint64 words per bit row."""
    return -(-dims // 64)


def code_size(dims: int) -> int:
    return 16 * words(dims) + 8


def pack_bits(values: np.ndarray) -> np.ndarray:
    """Rows of booleans (or values, as ``> 0``: sqlite-vec's vec_quantize_binary) as uint64 words per row."""
    packed = np.packbits(values > 0, axis=1)
    pad = -packed.shape[1] % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)


def unpack_bits(rows: np.ndarray, dims: int) -> np.ndarray:
    """Rows of uint64 words back to (rows, dims) zeros and ones."""
    return np.unpackbits(np.ascontiguousarray(rows).view(np.uint8), axis=1, count=dims)


def encode(vectors: np.ndarray) -> np.ndarray:
    """(n, dims) float32 vectors -> (n, ``code_size``) bytes: sign words, big words, the two levels."""
    magnitude = np.abs(vectors)
    total = magnitude.sum(axis=1, dtype=np.float32)
    big = magnitude > (total / vectors.shape[1])[:, None]
    n_big = big.sum(axis=1)
    big_sum = np.where(big, magnitude, 0).sum(axis=1, dtype=np.float32)
    levels = np.stack(
        [(total - big_sum) / np.maximum(vectors.shape[1] - n_big, 1), big_sum / np.maximum(n_big, 1)], axis=1
    ).astype(np.float32)
    return np.concatenate([pack_bits(vectors).view(np.uint8), pack_bits(big).view(np.uint8), levels.view(np.uint8)], 1)


def encode_stored(blobs: list[bytes]) -> np.ndarray:
    """The codes of vectors as the table stores them (float16 bytes): what a search reads back is what was coded."""
    vectors = np.frombuffer(b"".join(blobs), np.float16).reshape(len(blobs), -1)
    return encode(vectors.astype(np.float32))


def decode(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, code_size) bytes -> sign words (n, words), big words (n, words), levels (n, 2): small, big."""
    width = (codes.shape[1] - 8) // 16 * 8
    signs = np.ascontiguousarray(codes[:, :width]).view(np.uint64)
    big = np.ascontiguousarray(codes[:, width : 2 * width]).view(np.uint64)
    levels = np.ascontiguousarray(codes[:, 2 * width :]).view(np.float32)
    return signs, big, levels


def scores(signs: np.ndarray, big: np.ndarray, levels: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The approximate dot product of ``query`` with each coded row: small * (signs . q) + (big - small) *
    (signs of the big coordinates . q)."""
    dims = len(query)
    signed = unpack_bits(signs, dims) * np.float32(2) - np.float32(1)
    big_signed = signed * unpack_bits(big, dims)
    return levels[:, 0] * (signed @ query) + (levels[:, 1] - levels[:, 0]) * (big_signed @ query)
