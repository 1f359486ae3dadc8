"""A file's pages with their words placed at the offsets of the text the job kept.

Evidence offsets point into the text the document stage kept for a file
(``document_texts``, migration 024): its pages joined by form feeds. To draw a value's
evidence over the page image, the page's words are needed with their boxes *at those
offsets*. :func:`kept_page_words` reads a PDF's text layer again and lays each page
out with the very call the document stage used
(:func:`~pipeline.documents.document_text.text_layer_page`); a page is returned only
where that gives exactly the kept page's text, so an offset is never drawn against a
text it was not found in (a later release that lays pages out differently draws no
box rather than a wrong one).

Pages read by OCR (scans, photos, PDF pages without a text layer) are not returned:
their word boxes are not kept, and a page view does not run OCR again.
"""

from __future__ import annotations

from pipeline.documents.document_text import DocumentPage, text_layer_page
from pipeline.documents.pdf_text import read_pdf_text
from pipeline.documents.sniff import MediaType
from pipeline.errors import NoTextLayer

#: The form feed between pages in a kept text.
PAGE_BREAK = "\f"


def kept_page_words(
    data: bytes, media_type: MediaType, kept_text: str, *, max_pages: int
) -> dict[int, DocumentPage]:
    """The pages of the file ``data`` whose words line up with ``kept_text``, by number.

    Raises:
        DocumentRefused: ``encrypted_document`` or ``unreadable_document``.
        DocumentOverLimit: more pages than ``max_pages``.
    """
    if media_type is not MediaType.PDF:
        return {}
    try:
        layer = read_pdf_text(data, max_pages=max_pages)
    except NoTextLayer:
        return {}
    kept = kept_text.split(PAGE_BREAK)
    pages: dict[int, DocumentPage] = {}
    for pdf_page in layer.pages:
        if not pdf_page.words or pdf_page.number > len(kept):
            continue
        page = text_layer_page(pdf_page)
        if page.text == kept[pdf_page.number - 1]:
            pages[page.number] = page
    return pages
