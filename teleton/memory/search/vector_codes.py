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


def encode_stored(blobs: list[bytes]) -> np.ndarray:
    """The codes, (n, ``sign_bytes``) bytes, of vectors as the table stores them (float16 bytes): what a search
    reads back is what was coded."""
    vectors = np.frombuffer(b"".join(blobs), np.float16).reshape(len(blobs), -1)
    return pack_bits(vectors).view(np.uint8)


# Each byte value's eight bits as 0/1, the first dimension in the high bit (``np.packbits``'s order).
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float32)


def sign_scores(signs: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The dot product of ``query`` with each row's signs (+-1): the order in which rows are read back.

    Summed through a table of the query's values per code byte and byte value (48 x 256 at 384 dims), so no
    rows of +-1 are unpacked and no BLAS call is made: BLAS's threads busy-wait after each call."""
    codes = np.ascontiguousarray(signs).view(np.uint8)
    width = codes.shape[1]
    values = np.zeros(width * 8, np.float32)
    values[: len(query)] = query
    table = (values.reshape(width, 1, 8) * _BYTE_BITS).sum(axis=2)  # the query's sum over each byte's set bits
    ones = np.take(table.ravel(), codes + np.arange(0, width * 256, 256)).sum(axis=1)
    return 2 * ones - values.sum()  # set bits count +1, the others -1
