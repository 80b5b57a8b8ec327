"""The text of a document someone sent: PDF, docx, csv, or anything that is text (txt, md, json, log, …).

``extract_text`` decides what the bytes are from their content first (a ".txt" that is really a ZIP is a ZIP)
and from the file name and MIME type second, then hands them to one extractor:
``documents_pdf`` (pypdf), ``documents_docx`` (python-docx), ``documents_text`` (decoding and CSV).
Anything that cannot be used raises ``MediaError`` with a one-line reason that names the kind of file.

The functions are plain and synchronous and parsing is CPU-bound: the caller runs them in a thread
(``asyncio.to_thread``). pypdf and python-docx are imported on first use, not at daemon start.
"""

from __future__ import annotations

import io
import os
import re
import zipfile

from teleton.media.documents_text import csv_text, plain_text
from teleton.media.errors import MediaError
from teleton.media.extracted import ExtractedDocument, Kind

MAX_CHARS = 2_000_000
# Declared uncompressed size of a docx's parts; python-docx reads every part (images too) into memory.
MAX_DOCX_UNPACKED = 256 * 1024 * 1024


_TEXT_EXTENSIONS = {
    "txt", "text", "md", "markdown", "rst", "log", "json", "jsonl", "ndjson", "xml", "yaml", "yml", "toml", "ini",
    "cfg", "conf", "env", "html", "htm", "srt", "vtt", "tex", "sql", "sh", "py", "js", "ts", "go", "rs", "java",
    "c", "h", "cpp", "cs", "rb", "php", "css", "org", "properties", "diff", "patch",
}  # fmt: skip
_CSV_EXTENSIONS = {"csv", "tsv"}
_PAGE_MARKER = re.compile(r"^\[page (\d+)\]\n", re.MULTILINE)
_CSV_TYPES = {"text/csv", "text/tab-separated-values", "application/csv", "text/x-csv"}
_TEXT_TYPES = {"application/json", "application/xml", "application/x-yaml", "application/yaml", "application/x-sh"}

# Leading bytes of kinds people send that carry no extractable text here, with the name the model is told.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"MZ", "Windows executable"),
    (b"\x7fELF", "ELF executable"),
    (b"\xcf\xfa\xed\xfe", "macOS executable"),
    (b"\x1f\x8b", "gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"Rar!\x1a\x07", "RAR archive"),
    (b"BZh", "bzip2 archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "legacy Office file (.doc/.xls/.ppt; save it as .docx or PDF)"),
    (b"{\\rtf", "RTF document (save it as .docx or PDF)"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"GIF8", "GIF image"),
    (b"OggS", "Ogg audio"),
    (b"ID3", "MP3 audio"),
    (b"fLaC", "FLAC audio"),
    (b"\x1a\x45\xdf\xa3", "WebM/Matroska video"),
)


def extract_text(data: bytes, *, filename: str, mime_type: str | None, max_chars: int = MAX_CHARS) -> ExtractedDocument:
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    kind = detect_kind(data, filename=filename, mime_type=mime_type)
    if kind == "pdf":
        from teleton.media.documents_pdf import pdf_text  # deferred: pypdf loads when the first PDF arrives

        return pdf_text(data, max_chars=max_chars)
    if kind == "docx":
        from teleton.media.documents_docx import docx_text  # deferred: python-docx loads when the first .docx arrives

        return docx_text(data, max_chars=max_chars)

    if kind == "csv":
        return csv_text(data, max_chars=max_chars, tab_separated=_extension(filename) == "tsv")
    return plain_text(data, max_chars=max_chars)


def detect_kind(data: bytes, *, filename: str, mime_type: str | None) -> Kind:
    """What ``extract_text`` will treat the bytes as; ``MediaError`` naming the kind when it is none of ours."""
    name = os.path.basename(filename) or "the file"
    if not data:
        raise MediaError(f"document: {name} is empty")
    head = data[:1024]
    if b"%PDF-" in head:  # the PDF header may follow a little junk
        return "pdf"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        zip_kind = _zip_kind(data)
        if zip_kind == "docx":
            return "docx"
        raise MediaError(f"document: {name} is a {zip_kind}, which is not supported")
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise MediaError(f"document: {name} is a {what}, which is not supported")
    riff = _riff_kind(head)
    if riff:
        raise MediaError(f"document: {name} is {riff}, which is not supported")
    if head[4:8] == b"ftyp":
        raise MediaError(f"document: {name} is an MP4/QuickTime/HEIC media file, which is not supported")
    extension, mime = _extension(filename), (mime_type or "").split(";")[0].strip().lower()
    if not _looks_like_text(head):
        shown = f".{extension} " if extension else ""
        raise MediaError(f"document: {name} is a binary {shown}file of an unsupported kind")
    if extension in _CSV_EXTENSIONS or mime in _CSV_TYPES:
        return "csv"
    return "text"  # text by content, whatever the name says: notes often come without an extension


def split_pages(text: str) -> list[tuple[int | None, str]]:
    """A PDF's text cut at its "[page N]" markers: (page number, that page's text without the marker).

    Text before the first marker (or all of it, for kinds without pages) comes with None.
    """
    pieces = _PAGE_MARKER.split(text)
    pages: list[tuple[int | None, str]] = [(None, pieces[0])] if pieces[0].strip() else []
    for number, body in zip(pieces[1::2], pieces[2::2], strict=True):
        pages.append((int(number), body.strip("\n")))
    return pages


def kind_from_name(filename: str, mime_type: str | None) -> Kind | None:
    """The kind the name and MIME type promise, before any byte is downloaded; None when they promise none.

    For choosing a size cap before a download starts; ``extract_text`` still trusts the content over the name.
    """
    mime = (mime_type or "").split(";")[0].strip().lower()
    extension = _extension(filename)
    if extension == "pdf" or mime == "application/pdf":
        return "pdf"
    if extension == "docx" or mime == "application/vnd.openxmlformats-officedocument.wordprocessingml.document":
        return "docx"
    if extension in _CSV_EXTENSIONS or mime in _CSV_TYPES:
        return "csv"
    if extension in _TEXT_EXTENSIONS or mime.startswith("text/") or mime in _TEXT_TYPES:
        return "text"
    return None


def _extension(filename: str) -> str:
    return os.path.splitext(filename)[1].lstrip(".").lower()


def _zip_kind(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            names = {info.filename for info in infos}
            mimetype = archive.read("mimetype")[:100].decode("ascii", "replace") if "mimetype" in names else ""
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, KeyError, RuntimeError):
        return "damaged ZIP archive"
    if "word/document.xml" in names:
        if sum(info.file_size for info in infos) > MAX_DOCX_UNPACKED:
            raise MediaError(f"document: the docx unpacks to more than {MAX_DOCX_UNPACKED // 2**20} MB")
        return "docx"
    if any(n.startswith("xl/") for n in names):
        return "Excel spreadsheet (.xlsx)"
    if any(n.startswith("ppt/") for n in names):
        return "PowerPoint presentation (.pptx)"
    if "epub" in mimetype:
        return "EPUB book"
    if "opendocument" in mimetype:
        return "OpenDocument file (save it as .docx or PDF)"
    if "AndroidManifest.xml" in names:
        return "Android app (APK)"
    return "ZIP archive"


def _riff_kind(head: bytes) -> str | None:
    if not head.startswith(b"RIFF"):
        return None
    return {b"WAVE": "WAV audio", b"WEBP": "WebP image", b"AVI ": "AVI video"}.get(head[8:12], "RIFF media file")


def _looks_like_text(head: bytes) -> bool:
    # UTF-16/32 text is full of NULs; its byte-order mark says so. Otherwise a NUL means binary.
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")):
        return True
    if b"\x00" in head:
        return False
    controls = sum(1 for byte in head if byte < 32 and byte not in (9, 10, 12, 13, 27))
    return controls <= len(head) // 100
