"""PDF pages as images, rendered with PDFium: for OCR (pages that carry no text) and
for the review console's page view.

Each page's pixel size is computed from its size in points before any is rendered and
refused over ``max_pixels`` (``image_too_large``): a PDF page can declare any size, and
rendering allocates width x height bytes at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pypdfium2 as pdfium
from PIL import Image

from pipeline.documents.page_image import check_pixels
from pipeline.documents.pdfium_lock import PDFIUM_LOCK
from pipeline.errors import DocumentOverLimit, DocumentRefused, NotFound


def render_pdf_pages(
    data: bytes, numbers: tuple[int, ...], *, dpi: int, max_pixels: int
) -> Iterator[tuple[int, Image.Image]]:
    """The pages ``numbers`` (1-based) of the PDF in ``data`` rendered at ``dpi``, gray.

    Every page's size is checked first; pages are then rendered one at a time, as they
    are taken (a page at 300 dpi is about 9 MB: a long scan is never held whole). The
    PDF has been opened and its page count checked by
    :func:`~pipeline.documents.pdf_text.read_pdf_text` already.

    Raises:
        DocumentRefused: ``image_too_large`` (a page over ``max_pixels`` at ``dpi``),
            ``unreadable_document`` (PDFium fails on it).
    """
    scale = dpi / 72.0
    with _pdf(data) as pdf:
        for number in numbers:
            width, height = pdf.get_page_size(number - 1)
            check_pixels((round(width * scale), round(height * scale)), max_pixels)
    return _render(data, numbers, scale)


def _render(
    data: bytes, numbers: tuple[int, ...], scale: float
) -> Iterator[tuple[int, Image.Image]]:
    for number in numbers:
        with _pdf(data) as pdf:  # the lock is held per page, not across the OCR between
            page = pdf[number - 1]
            try:
                image = page.render(scale=scale, grayscale=True).to_pil().convert("L")
            finally:
                page.close()
        yield number, image


@contextlib.contextmanager
def _pdf(data: bytes) -> Iterator[pdfium.PdfDocument]:
    with PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
            try:
                yield pdf
            finally:
                pdf.close()
        except pdfium.PdfiumError as exc:
            raise DocumentRefused("unreadable_document", str(exc)) from exc


def render_pdf_page(data: bytes, number: int, *, max_side: int, max_pages: int) -> Image.Image:
    """Page ``number`` (1-based) of the PDF in ``data``, in colour, scaled so that its
    longer side is ``max_side`` pixels (its pixels are bounded whatever size it declares).

    Raises:
        NotFound: the PDF has no page ``number``.
        DocumentOverLimit: more pages than ``max_pages`` (limit ``pages``).
        DocumentRefused: ``unreadable_document`` (PDFium fails on it).
    """
    with _pdf(data) as pdf:
        count = len(pdf)
        if count > max_pages:
            raise DocumentOverLimit("pages", allowed=max_pages, actual=count)
        if not 1 <= number <= count:
            raise NotFound(f"page {number} of {count}")
        width, height = pdf.get_page_size(number - 1)
        scale = max_side / max(width, height, 1.0)
        page = pdf[number - 1]
        try:
            image: Image.Image = page.render(scale=scale).to_pil()
        finally:
            page.close()
    return image.convert("RGB")
