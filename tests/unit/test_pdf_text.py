"""The text layer of PDFs: words with offsets and boxes, and every refusal by name.

PDFs are made here with reportlab (and encrypted with pypdf), so each test knows
what is on the page and where; the vendored real e-invoice PDFs check the reader on
files nobody here made.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen.canvas import Canvas

from pipeline.documents import PdfText, read_pdf_text
from pipeline.errors import DocumentOverLimit, DocumentRefused, NoTextLayer

EINVOICES = Path(__file__).resolve().parents[1] / "data" / "einvoices"
WIDTH, HEIGHT = A4

#: (x, y from the bottom, text) per page, as reportlab draws them.
Page = list[tuple[float, float, str]]


def _pdf(*pages: Page) -> bytes:
    out = io.BytesIO()
    canvas = Canvas(out, pagesize=A4, invariant=True)
    for page in pages:
        canvas.setFont("Helvetica", 12)
        for x, y, text in page:
            canvas.drawString(x, y, text)
        canvas.rect(50, 50, 100, 40)  # a drawing is no text
        canvas.showPage()
    canvas.save()
    return out.getvalue()


def _encrypt(data: bytes, *, user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


INVOICE = _pdf(
    [(72, 770, "Invoice No. 2026-0042"), (72, 740, "Total due: 1,234.56 EUR")],
    [(300, 400, "Page two: IBAN DE89 3704 0044 0532 0130 00")],
)


def test_pages_text_and_words_with_offsets() -> None:
    text = read_pdf_text(INVOICE, max_pages=10)
    assert isinstance(text, PdfText)
    assert text.page_count == 2 and text.pages_without_text == ()
    first, second = text.pages
    assert (first.number, second.number) == (1, 2)
    assert (first.width, first.height) == pytest.approx((WIDTH, HEIGHT))
    assert first.text.splitlines() == ["Invoice No. 2026-0042", "Total due: 1,234.56 EUR"]
    assert [w.text for w in first.words] == [
        "Invoice", "No.", "2026-0042", "Total", "due:", "1,234.56", "EUR",
    ]  # fmt: skip
    assert "DE89 3704 0044 0532 0130 00" in second.text
    for page in text.pages:
        for word in page.words:
            assert page.text[word.start : word.end] == word.text


def test_word_boxes_are_in_points_from_the_top_left() -> None:
    page = read_pdf_text(INVOICE, max_pages=10).pages[0]
    invoice, total, due = page.words[0], page.words[3], page.words[4]
    baseline = HEIGHT - 770  # reportlab's y counts from the bottom
    assert invoice.box.left == pytest.approx(72, abs=1)
    assert invoice.box.top < baseline < invoice.box.bottom
    assert invoice.box.bottom - invoice.box.top < 16  # about one 12-point line
    assert invoice.box.right - invoice.box.left == pytest.approx(40, abs=6)  # "Invoice"
    assert total.box.top > invoice.box.bottom  # the second line lies below the first
    assert due.box.left > total.box.right
    second = read_pdf_text(INVOICE, max_pages=10).pages[1].words[0]
    assert second.box.left == pytest.approx(300, abs=1)
    assert second.box.top < HEIGHT - 400 < second.box.bottom


def test_a_page_without_text_is_named_for_ocr() -> None:
    mixed = _pdf([(72, 770, "Invoice No. 7")], [], [(72, 770, "Terms")])
    assert read_pdf_text(mixed, max_pages=10).pages_without_text == (2,)


def test_no_text_on_any_page_is_no_text_layer() -> None:
    with pytest.raises(NoTextLayer) as raised:
        read_pdf_text(_pdf([], []), max_pages=10)
    assert raised.value.reason == raised.value.error_class == "no_text_layer"
    assert raised.value.page_count == 2


def test_a_password_protected_pdf_is_an_encrypted_document() -> None:
    with pytest.raises(DocumentRefused) as raised:
        read_pdf_text(_encrypt(INVOICE, user_password="user-secret"), max_pages=10)
    assert raised.value.reason == "encrypted_document"


def test_a_pdf_encrypted_only_against_editing_is_read() -> None:
    text = read_pdf_text(_encrypt(INVOICE, user_password=""), max_pages=10)
    assert text.pages[0].words[0].text == "Invoice"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"%PDF-1.7\nthis is not a PDF at all\n%%EOF\n",
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 64,
        INVOICE[:300],  # cut off after the header
        b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\ntrailer\n<< /Root 1 0 R >>",
    ],
)
def test_broken_bytes_are_an_unreadable_document(data: bytes) -> None:
    with pytest.raises(DocumentRefused) as raised:
        read_pdf_text(data, max_pages=10)
    assert raised.value.reason == "unreadable_document"


def test_more_pages_than_the_limit_are_refused_before_reading() -> None:
    three = _pdf([(72, 770, "one")], [(72, 770, "two")], [(72, 770, "three")])
    assert read_pdf_text(three, max_pages=3).page_count == 3
    with pytest.raises(DocumentOverLimit) as raised:
        read_pdf_text(three, max_pages=2)
    assert (raised.value.limit, raised.value.allowed, raised.value.actual) == ("pages", 2, 3)


@pytest.mark.parametrize(
    ("name", "pages", "printed"),
    [
        ("EN16931_Rabatte.pdf", 3, "471102"),
        ("XRECHNUNG_Einfach.pdf", 3, "Lieferant GmbH"),
        ("Avoir_FR_type381_BASIC.pdf", 1, "Avoir"),
        ("zugferd_2p0_EXTENDED_Kostenrechnung.pdf", 3, "KR87654321012"),
    ],
)
def test_real_e_invoice_pdfs_are_read(name: str, pages: int, printed: str) -> None:
    text = read_pdf_text((EINVOICES / name).read_bytes(), max_pages=50)
    assert text.page_count == pages
    assert printed in " ".join(page.text for page in text.pages)
    assert sum(len(page.words) for page in text.pages) > 50
    for page in text.pages:
        assert all(page.text[w.start : w.end] == w.text for w in page.words)
        assert all(0 <= w.box.left < w.box.right <= page.width + 1 for w in page.words)
        assert all(0 <= w.box.top < w.box.bottom <= page.height + 1 for w in page.words)
