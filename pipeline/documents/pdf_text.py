"""The text layer of a PDF, read with PDFium (pypdfium2): text and words with boxes per page.

A PDF that carries its text (printed from an ERP or a word processor) needs no OCR:
PDFium gives each character with its box, in the order it reconstructs for reading.
This module turns that into one text per page and the words in it, each word with
its offsets into that text and its box, which is what evidence boxes are drawn from.

Invariants:

* ``page.text[word.start:word.end] == word.text`` for every word; PDFium's line
  breaks (``\\r\\n``) become ``\\n``, its generated spaces stay spaces.
* Boxes are in PDF points from the page's *top-left* corner (``top < bottom``), the
  convention of images and of the page view, for an unrotated page.
* Nothing here crashes on hostile bytes: a password-protected PDF is refused as
  ``encrypted_document`` (one openable without a password is read: its permission
  flags restrict editing, not reading), a file PDFium cannot open or parse as
  ``unreadable_document``, more pages than the limit as ``DocumentOverLimit``
  (``pages``) before any page is read, and a PDF with no text on any page as
  :class:`~pipeline.errors.NoTextLayer`, which the OCR stage takes.

PDFium is not thread-safe: every call into it here holds one process-wide lock, so
callers may use threads; parallel reading needs processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from pipeline.documents.grid import GridPage, Placed, layout_page
from pipeline.documents.pdfium_lock import PDFIUM_LOCK
from pipeline.errors import DocumentOverLimit, DocumentRefused, NoTextLayer

_ENCRYPTED = {pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY}


@dataclass(frozen=True, slots=True)
class Box:
    """A rectangle in PDF points from the page's top-left corner."""

    left: float
    top: float
    right: float
    bottom: float


@dataclass(frozen=True, slots=True)
class PdfWord:
    """A run of non-space characters: ``text`` is ``page.text[start:end]``."""

    text: str
    start: int
    end: int
    box: Box


@dataclass(frozen=True, slots=True)
class PdfPage:
    """One page's text layer. ``number`` counts from 1; width and height are in points."""

    number: int
    width: float
    height: float
    text: str
    words: tuple[PdfWord, ...]

    def laid_out(self) -> GridPage:
        """The page's words on a character grid, columns and blank lines kept
        (:mod:`pipeline.documents.grid`): the text extraction reads. PDFium's own
        :attr:`text` runs a table's columns together with one space."""
        return layout_page(
            [Placed(w.text, w.box.left, w.box.top, w.box.right, w.box.bottom) for w in self.words]
        )


@dataclass(frozen=True, slots=True)
class PdfText:
    """The text layer of a whole PDF, a page each."""

    pages: tuple[PdfPage, ...]

    @property
    def page_count(self) -> int:
        return len(self.pages)

    @property
    def pages_without_text(self) -> tuple[int, ...]:
        """Numbers of the pages with no word (scanned pages inside a text PDF: OCR's)."""
        return tuple(page.number for page in self.pages if not page.words)


def read_pdf_text(data: bytes, *, max_pages: int) -> PdfText:
    """Read the text layer of the PDF in ``data``.

    Args:
        data: the PDF's bytes.
        max_pages: the page limit (``Settings.max_document_pages``).

    Raises:
        DocumentRefused: ``encrypted_document`` or ``unreadable_document``.
        NoTextLayer: the PDF opens, but no page holds any text.
        DocumentOverLimit: more pages than ``max_pages`` (limit ``pages``).
    """
    with PDFIUM_LOCK:
        pdf = _open(data)
        try:
            count = _count(pdf, max_pages)
            pages = tuple(_read_page(pdf, index) for index in range(count))
        except pdfium.PdfiumError as exc:
            raise DocumentRefused("unreadable_document", str(exc)) from exc
        finally:
            pdf.close()
    if all(not page.words for page in pages):
        raise NoTextLayer(count)
    return PdfText(pages)


def pdf_page_count(data: bytes, *, max_pages: int) -> int:
    """The number of pages of the PDF in ``data``, opening it without reading a page:
    what the intake records (and refuses) before the bytes are stored.

    Raises:
        DocumentRefused: ``encrypted_document`` or ``unreadable_document``.
        DocumentOverLimit: more pages than ``max_pages`` (limit ``pages``).
    """
    with PDFIUM_LOCK:
        pdf = _open(data)
        try:
            return _count(pdf, max_pages)
        except pdfium.PdfiumError as exc:
            raise DocumentRefused("unreadable_document", str(exc)) from exc
        finally:
            pdf.close()


#: An embedded file larger than this is not read (an e-invoice's XML is kilobytes).
MAX_ATTACHMENT_BYTES = 20_000_000


def pdf_attachments(data: bytes) -> dict[str, bytes]:
    """A PDF's embedded files by name (Factur-X/ZUGFeRD carry their XML as one); those
    over :data:`MAX_ATTACHMENT_BYTES` and those PDFium cannot read are left out.

    Raises:
        DocumentRefused: ``encrypted_document``, ``unreadable_document``.
    """
    out: dict[str, bytes] = {}
    with PDFIUM_LOCK:
        pdf = _open(data)
        try:
            for index in range(pdf.count_attachments()):
                try:
                    attachment = pdf.get_attachment(index)
                    name = attachment.get_name()
                    blob = attachment.get_data()
                except pdfium.PdfiumError:
                    continue
                if len(blob) <= MAX_ATTACHMENT_BYTES:
                    out.setdefault(name, bytes(blob))
        finally:
            pdf.close()
    return out


def _open(data: bytes) -> pdfium.PdfDocument:
    """The opened PDF, or the named refusal (called holding the lock)."""
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code in _ENCRYPTED:
            raise DocumentRefused("encrypted_document", "a password is needed") from exc
        raise DocumentRefused("unreadable_document", str(exc)) from exc


def _count(pdf: pdfium.PdfDocument, max_pages: int) -> int:
    count = len(pdf)
    if count == 0:
        raise DocumentRefused("unreadable_document", "no pages")
    if count > max_pages:
        raise DocumentOverLimit("pages", allowed=max_pages, actual=count)
    return count


def _read_page(pdf: pdfium.PdfDocument, index: int) -> PdfPage:
    page = pdf[index]
    try:
        width, height = page.get_size()
        textpage = page.get_textpage()
        try:
            text, words = _words(textpage, height)
        finally:
            textpage.close()
    finally:
        page.close()
    return PdfPage(index + 1, float(width), float(height), text, words)


def _words(textpage: pdfium.PdfTextPage, height: float) -> tuple[str, tuple[PdfWord, ...]]:
    """The page's text and its words, one character at a time (PDFium's char indices)."""
    raw = textpage.raw
    count = pdfium_c.FPDFText_CountChars(raw)
    out: list[str] = []
    words: list[PdfWord] = []
    start: int | None = None
    box: list[float] = []

    def close_word() -> None:
        nonlocal start, box
        if start is not None and box:  # a run with no visible box is no word
            words.append(PdfWord("".join(out[start:]), start, len(out), Box(*box)))
        start, box = None, []

    for index in range(count):
        char = _char(pdfium_c.FPDFText_GetUnicode(raw, index))
        if (
            char == "\r"
            and index + 1 < count
            and _char(pdfium_c.FPDFText_GetUnicode(raw, index + 1)) == "\n"
        ):
            continue  # PDFium's "\r\n" line break: one "\n"
        if char.isspace() or char == "\x00" or pdfium_c.FPDFText_IsGenerated(raw, index) == 1:
            close_word()
            out.append(" " if char in ("\x00", "\xa0") else char)
            continue
        if start is None:
            start = len(out)
        out.append(char)
        left, bottom, right, top = textpage.get_charbox(index, loose=True)
        if right > left and top > bottom:
            edges = (left, height - top, right, height - bottom)
            box = list(edges) if not box else _union(box, edges)
    close_word()
    return "".join(out), tuple(words)


def _union(box: list[float], edges: tuple[float, float, float, float]) -> list[float]:
    return [
        min(box[0], edges[0]),
        min(box[1], edges[1]),
        max(box[2], edges[2]),
        max(box[3], edges[3]),
    ]


def _char(code: int) -> str:
    """One PDFium code unit as text; a lone UTF-16 surrogate (an astral character's
    half) becomes U+FFFD so that the text stays valid and one unit stays one character."""
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return chr(code)
