"""What a document reader returns (``documents`` picks the reader; each ``documents_*`` module is one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["pdf", "docx", "csv", "text"]


@dataclass(frozen=True)
class ExtractedDocument:
    kind: Kind
    text: str
    pages: int | None  # PDF page count; None for kinds without pages
    truncated: bool  # text stops at max_chars (or a CSV at its row cap); the rest was not read
    title: str | None = None  # from the document's metadata, when it has one
    note: str | None = None  # one line for the model about what it is missing (e.g. a scanned PDF)
