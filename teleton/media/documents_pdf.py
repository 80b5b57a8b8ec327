"""PDF text with pypdf: every page's text under a "[page N]" marker, so an excerpt can say where it is.

Plain and synchronous, like the rest of ``teleton.media.documents``: the caller runs it in a thread.
"""

from __future__ import annotations

import io
import logging

from pypdf import PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

from teleton.media.errors import MediaError
from teleton.media.extracted import ExtractedDocument
from teleton.text.lines import reason

REASON_CAP = 120  # characters of a library's error message in ours

# pypdf logs a warning for every small defect it repairs (common in real PDFs); they say nothing to an owner.
logging.getLogger("pypdf").setLevel(logging.ERROR)

SCANNED_NOTE = "no text layer: the PDF is probably scanned images (OCR is not available)"


def pdf_text(data: bytes, *, max_chars: int) -> ExtractedDocument:
    reader = _open(data)
    try:
        page_count = len(reader.pages)
    except Exception as exc:  # any parser failure on untrusted bytes is "corrupt", never a crash
        raise MediaError(f"pdf: corrupt file ({reason(exc, REASON_CAP)})") from None
    if page_count == 0:
        raise MediaError("pdf: corrupt file (no pages)")
    parts: list[str] = []
    size = 0
    truncated = False
    unreadable = 0
    for number in range(1, page_count + 1):
        try:
            page_text = reader.pages[number - 1].extract_text() or ""
        except Exception:  # one broken page must not cost the other pages
            unreadable += 1
            continue
        page_text = page_text.replace("\x00", "").strip()
        if not page_text:
            continue
        part = f"[page {number}]\n{page_text}\n\n"
        if size + len(part) > max_chars:
            parts.append(part[: max_chars - size])
            truncated = True
            break
        parts.append(part)
        size += len(part)
    text = "".join(parts).rstrip()
    note = None
    if not text.strip():
        text = ""
        note = SCANNED_NOTE if not unreadable else f"no readable text ({unreadable} pages could not be parsed)"
    elif unreadable:
        note = f"{unreadable} of {page_count} pages could not be parsed"
    return ExtractedDocument("pdf", text, page_count, truncated, title=_title(reader), note=note)


def _open(data: bytes) -> PdfReader:
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
    except Exception as exc:  # pypdf raises many kinds on malformed input
        raise MediaError(f"pdf: corrupt file ({reason(exc, REASON_CAP)})") from None
    if not reader.is_encrypted:
        return reader
    # Many PDFs are encrypted only to restrict printing or copying: their user password is empty.
    try:
        opened = reader.decrypt("")
    except DependencyError:
        raise MediaError("pdf: encrypted with AES; reading it needs the 'cryptography' package") from None
    except (FileNotDecryptedError, PdfReadError, NotImplementedError, ValueError) as exc:
        raise MediaError(f"pdf: encrypted in a way that cannot be opened ({reason(exc, REASON_CAP)})") from None
    if not opened:
        raise MediaError("pdf: protected by a password; ask for an unprotected copy")
    return reader


def _title(reader: PdfReader) -> str | None:
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:  # a broken info dictionary only costs the title
        return None
    title = " ".join(str(title).split()) if title else ""
    return title[:200] or None
