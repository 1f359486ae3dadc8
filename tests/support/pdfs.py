"""PDFs and images drawn for tests: an invoice's text as a text-layer PDF, a PNG.

A generated invoice's OCR text becomes a PDF with one ``drawString`` per line in a
monospaced font (form feeds start new pages), so the PDF's text layer reads back
as the same lines: what a PDF printed from an ERP is to the document stage.
"""

from __future__ import annotations

import io
import struct
import zlib

from reportlab.lib.pagesizes import A4
from reportlab.pdfgen.canvas import Canvas

FONT_SIZE = 8
LEADING = 10


def text_pdf(text: str) -> bytes:
    """``text`` as a PDF: a page per form-feed-separated part, a line per line."""
    out = io.BytesIO()
    canvas = Canvas(out, pagesize=A4, invariant=True)
    _, height = A4
    for page in text.split("\f"):
        canvas.setFont("Courier", FONT_SIZE)
        y = height - 40
        for line in page.split("\n"):
            if y < 30:
                canvas.showPage()
                canvas.setFont("Courier", FONT_SIZE)
                y = height - 40
            canvas.drawString(30, y, line)
            y -= LEADING
        canvas.showPage()
    canvas.save()
    return out.getvalue()


def blank_pdf(pages: int = 1) -> bytes:
    """A PDF with pages and no text layer (a scan would look like this to PDFium)."""
    out = io.BytesIO()
    canvas = Canvas(out, pagesize=A4, invariant=True)
    for _ in range(pages):
        canvas.rect(50, 50, 100, 40)
        canvas.showPage()
    canvas.save()
    return out.getvalue()


def tiny_png() -> bytes:
    """A valid 1×1 grey PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x80")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )
