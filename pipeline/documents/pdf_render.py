"""PDF pages as images, rendered with PDFium for OCR (pages that carry no text).

Each page's pixel size is computed from its size in points before it is rendered and
refused over ``max_pixels`` (``image_too_large``): a PDF page can declare any size, and
rendering allocates width x height bytes at once.
"""

from __future__ import annotations

import pypdfium2 as pdfium
from PIL import Image

from pipeline.documents.page_image import check_pixels
from pipeline.documents.pdfium_lock import PDFIUM_LOCK
from pipeline.errors import DocumentRefused


def render_pdf_pages(
    data: bytes, numbers: tuple[int, ...], *, dpi: int, max_pixels: int
) -> list[tuple[int, Image.Image]]:
    """Render the pages ``numbers`` (1-based) of the PDF in ``data`` at ``dpi``, grayscale.

    The PDF has been opened and its page count checked by
    :func:`~pipeline.documents.pdf_text.read_pdf_text` already.

    Raises:
        DocumentRefused: ``image_too_large`` (a page over ``max_pixels`` at ``dpi``),
            ``unreadable_document`` (PDFium fails on it).
    """
    scale = dpi / 72.0
    out = []
    with PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
            try:
                for number in numbers:
                    page = pdf[number - 1]
                    try:
                        width, height = page.get_size()
                        check_pixels((round(width * scale), round(height * scale)), max_pixels)
                        bitmap = page.render(scale=scale, grayscale=True)
                        out.append((number, bitmap.to_pil().convert("L")))
                    finally:
                        page.close()
            finally:
                pdf.close()
        except pdfium.PdfiumError as exc:
            raise DocumentRefused("unreadable_document", str(exc)) from exc
    return out
