"""OCR with the real tesseract binary (``make ocr-tools``): scans of generated invoices
read back, a skewed scan, a multi-page TIFF and PDF pages without text.

Nothing here mocks tesseract; a missing binary fails these tests (it is never a skip).
Each recognition takes one to three seconds on one core (``OMP_THREAD_LIMIT=1``).
"""

from __future__ import annotations

import io

import pytest
from PIL import Image
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen.canvas import Canvas

from benchmarks.invoices.generator import generate_invoice
from pipeline.documents import MediaType, read_document, sniff_media_type
from pipeline.settings import Settings
from tests.support.scans import char_accuracy, encode, render_text, word_recall

pytestmark = pytest.mark.ocr

SETTINGS = Settings()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _read(data: bytes, settings: Settings = SETTINGS):  # type: ignore[no-untyped-def]
    return read_document(data, sniff_media_type(data, max_bytes=1 << 30), settings)


@pytest.mark.parametrize("seed", [7, 12, 24])  # German key-value, French columns, Polish prose
def test_a_scanned_generated_invoice_reads_back(seed: int) -> None:
    invoice = generate_invoice(seed, max_line_items=6)
    assert invoice.truth.invoice_number and invoice.truth.gross_total
    document = _read(encode(render_text(invoice.ocr_text)))
    page = document.pages[0]
    accuracy = char_accuracy(invoice.ocr_text, document.text)
    recall = word_recall(invoice.ocr_text, document.text)
    print(f"seed {seed} ({invoice.language}): characters {accuracy:.3f}, words {recall:.3f}")
    assert accuracy >= 0.93
    assert recall >= 0.85
    assert invoice.truth.invoice_number.value in document.text
    assert _flat(invoice.truth.gross_total.evidence.quote) in _flat(document.text)
    assert document.ocr_pages == (1,)
    assert document.mean_confidence is not None and document.mean_confidence > 80
    assert page.ocr is not None and page.ocr.dpi == pytest.approx(300)
    assert all(page.text[w.start : w.end] == w.text for w in page.words)
    # boxes in points: a 300-dpi image is 72/300 of its pixels
    assert page.width == pytest.approx(page.ocr.width * 72 / 300)
    assert all(
        w.box is not None and 0 <= w.box.left < w.box.right <= page.width for w in page.words
    )


def test_table_columns_stay_columns() -> None:
    invoice = generate_invoice(7, max_line_items=6)
    document = _read(encode(render_text(invoice.ocr_text)))
    header = next(line for line in document.text.splitlines() if "Einzelpreis" in line)
    row = next(line for line in document.text.splitlines() if "Stahlwinkel" in line)
    # the unit price ends under its header's right edge, within two characters
    assert abs(row.index("3.33") + 4 - (header.index("Einzelpreis") + 11)) <= 2


def test_a_scan_skewed_by_three_degrees_is_levelled_and_read() -> None:
    invoice = generate_invoice(7, max_line_items=6)
    document = _read(encode(render_text(invoice.ocr_text, angle=3.0)))
    page = document.pages[0]
    assert page.ocr is not None and page.ocr.skew == pytest.approx(-3.0, abs=0.5)
    assert page.ocr.rotation == 0
    accuracy = char_accuracy(invoice.ocr_text, document.text)
    print(f"skewed 3 degrees: characters {accuracy:.3f}")
    assert accuracy >= 0.9
    assert "RE/2023/663" in document.text
    assert "4'976.87" in document.text


@pytest.mark.parametrize("turned", [90, 180])
def test_a_page_scanned_sideways_or_upside_down_is_turned_upright(turned: int) -> None:
    """No EXIF tag says so: tesseract's orientation detection finds the quarter turn."""
    invoice = generate_invoice(7, max_line_items=6)
    image = render_text(invoice.ocr_text).rotate(turned, expand=True)  # counter-clockwise
    document = _read(encode(image))
    page = document.pages[0]
    assert page.ocr is not None and page.ocr.rotation == turned
    assert page.ocr.skew == 0.0
    assert "RE/2023/663" in document.text
    assert char_accuracy(invoice.ocr_text, document.text) >= 0.93


def test_a_photo_at_low_resolution_is_upscaled() -> None:
    """A 100-dpi image (text about 12 px high) is read after upscaling to 300 dpi."""
    image = render_text("Invoice No. INV-2025-4417\nTotal due: 1,234.56 EUR", dpi=100, points=11)
    document = _read(encode(image, "JPEG", dpi=100))
    page = document.pages[0]
    assert page.ocr is not None and page.ocr.width == image.width * 3
    assert "INV-2025-4417" in document.text and "1,234.56" in document.text


def test_every_page_of_a_multi_page_tiff_is_read() -> None:
    pages = [render_text(f"Page {n} of invoice RE-2026-{n}0{n}") for n in (1, 2, 3)]
    out = io.BytesIO()
    pages[0].save(out, format="TIFF", save_all=True, append_images=pages[1:], dpi=(300, 300))
    data = out.getvalue()
    assert sniff_media_type(data, max_bytes=1 << 30) is MediaType.TIFF
    document = _read(data)
    assert document.ocr_pages == (1, 2, 3)
    for number, page in enumerate(document.pages, 1):
        assert f"RE-2026-{number}0{number}" in page.text


def _pdf_with_a_scanned_page(scan: Image.Image) -> bytes:
    out = io.BytesIO()
    canvas = Canvas(out, pagesize=A4, invariant=True)
    canvas.setFont("Helvetica", 12)
    canvas.drawString(72, 770, "Cover letter: invoice attached")
    canvas.showPage()
    width, height = scan.width * 72 / 300, scan.height * 72 / 300
    canvas.drawImage(ImageReader(scan), 36, A4[1] - 36 - height, width, height)
    canvas.showPage()
    canvas.save()
    return out.getvalue()


def test_a_pdf_page_without_text_is_rendered_and_read() -> None:
    invoice = generate_invoice(12, max_line_items=4)
    data = _pdf_with_a_scanned_page(render_text(invoice.ocr_text))
    document = _read(data)
    assert document.ocr_pages == (2,)
    first, second = document.pages
    assert first.ocr is None and "Cover letter" in first.text
    assert first.words[0].confidence is None
    assert second.ocr is not None and invoice.truth.invoice_number is not None
    assert invoice.truth.invoice_number.value in second.text
    assert char_accuracy(invoice.ocr_text, second.text) >= 0.9
    # the rendered page is A4 in points, and every word lies on it
    assert second.width == pytest.approx(A4[0], abs=1)
    assert second.height == pytest.approx(A4[1], abs=1)
    assert all(w.box is not None and w.box.right <= A4[0] for w in second.words)


def test_a_pdf_without_any_text_layer_is_read_by_ocr() -> None:
    scan = render_text("Rechnung Nr. RE-2026-0815\nGesamtbetrag EUR 99,95")
    out = io.BytesIO()
    canvas = Canvas(out, pagesize=A4, invariant=True)
    canvas.drawImage(ImageReader(scan), 36, 600, scan.width * 72 / 300, scan.height * 72 / 300)
    canvas.showPage()
    canvas.save()
    document = _read(out.getvalue())
    assert document.ocr_pages == (1,)
    assert "RE-2026-0815" in document.text and "99,95" in document.text


#: A table of the generated invoices' "columns" layout: a column of "%" signs (which
#: tesseract's automatic layout analysis read as vertical text, "dP") and amounts with a
#: decimal comma (which it cut at the comma: "41396," | "42").
_TABLE = """\
Articolo                                    Q.tà      Prezzo un.     IVA       Importo
Consulenza                             13,75 ore          100,88    22 %       1387,10
Trasporto e imballo                        1 pz.          264,95    22 %        264,95
Hosting cloud, mensile                     4 pz.         1995,98    22 %       7983,92
Traduzione, a parola                 8896 parole           0,086    22 %        765,06
Hosting cloud, mensile                     2 pz.         1532,85    22 %       3065,70
Guanti di sicurezza, taglia 9            536 pz.            4,48    22 %       2401,28
Licenza software annuale                   5 pz.         3793,55    10 %      18967,75
Squadretta in acciaio 40 mm             1633 pz.            0,88    22 %       1437,04
----------------------------------------
                           Totale imponibile                        41396,42
                           IVA 22 % su 19810,88                      4358,39
                           IVA 10 % su 18967,75                      1896,78
                           Totale IVA                                6359,88
"""


def test_a_150_dpi_noisy_scan_reads_its_rates_and_decimal_amounts() -> None:
    from benchmarks.invoices.files import ScanSettings, pdf_bytes, scan_bytes

    scan = ScanSettings(dpi=150, skew=0.4, blur=0.33, noise=9.0, jpeg_quality=70, format="PNG")
    settings = Settings(ocr_languages="ita", ocr_detect_orientation=False)
    document = _read(scan_bytes(pdf_bytes(_TABLE), scan, seed=5001), settings)
    rows = [" ".join(line.split()) for line in document.text.splitlines()]
    assert "dP" not in document.text
    # every amount read whole (the decimals not cut off at the comma), every rate a rate
    for amount in ("1387,10", "7983,92", "3065,70", "2401,28", "18967,75", "41396,42", "6359,88"):
        assert amount in document.text.split(), amount
    assert sum(row.count("22 %") for row in rows) >= 7


def test_words_read_uncertainly_in_their_row_are_read_again_alone() -> None:
    # The same 150-dpi table: read as one block of rows, tesseract gives 12 of its "22"
    # and "%" words 85-90 (21 of its 98 words under 90); read again alone, alike and sure.
    from benchmarks.invoices.files import ScanSettings, pdf_bytes, scan_bytes

    scan = ScanSettings(dpi=150, skew=0.4, blur=0.33, noise=9.0, jpeg_quality=70, format="PNG")
    settings = Settings(ocr_languages="ita", ocr_detect_orientation=False, ocr_page_seconds=600)
    document = _read(scan_bytes(pdf_bytes(_TABLE), scan, seed=5001), settings)
    words = [w for page in document.pages if page.ocr for w in page.ocr.words]
    rates = [w for w in words if w.text in ("22", "%")]
    assert len(rates) >= 14
    assert min(w.confidence for w in rates) >= 90
    assert sum(w.confidence < 90 for w in words) <= 8
    # only confidences move: every word is still a printed one or one OCR read before
    printed = set(_TABLE.split())
    assert sum(w.text in printed for w in words) >= 90
