"""Evidence spans as rectangles on the page (issue 43, the page view): a PDF drawn
with reportlab in Courier 8 pt (tests/support/pdfs.py), whose geometry is known in
advance, read as the document stage reads it, then spans mapped to rectangles."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from pipeline.documents import (
    DocumentPage,
    DocumentText,
    MediaType,
    Rect,
    kept_page_words,
    kept_turns,
    kept_words,
    page_png,
    read_document,
    span_rects,
    words_to_keep,
)
from pipeline.documents.ocr import OcrPage, OcrWord, PixelBox
from pipeline.documents.page_png import MAX_SIDE
from pipeline.errors import NotFound
from pipeline.settings import Settings
from tests.support.pdfs import blank_pdf, text_pdf, tiny_png
from tests.support.scans import encode, render_text

TEXT = "Invoice 42\nTotal      10.00 EUR\nVAT 19 %\fPage two"
PDF = text_pdf(TEXT)
# A4 in points; text_pdf's first baseline is 40 pt below the top, then one line per
# 10 pt, from x = 30 pt; a Courier character is 600/1000 em: 4.8 pt at 8 pt.
WIDTH, HEIGHT = 595.2756, 841.8898
CHAR = 4.8
# PDFium's loose character box reaches the font's ascent above the baseline and its
# descent below it (Courier: 0.803 and 0.248 em).
ASCENT, DESCENT = 0.803 * 8, 0.248 * 8


def _expected(line: int, first: int, last: int) -> Rect:
    """The rectangle of columns ``first`` to ``last`` (exclusive) of drawn line ``line``."""
    baseline = 40 + 10 * line
    return Rect(
        (30 + first * CHAR) / WIDTH,
        (baseline - ASCENT) / HEIGHT,
        (30 + last * CHAR) / WIDTH,
        (baseline + DESCENT) / HEIGHT,
    )


# Within 0.1 pt: a glyph may reach a hair past its advance box (a "V" 0.024 pt left).
def _approx(rects: tuple[Rect, ...]) -> list[tuple[object, ...]]:
    return [
        tuple(pytest.approx(v, abs=0.1 / HEIGHT) for v in (r.left, r.top, r.right, r.bottom))
        for r in rects
    ]


def _pages() -> dict[int, DocumentPage]:
    kept = read_document(PDF, MediaType.PDF, Settings()).text
    return kept_page_words(PDF, MediaType.PDF, kept, max_pages=10)


def _rects(rects: tuple[Rect, ...]) -> list[tuple[object, ...]]:
    return [(r.left, r.top, r.right, r.bottom) for r in rects]


def test_a_span_of_two_words_is_one_rectangle_over_them() -> None:
    page = _pages()[1]
    start = page.text.index("10.00 EUR")
    # "10.00" is drawn from column 11 of line 1, "EUR" ends at column 20.
    assert _rects(span_rects(page, start, start + 9)) == _approx((_expected(1, 11, 20),))


def test_a_span_inside_a_word_is_cut_by_its_share_of_characters() -> None:
    page = _pages()[1]
    start = page.text.index("10.00") + 1
    assert _rects(span_rects(page, start, start + 3)) == _approx((_expected(1, 12, 15),))


def test_a_span_over_lines_is_a_rectangle_per_line() -> None:
    page = _pages()[1]
    start, end = page.text.index("42"), page.text.index("VAT") + 3
    assert _rects(span_rects(page, start, end)) == _approx(
        (_expected(0, 8, 10), _expected(1, 0, 20), _expected(2, 0, 3))
    )


def test_offsets_are_the_pages_own_after_a_page_break() -> None:
    page = _pages()[2]
    assert _rects(span_rects(page, 5, 8)) == _approx((_expected(0, 5, 8),))
    assert span_rects(page, 8, 20) == ()


def test_a_page_whose_text_is_not_the_kept_one_gives_no_words() -> None:
    kept = read_document(PDF, MediaType.PDF, Settings()).text
    changed = kept.replace("Total      10.00", "Total 10.00")
    assert sorted(kept_page_words(PDF, MediaType.PDF, changed, max_pages=10)) == [2]


def test_pages_read_by_ocr_and_text_pages_give_no_words() -> None:
    assert kept_page_words(blank_pdf(), MediaType.PDF, "anything", max_pages=10) == {}
    assert kept_page_words(tiny_png(), MediaType.PNG, "anything", max_pages=10) == {}
    text_page = DocumentPage(1, None, None, "Total 10.00", ())
    assert span_rects(text_page, 0, 5) == ()


def test_a_pdf_page_renders_as_a_png_of_the_pages_proportions() -> None:
    data = page_png(PDF, MediaType.PDF, 2, max_pages=10, max_pixels=50_000_000)
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG" and image.height == MAX_SIDE
    assert image.width == pytest.approx(MAX_SIDE * WIDTH / HEIGHT, abs=1)


def test_a_page_past_the_last_or_of_a_text_is_not_found() -> None:
    with pytest.raises(NotFound):
        page_png(PDF, MediaType.PDF, 3, max_pages=10, max_pixels=50_000_000)
    with pytest.raises(NotFound):
        page_png(PDF, MediaType.PDF, 0, max_pages=10, max_pixels=50_000_000)
    with pytest.raises(NotFound):
        page_png(tiny_png(), MediaType.PNG, 2, max_pages=10, max_pixels=50_000_000)
    with pytest.raises(NotFound):
        page_png(b"Total 10.00", MediaType.TEXT, 1, max_pages=10, max_pixels=50_000_000)
    image = Image.open(
        io.BytesIO(page_png(tiny_png(), MediaType.PNG, 1, max_pages=10, max_pixels=100))
    )
    assert image.size == (1, 1)


def test_a_tiff_frame_is_its_page_and_a_big_scan_is_shrunk_to_fit() -> None:
    frames = [Image.new("L", (100 + 10 * n, 50), 255) for n in range(3)]
    frames[1] = Image.new("L", (2400, 3200), 255)
    out = io.BytesIO()
    frames[0].save(out, format="TIFF", save_all=True, append_images=frames[1:])
    tiff = out.getvalue()
    pages = [
        Image.open(io.BytesIO(page_png(tiff, MediaType.TIFF, n, max_pages=10, max_pixels=10**8)))
        for n in (1, 2, 3)
    ]
    assert [p.size for p in pages] == [(100, 50), (1200, MAX_SIDE), (120, 50)]
    with pytest.raises(NotFound):
        page_png(tiff, MediaType.TIFF, 4, max_pages=10, max_pixels=10**8)


def test_kept_words_round_trip_and_draw_what_the_text_layer_draws() -> None:
    document = read_document(PDF, MediaType.PDF, Settings())
    stored = json.loads(json.dumps(words_to_keep(document)))  # as jsonb keeps it
    pages = kept_words(stored, document.text)
    assert sorted(pages) == [1, 2]
    for read in document.pages:
        kept = pages[read.number]
        assert kept.text == read.text
        assert [(w.text, w.start, w.end) for w in kept.words] == [
            (w.text, w.start, w.end) for w in read.words
        ]
    start = TEXT.index("10.00")
    assert _rects(span_rects(pages[1], start, start + 9)) == _approx((_expected(1, 11, 20),))


def test_kept_words_of_another_text_or_format_give_no_page() -> None:
    document = read_document(PDF, MediaType.PDF, Settings())
    stored = words_to_keep(document)
    shorter = document.text.replace("Total      10.00 EUR", "Total")
    assert sorted(kept_words(stored, shorter)) == [2]
    assert kept_words({**stored, "version": 0}, document.text) == {}


@pytest.mark.ocr
def test_an_ocr_page_without_a_resolution_keeps_its_boxes_as_fractions() -> None:
    text = "Invoice No. INV-2025-4417\nTotal due: 1,234.56 EUR"
    image = render_text(text, dpi=300)
    document = read_document(encode(image, dpi=None), MediaType.PNG, Settings())
    assert document.pages[0].width is None  # no points: the page view had no box
    pages = kept_words(json.loads(json.dumps(words_to_keep(document))), document.text)
    page = pages[1]
    assert all(w.confidence is not None and w.confidence > 50 for w in page.words)
    start = page.text.index("INV-2025-4417")
    (rect,) = span_rects(page, start, start + len("INV-2025-4417"))
    # the number's ink: the second half of the first of two lines, a third of a
    # margin's inch in from the image's edges
    assert 0.3 < rect.left < 0.6 < rect.right < 1 and 0 < rect.top < rect.bottom < 0.5


def _ocr_document() -> DocumentText:
    """A text-layer page and a page OCR read, turned a quarter and 2.5° to level it."""
    text = "Total 10.00"
    words = (
        OcrWord("Total", 0, 5, PixelBox(100, 200, 300, 240), 96.0, 1, 1),
        OcrWord("10.00", 6, 11, PixelBox(400, 200, 600, 240), 91.0, 1, 1),
    )
    ocr = OcrPage(2, 1000, 800, None, 90, -2.5, text, words, ())
    scanned = DocumentPage(2, None, None, text, (), ocr)
    return DocumentText((read_document(PDF, MediaType.PDF, Settings()).pages[0], scanned))


def test_an_ocr_pages_turn_is_kept_with_its_words_and_a_text_layers_has_none() -> None:
    document = _ocr_document()
    stored = json.loads(json.dumps(words_to_keep(document)))  # as jsonb keeps it
    assert stored["version"] == 3
    assert kept_turns(stored) == {2: (90, -2.5)}
    pages = kept_words(stored, document.text)
    assert sorted(pages) == [1, 2]
    # fractions of the image OCR read (1000 x 800 pixels), the frame the turn gives
    assert _rects(span_rects(pages[2], 6, 11)) == [(0.4, 0.25, 0.6, 0.3)]


def test_an_ocr_page_kept_without_its_turn_gives_no_words() -> None:
    document = _ocr_document()
    stored = words_to_keep(document)
    before = {  # format 2: no turn; its boxes may lie in another frame than the file's
        "version": 2,
        "pages": [{k: v for k, v in p.items() if k != "turn"} for p in stored["pages"]],
    }
    assert sorted(kept_words(before, document.text)) == [1]
    assert kept_turns(before) == {}
    assert kept_turns(None) == {} and kept_turns({**stored, "version": 0}) == {}
