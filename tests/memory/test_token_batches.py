"""Embedding batches are bounded by text count and by padded tokens, and cover every text once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from teleton.memory.embeddings.local import TOKEN_BUDGET, token_batches


@given(st.lists(st.integers(min_value=0, max_value=256), max_size=300), st.integers(min_value=1, max_value=64))
def test_batches_cover_all_and_respect_limits(lengths: list[int], max_texts: int) -> None:
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches = token_batches(order, lengths, max_texts)
    assert [i for batch in batches for i in batch] == order
    for batch in batches:
        assert 1 <= len(batch) <= max_texts
        width = max(1, max(lengths[i] for i in batch))
        assert len(batch) == 1 or len(batch) * width <= TOKEN_BUDGET


def test_short_chat_messages_still_go_sixty_four_at_a_time() -> None:
    lengths = [12] * 200
    assert [len(b) for b in token_batches(list(range(200)), lengths, 64)] == [64, 64, 64, 8]
