"""An OCR'd page's evidence boxes over its image: the page view shows a scan turned as
OCR read it (upright by quarter turns, levelled by its skew), the frame its words'
boxes are fractions of.

Where a word must be is worked out from how the test page was drawn: a block or a
line of DejaVu Sans Mono at a known place on an upright page, then turned by a known
angle on a grown canvas (a skewed feed) and a quarter turn (fed sideways). Levelling
the page again brings the drawing back to where it was, shifted by half of what the
canvas grew, not from the code that turns pages.
"""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image, ImageDraw, ImageFont

from pipeline.documents import (
    MediaType,
    kept_turns,
    kept_words,
    page_png,
    read_document,
    span_rects,
    words_to_keep,
)
from pipeline.documents.page_image import normalise
from pipeline.settings import Settings
from tests.support.pdfs import blank_pdf
from tests.support.scans import FONT, encode

ANGLE = 3.0  # degrees, counter-clockwise: a skewed feed

Edges = tuple[float, float, float, float]


def _ink(image: Image.Image) -> Edges:
    """The box of the image's ink (darker than mid-gray) as fractions of its size."""
    gray = image.convert("L")
    box = gray.point(lambda v: 255 if v < 128 else 0).getbbox()
    assert box is not None
    left, top, right, bottom = box
    return (left / gray.width, top / gray.height, right / gray.width, bottom / gray.height)


def _skewed_sideways(upright: Image.Image) -> tuple[Image.Image, tuple[int, int]]:
    """``upright`` fed ``ANGLE`` askew and sideways; and the size the skew grew it to."""
    skewed = upright.rotate(ANGLE, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    return skewed.rotate(90, expand=True), skewed.size


def _where_drawn(edges: Edges, upright: tuple[int, int], skewed: tuple[int, int]) -> Edges:
    """Pixel ``edges`` drawn on an ``upright`` page, as fractions of the page levelled
    again: the skew turned back about the centre of the grown ``skewed`` canvas."""
    dx, dy = (skewed[0] - upright[0]) / 2, (skewed[1] - upright[1]) / 2
    left, top, right, bottom = edges
    w, h = skewed
    return ((left + dx) / w, (top + dy) / h, (right + dx) / w, (bottom + dy) / h)


def _png(data: bytes, turn: tuple[int, float] | None = None) -> Image.Image:
    """The page view's image of the scan ``data``, turned by ``turn``."""
    png = page_png(data, MediaType.PNG, 1, max_pages=10, max_pixels=50_000_000, turn=turn)
    return Image.open(io.BytesIO(png))


def _approx(edges: Edges, tolerance: float) -> list[object]:
    return [pytest.approx(v, abs=tolerance) for v in edges]


def test_the_view_of_a_skewed_sideways_scan_is_the_image_ocr_read() -> None:
    upright = Image.new("L", (1240, 1754), 255)  # A4 at 150 dpi
    block = (300, 400, 700, 440)
    ImageDraw.Draw(upright).rectangle(block, fill=0)
    scan, grown = _skewed_sideways(upright)
    expected = _where_drawn((300, 400, 701, 441), upright.size, grown)

    read = normalise(
        scan, number=1, dpi=300.0, target_dpi=300, max_pixels=10**8, orient=lambda _: 90
    )
    assert read.rotation == 90 and read.skew == pytest.approx(-ANGLE, abs=0.25)
    # OCR's frame: the block back where it was drawn (within 3 px of 1300).
    assert list(_ink(read.image)) == _approx(expected, 0.003)

    data = encode(scan, dpi=300)
    view = _png(data, (90, read.skew))
    assert view.height == 1600
    assert view.width == pytest.approx(1600 * read.image.width / read.image.height, abs=2)
    assert list(_ink(view)) == _approx(expected, 0.003)
    # The file as it came is another frame: a box of OCR's would miss its ink there.
    plain = _png(data)
    assert plain.width > plain.height
    assert max(abs(a - b) for a, b in zip(_ink(plain), expected, strict=True)) > 0.05


@pytest.mark.ocr
def test_a_words_box_on_a_skewed_sideways_scan_lands_where_it_was_drawn() -> None:
    dpi, size = 300, round(9 * 300 / 72)
    font = ImageFont.truetype(FONT, size)
    # enough lines for tesseract's orientation detection to trust its turn
    lines = [
        "Invoice number INV-2025-4417",
        "",
        "Amount due: 1.234,56 EUR",
        "",
        "Payment terms: 30 days net.",
        "Delivery date: 2 November 2026",
        "Customer ID: K-2205, your order 4595038700",
        "Nordlys Handel A/S, Market Street 5, York",
        "We appreciate your order.",
    ]
    margin, pitch, advance = dpi // 3, round(size * 1.35), font.getlength("M")
    upright = Image.new("L", (round(advance * 44) + 2 * margin, 12 * pitch + 2 * margin), 255)
    draw = ImageDraw.Draw(upright)
    for index, line in enumerate(lines):
        draw.text((margin, margin + index * pitch), line, font=font, fill=0)
    scan, grown = _skewed_sideways(upright)
    data = encode(scan, dpi=dpi)

    document = read_document(data, MediaType.PNG, Settings())
    kept = json.loads(json.dumps(words_to_keep(document)))  # as jsonb keeps it
    ((rotation, skew),) = kept_turns(kept).values()
    assert rotation == 90 and skew == pytest.approx(-ANGLE, abs=0.25)
    page = kept_words(kept, document.text)[1]
    start = page.text.index("1.234,56")
    (rect,) = span_rects(page, start, start + len("1.234,56"))

    column, row = lines[2].index("1.234,56"), 2
    left = margin + advance * column
    drawn_left, line_top, drawn_right, line_bottom = _where_drawn(
        (left, margin + row * pitch, left + advance * 8, margin + (row + 1) * pitch),
        upright.size,
        grown,
    )
    char = advance / grown[0]
    # The box's ends within half a character of the drawn amount's, its middle on
    # the drawn line (a line is ``pitch`` high: a neighbouring line is far off).
    assert rect.left == pytest.approx(drawn_left, abs=char / 2)
    assert rect.right == pytest.approx(drawn_right, abs=char / 2)
    assert line_top < (rect.top + rect.bottom) / 2 < line_bottom

    # The page view's image is in that frame: the box holds the amount's ink.
    view = _png(data, (rotation, skew))
    w, h = view.size
    inside = view.crop(
        (round(rect.left * w), round(rect.top * h), round(rect.right * w), round(rect.bottom * h))
    )
    assert inside.convert("L").point(lambda v: 255 if v < 100 else 0).getbbox() is not None


def test_a_pdf_page_ocr_read_is_turned_as_read() -> None:
    pdf = blank_pdf()  # no text layer: OCR reads it, rendered, A4 upright
    png = page_png(pdf, MediaType.PDF, 1, max_pages=10, max_pixels=50_000_000)
    upright = Image.open(io.BytesIO(png))
    turned = page_png(pdf, MediaType.PDF, 1, max_pages=10, max_pixels=50_000_000, turn=(90, 0.0))
    sideways = Image.open(io.BytesIO(turned))
    assert sideways.size == (upright.height, upright.width)
    # A skew turns it on its own canvas: the size stays, the corners come in white.
    levelled = page_png(pdf, MediaType.PDF, 1, max_pages=10, max_pixels=50_000_000, turn=(0, 3.0))
    image = Image.open(io.BytesIO(levelled)).convert("L")
    assert image.size == upright.size
    assert image.getpixel((0, 0)) == 255 and image.getpixel((image.width - 1, 0)) == 255
