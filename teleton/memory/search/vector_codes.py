"""The in-memory index's code of a vector: one sign bit per dimension (48 bytes at 384 dims).

The index scans the codes by Hamming distance to the query's signs, re-ranks the nearest with the query's own
values against each code's signs (``sign_scores``: the query keeps its magnitudes), and reads back only the best
few exactly (``bit_index``). A code also held, until 2026-11-27, a bit per dimension for "above the row's mean
magnitude" and two levels (104 bytes): at 1M rows 56 MB more in memory, for the same share of the exact
neighbours with a third fewer rows read back.

The code is computed when a vector is written and stored beside it (``tg_messages_vec16.code``), so a start
reads 48 bytes a row instead of the 768-byte vector and computes nothing. A code stored before (104 bytes)
begins with the same sign words: a load reads only those (``sign_bytes``).
"""

from __future__ import annotations

import numpy as np


def words(dims: int) -> int:
    """uint64 words per bit row."""
    return -(-dims // 64)


def sign_bytes(dims: int) -> int:
    """A code's size: its sign words."""
    return 8 * words(dims)


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


def encode_stored(blobs: list[bytes]) -> np.ndarray:
    """The codes, (n, ``sign_bytes``) bytes, of vectors as the table stores them (float16 bytes): what a search
    reads back is what was coded."""
    vectors = np.frombuffer(b"".join(blobs), np.float16).reshape(len(blobs), -1)
    return pack_bits(vectors).view(np.uint8)


def sign_scores(signs: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The dot product of ``query`` with each row's signs (+-1): the order in which rows are read back."""
    signed = unpack_bits(signs, len(query)) * np.float32(2) - np.float32(1)
    return signed @ np.asarray(query, np.float32)
