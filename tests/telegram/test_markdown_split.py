"""Markdown → text + entities, and the split, for any input a model (or an attacker) can produce."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from teleton.telegram.send.markdown import to_telegram
from teleton.telegram.send.split import plan_reply, split_text, utf16_len

MARKUP = st.lists(
    st.sampled_from([*"ab *_`~[]()#>-\n.!? 😀é", "https://x.y", "```", "**", "](", "word "]), max_size=200
).map("".join)


@settings(max_examples=300, deadline=None)
@given(MARKUP)
def test_any_markdown_gives_valid_spans(text: str) -> None:
    plain, spans = to_telegram(text)
    for s in spans:
        assert 0 <= s.offset and s.length > 0 and s.end <= len(plain)


@settings(max_examples=200, deadline=None)
@given(MARKUP, st.integers(min_value=8, max_value=120))
def test_parts_fit_and_keep_every_word(text: str, limit: int) -> None:
    parts = plan_reply(text, limit=limit, max_parts=10_000)
    plain, _ = to_telegram(text)
    for part in parts:
        size = utf16_len(part.text)
        assert 0 < size <= limit
        assert all(0 <= s.offset and s.offset + s.length <= size for s in part.spans)
    if plain.strip():
        assert "".join("".join(p.text.split()) for p in parts) == "".join(plain.split())


def test_nested_and_mixed_formatting() -> None:
    plain, spans = to_telegram("**bold _and italic_** then ~~gone~~ and [site](https://e.org)")
    assert plain == "bold and italic then gone and site"
    got = {(s.kind, plain[s.offset : s.end], s.url) for s in spans}
    assert got == {
        ("bold", "bold and italic", None),
        ("italic", "and italic", None),
        ("strike", "gone", None),
        ("link", "site", "https://e.org"),
    }


def test_code_blocks_keep_their_content_verbatim() -> None:
    plain, spans = to_telegram("before\n```python\nx = a*b*c  # **not bold**\n```\nafter")
    assert plain == "before\nx = a*b*c  # **not bold**\nafter"
    [pre] = spans
    assert (pre.kind, pre.language, plain[pre.offset : pre.end]) == ("pre", "python", "x = a*b*c  # **not bold**")


def test_split_prefers_paragraphs_then_sentences() -> None:
    text = "First paragraph is here.\n\nSecond one. It has two sentences."
    assert [p.text for p in split_text(text, limit=40)] == [
        "First paragraph is here.",
        "Second one. It has two sentences.",
    ]
    assert [p.text for p in split_text("One sentence. Two sentence. Three.", limit=20)] == [
        "One sentence.",
        "Two sentence. Three.",
    ]


def test_a_word_longer_than_a_message_is_cut_hard() -> None:
    parts = split_text("x" * 10_000, limit=4096)
    assert [len(p.text) for p in parts] == [4096, 4096, 1808]


def test_emoji_count_double_toward_the_limit() -> None:
    parts = split_text("😀" * 3000, limit=4096)
    assert [utf16_len(p.text) for p in parts] == [4096, 1904]
