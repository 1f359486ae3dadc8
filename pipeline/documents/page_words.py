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

Pages read by OCR (scans, photos, PDF pages without a text layer) are not returned
by it: a page view does not run OCR again. Their words are kept instead, beside the
text (``document_texts.words``, migration 025): :func:`words_to_keep` gives them for a
document as it was read, every page's words with offsets into that page's text and
boxes as fractions of the page (an image that declares no resolution included: its
pixels are the page), and :func:`kept_words` reads them back as pages whose width and
height are 1, which :func:`~pipeline.documents.span_rects` draws like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.documents.document_text import (
    DocumentPage,
    DocumentText,
    DocumentWord,
    text_layer_page,
)
from pipeline.documents.pdf_text import Box, read_pdf_text
from pipeline.documents.sniff import MediaType
from pipeline.errors import NoTextLayer

#: The form feed between pages in a kept text.
PAGE_BREAK = "\f"
#: The format of :func:`words_to_keep`'s JSON (2: an OCR word's marks added; 3: an
#: OCR'd page's turn added; kept versions 1 and 2 are still read, their OCR'd pages
#: without boxes).
WORDS_VERSION = 3
READABLE_WORDS_VERSIONS = frozenset({1, 2, 3})
#: Fractions are kept to this many decimals (a tenth of a point on an A4 page).
_DECIMALS = 5


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


def words_to_keep(document: DocumentText) -> dict[str, Any]:
    """The words of every page of ``document`` as kept beside its text (JSON):
    ``{"version": 3, "pages": [{"number": n, "words": [[start, end, left, top, right,
    bottom, confidence, marks], ...], "turn": [rotation, skew]}]}``; offsets into the
    page's text, the box as fractions (0..1) of the page from its top-left corner,
    confidence (0-100) or None, marks the ink above and below each character OCR read
    (:func:`~pipeline.documents.ocr_marks.mark_codes`) or None; ``turn``, on an OCR'd
    page only, the clockwise quarter turns (degrees) and the skew (degrees,
    counter-clockwise) that made the image its boxes are fractions of. A page whose
    size is unknown keeps no words. Version 1 held no marks, 1 and 2 no turn."""
    pages = []
    for page in document.pages:
        words: list[list[Any]] = []
        box: tuple[float, float, float, float]
        if page.ocr is not None:  # its pixels: a size even without a resolution
            ocr = page.ocr
            for word in ocr.words:
                box = (word.box.left, word.box.top, word.box.right, word.box.bottom)
                words.append(
                    _kept(
                        word.start,
                        word.end,
                        box,
                        ocr.width,
                        ocr.height,
                        word.confidence,
                        word.marks,
                    )
                )
        elif page.width and page.height:
            for w in page.words:
                if w.box is not None:
                    box = (w.box.left, w.box.top, w.box.right, w.box.bottom)
                    words.append(
                        _kept(w.start, w.end, box, page.width, page.height, w.confidence, None)
                    )
        entry: dict[str, Any] = {"number": page.number, "words": words}
        if page.ocr is not None:
            entry["turn"] = [page.ocr.rotation % 360, page.ocr.skew]
        pages.append(entry)
    return {"version": WORDS_VERSION, "pages": pages}


def kept_words(words: Mapping[str, Any], kept_text: str) -> dict[int, DocumentPage]:
    """The pages of ``kept_text`` with the words :func:`words_to_keep` gave for it, by
    number; width and height 1 (the boxes are fractions). A page is left out where a
    word's offsets do not fall inside the page's text, an OCR'd page kept without its
    turn (:func:`kept_turns`), and every page where the format is not this release's:
    no box is drawn against a text it was not found in, nor on an image it was not
    found on."""
    if words.get("version") not in READABLE_WORDS_VERSIONS:
        return {}
    kept = kept_text.split(PAGE_BREAK)
    pages: dict[int, DocumentPage] = {}
    for entry in words.get("pages", ()):
        number = entry["number"]
        if not 1 <= number <= len(kept) or not entry["words"]:
            continue
        if "turn" not in entry and any(word[6] is not None for word in entry["words"]):
            continue  # OCR'd (its words have confidences) before its turn was kept
        text = kept[number - 1]
        placed = []
        for start, end, left, top, right, bottom, confidence, *_marks in entry["words"]:
            if not 0 <= start < end <= len(text):
                break
            placed.append(
                DocumentWord(text[start:end], start, end, Box(left, top, right, bottom), confidence)
            )
        else:
            pages[number] = DocumentPage(number, 1.0, 1.0, text, tuple(placed))
    return pages


def kept_turns(words: Mapping[str, Any] | None) -> dict[int, tuple[int, float]]:
    """The turn of each OCR'd page in a document's kept words (:func:`words_to_keep`),
    by number: the clockwise quarter turns (0, 90, 180, 270) and the skew in degrees
    that the page view turns its image by. Empty where no words were kept, or they are
    in no format this release reads."""
    if words is None or words.get("version") not in READABLE_WORDS_VERSIONS:
        return {}
    turns: dict[int, tuple[int, float]] = {}
    for entry in words.get("pages", ()):
        turn = entry.get("turn")
        if turn is not None:
            rotation, skew = turn
            turns[int(entry["number"])] = (int(rotation) % 360, float(skew))
    return turns


def _kept(
    start: int,
    end: int,
    box: tuple[float, float, float, float],
    width: float,
    height: float,
    confidence: float | None,
    marks: str | None,
) -> list[Any]:
    left, top, right, bottom = box
    return [
        start,
        end,
        round(left / width, _DECIMALS),
        round(top / height, _DECIMALS),
        round(right / width, _DECIMALS),
        round(bottom / height, _DECIMALS),
        confidence,
        marks,
    ]
