"""A document's text, a page at a time, however it was read: text layer or OCR.

:func:`read_document` is the one call the document stage makes for a file's bytes: a
PDF's text layer first and OCR for its pages without text (all of them for a scan
saved as PDF); PNG, JPEG and TIFF (every frame a page) by OCR; UTF-8 text as one page.
E-invoice XML is not read here (its own readers take it).

Invariants: ``page.text[w.start:w.end] == w.text`` for every word; boxes are in PDF
points from the page's top-left corner, or None for an image that declares no
resolution; ``ocr_pages`` names exactly the pages whose text came from OCR.

Where pages are recognised is a seam: :data:`PageOcr` is any callable that takes the
pages as :func:`~pipeline.documents.ocr.ocr_images` does and returns their
:class:`~pipeline.documents.ocr.OcrPage` in the same order. In-process
:func:`ocr_images` is the default (the embedded single-machine run); the cluster
runtime hands in its Ray OCR pool (``cluster/ocr_client.py`` over the replicas of
``deployments/ocr_pool.py``), which spreads one document's pages over its replicas; a
pool shared by tenants is a :class:`TenantOcr`, and a document's pages then ask as
its tenant. The pages given to it stop, and the read ends with
``document_read_timeout``, once ``settings.document_read_seconds`` have passed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from PIL import Image

from pipeline.documents.ocr import OcrPage, PixelBox, ocr_images
from pipeline.documents.page_image import declared_dpi, open_pages
from pipeline.documents.pdf_render import render_pdf_pages
from pipeline.documents.pdf_text import Box, PdfPage, read_pdf_text
from pipeline.documents.sniff import MediaType
from pipeline.errors import DocumentReadTimeout, DocumentRefused, NoTextLayer
from pipeline.settings import Settings

_IMAGES = (MediaType.PNG, MediaType.JPEG, MediaType.TIFF)

#: One page to recognise: its number (1-based), the image, its resolution (None: unknown).
PageInput = tuple[int, Image.Image, float | None]
#: Where pages are OCR'd: in process (:func:`ocr_images`) or a pool; same order out as in.
PageOcr = Callable[[Iterable[PageInput], Settings], tuple[OcrPage, ...]]


@dataclass(frozen=True, slots=True)
class PageStream:
    """A document's pages to recognise, made lazily one at a time, and how many will
    come: a pool asks for its pages one by one and tells its scaling how many are
    still behind each ask (:attr:`~pipeline.admission.AdmissionRequest.backlog`)."""

    pages: Iterable[PageInput]
    count: int

    def __iter__(self) -> Iterator[PageInput]:
        return iter(self.pages)


def pages_behind(pages: Iterable[PageInput], asked: int) -> int:
    """Pages of ``pages`` still to come after the ``asked``-th (1-based); 0 when the
    count is unknown (a plain iterable)."""
    return max(pages.count - asked, 0) if isinstance(pages, PageStream) else 0


@runtime_checkable
class TenantOcr(Protocol):
    """An OCR whose capacity is shared by tenant: a document's pages ask as its tenant."""

    def for_tenant(self, tenant: str) -> PageOcr:
        """The OCR for pages of ``tenant``'s documents."""
        ...


@dataclass(frozen=True, slots=True)
class DocumentWord:
    """A word: ``text`` is ``page.text[start:end]``; ``confidence`` (0–100) for OCR."""

    text: str
    start: int
    end: int
    box: Box | None
    confidence: float | None


@dataclass(frozen=True, slots=True)
class DocumentPage:
    """One page. ``width``/``height`` in points (None where the resolution is unknown);
    ``ocr`` holds tesseract's reading (pixels, lines, skew) for an OCR'd page."""

    number: int
    width: float | None
    height: float | None
    text: str
    words: tuple[DocumentWord, ...]
    ocr: OcrPage | None = None


@dataclass(frozen=True, slots=True)
class DocumentText:
    """Every page of a document, in order."""

    pages: tuple[DocumentPage, ...]

    @property
    def text(self) -> str:
        """The pages' texts joined by form feeds (one page break each)."""
        return "\f".join(page.text for page in self.pages)

    @property
    def ocr_pages(self) -> tuple[int, ...]:
        return tuple(page.number for page in self.pages if page.ocr is not None)

    @property
    def mean_confidence(self) -> float | None:
        """The mean confidence (0–100) of the OCR'd words, None where none was OCR'd."""
        scores = [w.confidence for p in self.pages for w in p.words if w.confidence is not None]
        return statistics.fmean(scores) if scores else None


def read_document(
    data: bytes,
    media_type: MediaType,
    settings: Settings,
    *,
    ocr: PageOcr = ocr_images,
    deadline: float | None = None,
) -> DocumentText:
    """Read the text of a document whose media type was sniffed from ``data``.

    ``ocr`` recognises the pages without text (default: in this process); ``deadline``
    (``time.monotonic()``) is when the read must end, by default
    ``settings.document_read_seconds`` from now.

    Raises:
        DocumentRefused: ``unsupported_media_type`` (XML), ``encrypted_document``,
            ``unreadable_document``, ``image_too_large``.
        DocumentOverLimit: more pages than ``settings.max_document_pages``.
        OcrUnavailable: a page needs OCR and tesseract is missing (retryable).
        OcrPageTimeout: a page's OCR ran past ``settings.ocr_page_seconds``.
        DocumentReadTimeout: the read ran past ``deadline`` (checked between pages).
    """
    if deadline is None:
        deadline = time.monotonic() + settings.document_read_seconds
    if media_type is MediaType.PDF:
        return _read_pdf(data, settings, ocr, deadline)
    if media_type in _IMAGES:
        frames = open_pages(
            data,
            max_pages=settings.max_document_pages,
            max_pixels=settings.max_document_page_pixels,
        )
        numbered = ((number, frame, declared_dpi(frame)) for number, frame in enumerate(frames, 1))
        pages = ocr(PageStream(_until(numbered, deadline, settings), frames.count), settings)
        return DocumentText(tuple(_from_ocr(page) for page in pages))
    if media_type is MediaType.TEXT:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentRefused("unreadable_document", f"not UTF-8: {exc}") from exc
        return DocumentText((DocumentPage(1, None, None, text, ()),))
    raise DocumentRefused("unsupported_media_type", f"{media_type} is not read as pages")


def _until(pages: Iterable[PageInput], deadline: float, settings: Settings) -> Iterator[PageInput]:
    """``pages``, one at a time, until ``deadline``; then :class:`DocumentReadTimeout`.

    Pages are made lazily (a TIFF frame decoded, a PDF page rendered), so checking
    before each one stops a slow document between pages, in process or in a pool.
    """
    read = 0
    for page in pages:
        if time.monotonic() >= deadline:
            raise DocumentReadTimeout(seconds=settings.document_read_seconds, pages_read=read)
        yield page
        read += 1
    if time.monotonic() >= deadline:
        raise DocumentReadTimeout(seconds=settings.document_read_seconds, pages_read=read)


def _read_pdf(data: bytes, settings: Settings, ocr: PageOcr, deadline: float) -> DocumentText:
    try:
        layer = read_pdf_text(data, max_pages=settings.max_document_pages)
    except NoTextLayer as scan:
        pages: dict[int, DocumentPage] = {}
        missing = tuple(range(1, scan.page_count + 1))
    else:
        pages = {page.number: text_layer_page(page) for page in layer.pages}
        missing = layer.pages_without_text
    if missing:
        rendered = render_pdf_pages(
            data, missing, dpi=settings.ocr_dpi, max_pixels=settings.max_document_page_pixels
        )
        ocr_pages = ocr(
            PageStream(
                _until(
                    ((number, image, float(settings.ocr_dpi)) for number, image in rendered),
                    deadline,
                    settings,
                ),
                len(missing),
            ),
            settings,
        )
        pages.update((page.number, _from_ocr(page)) for page in ocr_pages)
    return DocumentText(tuple(pages[number] for number in sorted(pages)))


def text_layer_page(page: PdfPage) -> DocumentPage:
    """A text-layer page laid out on a grid (:mod:`pipeline.documents.grid`): the
    extraction reads columns, which PDFium's own text runs together. The page view
    lays a page out again with this same call, so its words' offsets are the kept
    text's."""
    grid = page.laid_out()
    words = tuple(
        DocumentWord(
            w.text, w.start, w.end, Box(w.box.left, w.box.top, w.box.right, w.box.bottom), None
        )
        for w in grid.words
    )
    return DocumentPage(page.number, page.width, page.height, grid.text, words)


def _from_ocr(page: OcrPage) -> DocumentPage:
    words = []
    for word in page.words:
        edges = page.points(word.box)
        box = Box(*edges) if edges is not None else None
        words.append(DocumentWord(word.text, word.start, word.end, box, word.confidence))
    size = page.points(_whole(page))
    width, height = (size[2], size[3]) if size is not None else (None, None)
    return DocumentPage(page.number, width, height, page.text, tuple(words), page)


def _whole(page: OcrPage) -> PixelBox:
    return PixelBox(0, 0, page.width, page.height)
