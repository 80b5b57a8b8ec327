"""Documents as the model and the archive read them: the text, where it is, and one line when there is none.

Every file is made here: PDFs with fpdf2, docx with python-docx, the rest as bytes.
"""

from __future__ import annotations

import io
import zipfile

import docx
import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw

from teleton.media.documents import ExtractedDocument, detect_kind, extract_text, kind_from_name, split_pages
from teleton.media.documents_pdf import SCANNED_NOTE
from teleton.media.errors import MediaError
from teleton.memory.knowledge.chunker import chunk_markdown

RUSSIAN = "Привет! Встреча перенесена на четверг, 15:00. Не забудьте отчёт.\nЁлка стоит в зале.\n"


def _pdf(pages: list[str], *, title: str | None = None, user_password: str | None = None, owner: str = "") -> bytes:
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    if user_password is not None or owner:
        pdf.set_encryption(owner_password=owner or "owner-secret", user_password=user_password or "")
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def _error(data: bytes, filename: str, mime_type: str | None = None, **options: int) -> str:
    with pytest.raises(MediaError) as caught:
        extract_text(data, filename=filename, mime_type=mime_type, **options)
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- PDF -------------------------------------------------------------------------------------------------


def test_a_pdf_gives_its_text_with_the_page_each_sentence_is_on() -> None:
    data = _pdf(
        ["Introduction to the lease agreement.", "The tenant must return the keys by 31 March.", "Signatures."],
        title="Lease 2026",
    )
    document = extract_text(data, filename="lease.pdf", mime_type="application/pdf")

    assert document.kind == "pdf"
    assert document.pages == 3
    assert document.title == "Lease 2026"
    assert not document.truncated and document.note is None
    page_two = document.text.index("[page 2]")
    sentence = document.text.index("The tenant must return the keys by 31 March.")
    assert page_two < sentence < document.text.index("[page 3]")
    assert document.text.startswith("[page 1]\nIntroduction to the lease agreement.")


def test_a_pdf_is_recognised_by_content_whatever_its_name() -> None:
    document = extract_text(_pdf(["Invoice number 42"]), filename="scan.bin", mime_type="application/octet-stream")
    assert document.kind == "pdf" and "Invoice number 42" in document.text


def test_a_password_protected_pdf_is_refused_in_one_line() -> None:
    message = _error(_pdf(["Salary details"], user_password="hunter2"), "salary.pdf")
    assert message.startswith("pdf: ") and "password" in message


def test_a_pdf_restricted_only_by_an_owner_password_is_read() -> None:
    # Encrypted to forbid editing, but anyone may open it: the user password is empty.
    document = extract_text(_pdf(["Bank statement for March"], owner="bank"), filename="s.pdf", mime_type=None)
    assert "Bank statement for March" in document.text


def test_a_scanned_pdf_without_text_is_an_empty_document_with_a_note() -> None:
    scan = Image.new("RGB", (400, 300), (255, 255, 255))
    ImageDraw.Draw(scan).text((20, 20), "a scanned page", fill=(0, 0, 0))
    pdf = FPDF()
    pdf.add_page()
    pdf.image(scan, x=10, y=10, w=180)
    document = extract_text(bytes(pdf.output()), filename="scan.pdf", mime_type="application/pdf")
    assert document.kind == "pdf" and document.pages == 1
    assert document.text == ""
    assert document.note == SCANNED_NOTE


def test_a_corrupt_pdf_is_refused_in_one_line() -> None:
    assert _error(b"%PDF-1.7\n" + b"\x8f garbage " * 200, "broken.pdf").startswith("pdf: corrupt")
    whole = _pdf(["Some text"])
    assert _error(whole[: len(whole) // 3], "cut.pdf").startswith("pdf: ")
    assert _error(b"%PDF-1.4\n%%EOF\n", "empty.pdf").startswith("pdf: corrupt")


def test_a_pdf_splits_into_pages_and_each_page_into_chunks_that_know_their_page() -> None:
    pages = [f"Page {n} topic. " + f"Sentence {n} about the harbour. " * 60 for n in (1, 2, 3)]
    document = extract_text(_pdf(pages), filename="report.pdf", mime_type=None)

    split = split_pages(document.text)
    assert [number for number, _ in split] == [1, 2, 3]
    for number, body in split:
        chunks = chunk_markdown(body)
        assert len(chunks) > 1  # each page is longer than one chunk
        assert "".join(chunk.body for chunk in chunks) == body  # nothing lost between chunks
        assert all(f"Sentence {number} " in chunk.body for chunk in chunks)
    assert split_pages("plain text") == [(None, "plain text")]


def test_a_long_pdf_stops_at_max_chars_and_says_so() -> None:
    data = _pdf([f"Chapter {n}. " + "The river ran past the mill. " * 30 for n in range(1, 21)])
    document = extract_text(data, filename="book.pdf", mime_type=None, max_chars=3000)
    assert document.truncated
    assert len(document.text) <= 3000
    assert "[page 1]" in document.text and "[page 20]" not in document.text
    assert document.pages == 20


# -- docx ------------------------------------------------------------------------------------------------


def test_a_docx_gives_headings_paragraphs_lists_and_tables_in_order() -> None:
    made = docx.Document()
    made.core_properties.title = "Trip plan"
    made.add_heading("Trip to Kazan", 0)
    made.add_heading("Budget", 1)
    made.add_paragraph("We keep the hotel under 6000 roubles a night.")
    made.add_paragraph("Book the train", style="List Bullet")
    table = made.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Item", "Cost"
    table.cell(1, 0).text, table.cell(1, 1).text = "Hotel", "12000"
    made.add_paragraph("Встреча в 9 утра у вокзала.")
    out = io.BytesIO()
    made.save(out)

    document = extract_text(out.getvalue(), filename="plan.docx", mime_type=None)

    assert document.kind == "docx" and document.pages is None
    assert document.title == "Trip plan"
    text = document.text
    assert "# Trip to Kazan" in text and "\n# Budget" in text
    assert "We keep the hotel under 6000 roubles a night." in text
    assert "- Book the train" in text
    assert "| Hotel | 12000 |" in text
    assert "Встреча в 9 утра у вокзала." in text
    assert text.index("Budget") < text.index("| Item | Cost |") < text.index("Встреча")


def test_a_damaged_docx_is_refused_in_one_line() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("word/document.xml", "<not really xml")
    assert _error(out.getvalue(), "broken.docx").startswith("docx: corrupt")


# -- CSV -------------------------------------------------------------------------------------------------


def test_a_semicolon_csv_becomes_one_self_contained_line_per_row() -> None:
    data = b"date;amount;payee\n2026-01-03;12,50;Lenta\n2026-01-04;7,00;Metro\n"
    document = extract_text(data, filename="spend.csv", mime_type="text/csv")
    assert document.kind == "csv" and not document.truncated
    assert document.text.splitlines() == [
        "columns: date | amount | payee",
        "[row 2] date: 2026-01-03 | amount: 12,50 | payee: Lenta",
        "[row 3] date: 2026-01-04 | amount: 7,00 | payee: Metro",
    ]


def test_a_cp1251_csv_with_quotes_and_a_tab_file_are_read() -> None:
    data = 'Имя,Город,Заметка\nАнна,Москва,"дом, работа"\n'.encode("cp1251")
    document = extract_text(data, filename="contacts.csv", mime_type=None)
    assert "[row 2] Имя: Анна | Город: Москва | Заметка: дом, работа" in document.text

    tsv = extract_text(b"a\tb\n1\t2\n", filename="t.tsv", mime_type=None)
    assert "[row 2] a: 1 | b: 2" in tsv.text


def test_a_csv_longer_than_the_row_cap_is_cut_and_flagged() -> None:
    from teleton.media.documents_text import csv_text

    data = ("n,square\n" + "".join(f"{n},{n * n}\n" for n in range(1, 501))).encode()
    document = csv_text(data, max_chars=100_000, max_rows=100)
    assert document.truncated and document.note and "100 rows" in document.note
    assert "[row 101] n: 100 | square: 10000" in document.text
    assert "n: 101 " not in document.text


# -- text ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "cp1251", "koi8_r", "cp866"])
def test_russian_text_is_decoded_in_every_encoding_it_commonly_arrives_in(encoding: str) -> None:
    document = extract_text(RUSSIAN.encode(encoding), filename="note.txt", mime_type="text/plain")
    assert document.kind == "text"
    assert document.text == RUSSIAN


def test_western_legacy_text_is_not_mistaken_for_cyrillic() -> None:
    text = "Le café est fermé. Müller aß Käse am Straßenrand, déjà vu.\n"
    assert extract_text(text.encode("cp1252"), filename="fr.txt", mime_type=None).text == text


def test_windows_line_endings_and_a_stray_byte_in_utf8_are_tolerated() -> None:
    data = "строка один\r\nстрока два ".encode() + b"\xff" + "конец\r\n".encode()
    document = extract_text(data, filename="app.log", mime_type=None)
    assert document.text == "строка один\nстрока два \ufffdконец\n"


def test_markdown_json_and_nameless_text_are_text() -> None:
    assert extract_text(b"# Notes\n- milk\n", filename="notes.md", mime_type=None).text == "# Notes\n- milk\n"
    assert extract_text(b'{"a": 1}', filename="data.json", mime_type="application/json").kind == "text"
    assert extract_text(b"plain words", filename="README", mime_type=None).text == "plain words"


def test_max_chars_truncates_text_and_sets_the_flag() -> None:
    data = ("ёжик " * 10_000).encode()
    document = extract_text(data, filename="long.txt", mime_type=None, max_chars=1000)
    assert document.truncated
    assert document.text == ("ёжик " * 200)[:1000]
    short = extract_text("ёжик".encode(), filename="short.txt", mime_type=None, max_chars=4)
    assert short.text == "ёжик" and not short.truncated


# -- refused kinds ---------------------------------------------------------------------------------------


def test_unsupported_kinds_are_refused_naming_the_kind() -> None:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as made:
        made.writestr("photos/readme.txt", "hello")
    assert "ZIP archive" in _error(archive.getvalue(), "photos.zip", "application/zip")
    assert "ZIP archive" in _error(archive.getvalue(), "innocent.txt", "text/plain")  # content beats name
    assert "Windows executable" in _error(b"MZ\x90\x00" + bytes(200), "setup.exe")
    assert "legacy Office" in _error(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(500), "old.doc")
    assert "PNG image" in _error(b"\x89PNG\r\n\x1a\n" + bytes(50), "pic.png")
    assert "binary .dat file" in _error(bytes(range(256)) * 4, "blob.dat")
    assert "empty" in _error(b"", "nothing.txt")

    xlsx = io.BytesIO()
    with zipfile.ZipFile(xlsx, "w") as made:
        made.writestr("xl/workbook.xml", "<workbook/>")
    assert "Excel" in _error(xlsx.getvalue(), "table.xlsx")


def test_the_kind_is_known_from_the_name_before_download_and_from_the_bytes_after() -> None:
    assert kind_from_name("a.PDF", None) == "pdf"
    assert kind_from_name("x", "text/csv; charset=utf-8") == "csv"
    assert kind_from_name("movie.mkv", "video/x-matroska") is None
    assert detect_kind(b"a;b\n1;2\n", filename="t.csv", mime_type=None) == "csv"
    assert isinstance(extract_text(b"x", filename="x.txt", mime_type=None), ExtractedDocument)
