"""Word (.docx) text with python-docx, as Markdown: headings as "#", list items as "-", tables as rows.

Markdown because the text is split for the archive and the knowledge base by ``teleton.memory.knowledge.chunker``,
which keeps every chunk's heading path: a paragraph deep in a report still knows its section.
Plain and synchronous, like the rest of ``teleton.media.documents``: the caller runs it in a thread.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

from teleton.media.errors import MediaError
from teleton.media.extracted import ExtractedDocument


def docx_text(data: bytes, *, max_chars: int) -> ExtractedDocument:
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_blocks(document, max_chars))
    except MediaError:
        raise
    except Exception as exc:  # python-docx and lxml raise many kinds on a damaged package
        raise MediaError(f"docx: corrupt file ({' '.join(str(exc).split())[:120] or type(exc).__name__})") from None
    text = "\n\n".join(blocks)
    truncated = len(text) > max_chars
    return ExtractedDocument("docx", text[:max_chars].rstrip(), None, truncated, title=_title(document))


def _blocks(document: docx.document.Document, max_chars: int) -> Iterator[str]:
    """Paragraphs and tables in document order, stopping once ``max_chars`` are in hand."""
    size = 0
    for item in document.iter_inner_content():
        block = _paragraph(item) if isinstance(item, Paragraph) else _table(item)
        if not block:
            continue
        yield block
        size += len(block) + 2
        if size > max_chars:
            return


def _paragraph(paragraph: Paragraph) -> str:
    text = paragraph.text.strip()
    if not text:
        return ""
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    if style == "Title":
        return f"# {text}"
    if style.startswith("Heading "):
        level = style.removeprefix("Heading ").strip()
        if level.isdigit():
            return "#" * min(int(level), 6) + " " + text
    if style.startswith("List"):
        return f"- {text}"
    return text


def _table(table: Table) -> str:
    lines = []
    for row in table.rows:
        cells = []
        previous = None
        for cell in row.cells:
            # A merged cell is returned once per grid column it spans: show it once.
            if previous is not None and cell._tc is previous:
                continue
            previous = cell._tc
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _title(document: docx.document.Document) -> str | None:
    try:
        title = document.core_properties.title
    except Exception:  # a broken core-properties part only costs the title
        return None
    title = " ".join((title or "").split())
    return title[:200] or None
