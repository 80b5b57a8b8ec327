"""The Markdown chunker: size limits, headings, code fences, list groups, and nothing lost (hypothesis)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teleton.memory.knowledge.chunker import chunk_markdown

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def fences_balanced(text: str) -> bool:
    """CommonMark fences: an opener, then a closer of the same char, at least as long, with no info string."""
    open_marker = None
    for line in text.splitlines():
        m = FENCE.match(line)
        if not m:
            continue
        marker, info = m.group(1), m.group(2)
        if open_marker is None:
            if not (marker[0] == "`" and "`" in info):
                open_marker = marker
        elif marker[0] == open_marker[0] and len(marker) >= len(open_marker) and not info.strip():
            open_marker = None
    return open_marker is None


def test_heading_starts_a_chunk_and_its_path_is_the_context() -> None:
    doc = "# Projects\n\nintro\n\n## Teleton\n\nThe deadline is Friday.\n\n## Other\n\nsomething else\n"
    chunks = chunk_markdown(doc)
    by_text = {c.text.strip().splitlines()[-1]: c.heading for c in chunks}
    assert by_text["The deadline is Friday."] == "Projects > Teleton"
    assert by_text["something else"] == "Projects > Other"
    assert all(not c.text.strip() or c.text.lstrip().startswith("#") for c in chunks)


def test_small_sections_are_not_merged_across_headings() -> None:
    doc = "# A\none\n# B\ntwo\n"
    assert [c.text for c in chunks_of(doc)] == ["# A\none\n", "# B\ntwo\n"]


def chunks_of(doc: str) -> list:
    return chunk_markdown(doc)


def test_code_block_that_fits_is_never_split() -> None:
    code = "```python\n" + "".join(f"value_{i} = {i}\n" for i in range(40)) + "```\n"
    doc = "intro " * 70 + "\n\n" + code + "\nafter\n"
    chunks = chunk_markdown(doc)
    assert any(code in c.text for c in chunks)


def test_long_code_block_is_cut_into_fenced_pieces() -> None:
    code = "~~~sql\n" + "".join(f"select {i} from t where x = {i};\n" for i in range(200)) + "~~~\n"
    chunks = chunk_markdown(code)
    assert len(chunks) > 3
    for c in chunks:
        assert len(c.text) <= 1000
        assert c.text.startswith("~~~sql\n")
        assert fences_balanced(c.text)
    assert "".join(c.body for c in chunks) == code


def test_list_group_stays_together_when_it_fits() -> None:
    items = "".join(f"- item number {i} with some words\n" for i in range(12))
    doc = "para " * 90 + "\n\n" + items + "\n" + "tail " * 50 + "\n"
    chunks = chunk_markdown(doc)
    assert sum(items in c.text for c in chunks) == 1


def test_long_list_is_cut_between_items() -> None:
    items = [f"- item {i}: " + "word " * 20 + "\n" for i in range(40)]
    chunks = chunk_markdown("".join(items))
    assert len(chunks) > 1
    for c in chunks:
        assert c.body.startswith("- item")


def test_a_huge_single_line_is_cut_at_word_boundaries() -> None:
    doc = "word " * 1000
    chunks = chunk_markdown(doc)
    assert all(len(c.text) <= 1000 for c in chunks)
    assert all(c.body.endswith(" ") for c in chunks[:-1])
    assert "".join(c.body for c in chunks) == doc


# -- properties on random Markdown ---------------------------------------------------------------------
words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=80)
plain_line = st.builds(lambda w: w.replace("\n", " ").replace("\r", " "), words)
heading = st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 6), plain_line)
list_item = st.builds(lambda m, t: f"{m} {t}", st.sampled_from(["-", "*", "+", "1.", "2)", "  -"]), plain_line)
fence_marker = st.sampled_from(["```", "~~~", "````", "~~~~~"])
code_block = st.builds(
    lambda m, info, body, closed: "\n".join([m + info, *body] + ([m] if closed else [])),
    fence_marker,
    st.sampled_from(["", "python", "sh", "x`y"]),
    st.lists(st.one_of(plain_line, st.just("# not a heading"), st.just("```"), st.just("~~~")), max_size=120),
    st.booleans(),
)
long_line = st.builds(lambda w, n: (w + " ") * n, st.text(min_size=1, max_size=12), st.integers(50, 400))
block = st.one_of(plain_line, heading, list_item, code_block, long_line, st.just(""), st.just("   "))
document = st.builds(
    lambda blocks, sep: sep.join(blocks), st.lists(block, max_size=40), st.sampled_from(["\n", "\r\n", "\n\n"])
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document, st.sampled_from([(500, 1000), (200, 400), (60, 120)]))
def test_chunks_respect_limits_lose_nothing_and_balance_fences(doc: str, sizes: tuple[int, int]) -> None:
    target, limit = sizes
    chunks = chunk_markdown(doc, target, limit)
    assert "".join(c.body for c in chunks) == doc  # nothing lost, nothing duplicated, order kept
    for c in chunks:
        assert len(c.text) <= limit
        assert fences_balanced(c.text), c.text
        assert c.body  # no empty chunks
