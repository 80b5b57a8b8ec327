"""The reranker's batches are bounded by pair count and by padded tokens, and cover every pair once; a long text
is tokenised only as far as the model's window reaches, with the tokens of the whole text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from teleton.memory.embeddings.local import by_heads
from teleton.memory.rerank.cross_encoder import TOKEN_BUDGET, token_batches


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


def words_tokenizer(seen: list[int], max_tokens: int):  # a word-by-word tokenizer that cuts at max_tokens
    def ids(texts: list[str]) -> list[list[int]]:
        seen.extend(len(t) for t in texts)
        return [[len(word) for word in t.split()][:max_tokens] for t in texts]

    return ids


@given(st.lists(st.text(alphabet="ab ", max_size=40), max_size=120), st.integers(min_value=1, max_value=30))
def test_a_long_text_gives_the_tokens_of_the_whole_text(pieces: list[str], max_tokens: int) -> None:
    text = " ".join(pieces)
    whole = words_tokenizer([], max_tokens)([text])
    assert by_heads(words_tokenizer([], max_tokens), max_tokens)([text, "short"]) == [*whole, [5]]


def test_a_10mb_paste_is_read_only_as_far_as_the_window() -> None:
    seen: list[int] = []
    paste = "a line of the pasted log\n" * 400_000
    (ids,) = by_heads(words_tokenizer(seen, 512), 512)([paste])
    assert len(ids) == 512 and sum(seen) < 20 * 512  # characters tokenised, of 10 MB
