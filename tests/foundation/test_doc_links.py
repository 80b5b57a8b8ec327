"""Every relative link in README.md and docs/ leads somewhere: a file that exists and, with an anchor, a heading
it has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(page: Path) -> list[str]:
    broken = []
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", resolved.read_text(), flags=re.M)
            if anchor not in {slug(h) for h in headings}:
                broken.append(target)
    return broken


def test_every_relative_link_resolves() -> None:
    assert len(PAGES) > 5
    assert {page.relative_to(ROOT).as_posix(): broken_links(page) for page in PAGES if broken_links(page)} == {}


def test_a_broken_link_is_seen(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# Exactly once\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md) [ok](there.md#exactly-once) [gone](missing.md) [bad](there.md#nowhere)\n")
    assert broken_links(page) == ["missing.md", "there.md#nowhere"]
