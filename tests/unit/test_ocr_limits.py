"""OCR's limits and refusals: each a typed error, never a crash, never a skip.

Decompression bombs are refused from the header, before a pixel is decoded; too many
pages before any is read; a page past the time limit kills tesseract; a missing
binary names ``make ocr-tools``.
"""

from __future__ import annotations

import io
import struct
import time
import zlib

import pytest
from PIL import Image
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen.canvas import Canvas

from pipeline.documents import MediaType, ocr_languages, read_document
from pipeline.errors import (
    DocumentOverLimit,
    DocumentRefused,
    OcrPageTimeout,
    OcrUnavailable,
    RetryableError,
    TerminalError,
)
from pipeline.settings import Settings
from tests.support.scans import render_text

pytestmark = pytest.mark.ocr


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` gray pixels, followed by image
    data that is not the rest of such an image: decoding it would fail, so a refusal
    as ``image_too_large`` shows that the size was checked before any decoding."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 1024)
    return (
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("width", "height", "limit"),
    [
        (3000, 3000, 4_000_000),  # over Fenceline's limit, under Pillow's own
        (100_000, 100_000, 40_000_000),  # 10 gigapixels: over Pillow's too
    ],
)
def test_a_decompression_bomb_is_refused_before_decoding(
    width: int, height: int, limit: int
) -> None:
    data = _png_header(width, height)
    assert len(data) < 200
    began = time.monotonic()
    with pytest.raises(DocumentRefused) as raised:
        read_document(data, MediaType.PNG, Settings(max_document_page_pixels=limit))
    assert raised.value.reason == "image_too_large"
    assert time.monotonic() - began < 1.0


def test_the_same_truncated_png_within_the_limit_is_unreadable() -> None:
    """The control for the bomb test: under the pixel limit the bytes are decoded and fail."""
    with pytest.raises(DocumentRefused) as raised:
        read_document(_png_header(300, 300), MediaType.PNG, Settings())
    assert raised.value.reason == "unreadable_document"


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, MediaType.PNG),
        (b"\xff\xd8\xff\xe0" + b"garbage" * 100, MediaType.JPEG),
        (b"II*\x00" + b"\xff" * 300, MediaType.TIFF),
    ],
)
def test_garbage_is_an_unreadable_document(data: bytes, media_type: MediaType) -> None:
    with pytest.raises(DocumentRefused) as raised:
        read_document(data, media_type, Settings())
    assert raised.value.reason == "unreadable_document"


def test_a_tiff_of_more_pages_than_the_limit_is_refused_before_reading() -> None:
    pages = [render_text(f"page {n}", dpi=72) for n in range(3)]
    out = io.BytesIO()
    pages[0].save(out, format="TIFF", save_all=True, append_images=pages[1:])
    with pytest.raises(DocumentOverLimit) as raised:
        read_document(out.getvalue(), MediaType.TIFF, Settings(max_document_pages=2))
    assert (raised.value.limit, raised.value.allowed, raised.value.actual) == ("pages", 2, 3)


def test_every_frame_is_checked_before_any_is_read() -> None:
    """The third frame is over the pixel limit: it is refused before the first frame is
    recognised (and before tesseract is even looked for: this one does not exist)."""
    frames = [Image.new("L", (100, 100), 255), Image.new("L", (100, 100), 255)]
    out = io.BytesIO()
    big = Image.new("L", (3000, 3000), 255)
    frames[0].save(
        out,
        format="TIFF",
        save_all=True,
        append_images=[frames[1], big],
        compression="tiff_deflate",
    )
    settings = Settings(max_document_page_pixels=4_000_000, ocr_tesseract="/nonexistent/tesseract")
    with pytest.raises(DocumentRefused) as raised:
        read_document(out.getvalue(), MediaType.TIFF, settings)
    assert raised.value.reason == "image_too_large"


def test_a_pdf_page_too_large_to_render_is_refused() -> None:
    out = io.BytesIO()
    canvas = Canvas(out, pagesize=(A4[0] * 4, A4[1] * 4))  # 4 x A4 each way: 140 Mpx at 300 dpi
    canvas.rect(10, 10, 100, 100)
    canvas.showPage()
    canvas.save()
    with pytest.raises(DocumentRefused) as raised:
        read_document(out.getvalue(), MediaType.PDF, Settings())
    assert raised.value.reason == "image_too_large"


def test_a_page_past_the_time_limit_is_a_terminal_timeout() -> None:
    data = io.BytesIO()
    render_text("Invoice INV-1 total 10.00").save(data, format="PNG", dpi=(300, 300))
    began = time.monotonic()
    with pytest.raises(OcrPageTimeout) as raised:
        read_document(data.getvalue(), MediaType.PNG, Settings(ocr_page_seconds=0.01))
    assert raised.value.page == 1
    assert isinstance(raised.value, TerminalError)
    assert time.monotonic() - began < 5.0  # the child was killed, not waited for


def test_a_missing_tesseract_is_a_retryable_error_naming_the_make_target() -> None:
    settings = Settings(ocr_tesseract="/nonexistent/tesseract")
    with pytest.raises(OcrUnavailable) as raised:
        read_document(render_png(), MediaType.PNG, settings)
    assert isinstance(raised.value, RetryableError)
    assert "make ocr-tools" in str(raised.value)


def render_png() -> bytes:
    out = io.BytesIO()
    render_text("x", dpi=72).save(out, format="PNG")
    return out.getvalue()


def test_languages_are_the_configured_ones_that_are_installed() -> None:
    assert ocr_languages(Settings()) == "eng+deu+fra+ita+spa+nld+pol+swe+por+dan"
    assert ocr_languages(Settings(ocr_languages="deu+xxx+eng")) == "deu+eng"
    with pytest.raises(OcrUnavailable):
        ocr_languages(Settings(ocr_languages="xxx+yyy"))


def test_text_is_one_page_and_xml_is_not_read_here() -> None:
    document = read_document(b"Invoice 42\nTotal 1.00\n", MediaType.TEXT, Settings())
    assert document.text == "Invoice 42\nTotal 1.00\n" and document.ocr_pages == ()
    with pytest.raises(DocumentRefused) as raised:
        read_document(b"<Invoice/>", MediaType.XML, Settings())
    assert raised.value.reason == "unsupported_media_type"
    with pytest.raises(DocumentRefused) as raised:
        read_document(b"Total \xff", MediaType.TEXT, Settings())
    assert raised.value.reason == "unreadable_document"
