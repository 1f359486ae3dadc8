"""The document stage: a job's document as the text the extraction reads.

A pasted text is read from its documents row, as always. A file (a row with a
``uri``, migration 023) is read from the document store, checked against the
SHA-256 it was accepted with, and turned into text by its media type:

* **PDF with a text layer**: :func:`~pipeline.documents.read_pdf_text`, the pages'
  texts joined with form feeds (``\\f``, the page break every extraction stage
  reads), then the text extraction exactly as for a pasted text;
* **PDF without a text layer, PNG, JPEG, TIFF**: no OCR yet, so the job fails
  terminally with reason ``ocr_not_available`` (a re-drive reads it once OCR is
  there); a job cannot go to review without a result to review;
* **XML** (an e-invoice): ``einvoice_not_supported``, the same way;
* an encrypted or unreadable PDF, or one over the page limit: terminal with the
  named reason (``encrypted_document``, ``unreadable_document``,
  ``document_over_limit``).

Reading errors keep the store's split: :class:`~pipeline.errors.DocumentChanged`
(``document_changed``) and :class:`~pipeline.errors.DocumentMissing`
(``document_missing``) are terminal, :class:`~pipeline.errors.DocumentStoreUnavailable`
retryable. What was read (media type, pages, characters, pages without text) goes on
the attempt's ``document.read`` span.

A file's text is derived once: the first attempt keeps it (``document_texts``,
migration 024, first writer wins) and every later attempt, the review console and
corrections read that text, so evidence offsets always point into the text they were
found in and a retry does not read the file again.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from pipeline.documents import DocumentRef, DocumentStore, MediaType, read_pdf_text
from pipeline.errors import DocumentRefused, DocumentStoreUnavailable, NoTextLayer
from pipeline.queries import q
from pipeline.tracing import SPAN_DOCUMENT, child_span, set_error

_IMAGES = frozenset({MediaType.PNG.value, MediaType.JPEG.value, MediaType.TIFF.value})
#: The reader a PDF's text layer is derived with, recorded beside the text it gave.
PDF_READER = "pdf-text-grid/1"


@dataclass(frozen=True)
class DocumentText:
    """A job's document as text, and what was read to get it.

    Attributes:
        text: what the extraction reads (pages separated by ``\\f``).
        media_type: the documents row's media type.
        pages: the pages read (a PDF), else None.
        pages_without_text: PDF pages with no text layer (empty pages of ``text``).
    """

    text: str
    media_type: str
    pages: int | None = None
    pages_without_text: tuple[int, ...] = ()
    #: The reader that derived ``text`` from a file's bytes now (``pdf-text-grid``);
    #: None for a pasted text or a file's text kept by an earlier attempt.
    derived_by: str | None = None


class DocumentStage:
    """Reads a job's document (a ``document_get`` row) as text."""

    def __init__(self, store: DocumentStore | None, *, max_pages: int) -> None:
        self.store = store
        self.max_pages = max_pages

    async def read(self, row: Mapping[str, Any]) -> DocumentText:
        """The text of the document ``row`` names.

        Raises:
            DocumentChanged: the stored bytes are not the accepted ones (terminal).
            DocumentMissing: no object behind the reference (terminal).
            DocumentStoreUnavailable: the store did not answer, or this driver has
                none (retryable).
            DocumentRefused: ``ocr_not_available``, ``einvoice_not_supported``,
                ``encrypted_document``, ``unreadable_document`` (terminal).
            DocumentOverLimit: a PDF over the page limit (terminal).
        """
        media = str(row["content_type"])
        if row["uri"] is None:
            return DocumentText(str(row["content"]), media)
        if row.get("derived_text") is not None:  # read once before: the same text again
            return DocumentText(str(row["derived_text"]), media, row["page_count"])
        with child_span(SPAN_DOCUMENT, {"fenceline.document.media_type": media}) as span:
            try:
                read = await self._read_file(row, media)
            except Exception as exc:
                set_error(span, getattr(exc, "error_class", type(exc).__name__), str(exc))
                raise
            span.set_attribute("fenceline.document.characters", len(read.text))
            if read.pages is not None:
                span.set_attribute("fenceline.document.pages", read.pages)
                span.set_attribute("fenceline.document.pages_without_text", read.pages_without_text)
        return read

    async def _read_file(self, row: Mapping[str, Any], media: str) -> DocumentText:
        if self.store is None:
            raise DocumentStoreUnavailable("this driver has no document store configured")
        data = await self.store.get(DocumentRef(row["uri"], row["version"], row["sha256"]))
        if media == MediaType.PDF.value:
            try:
                pdf = await asyncio.to_thread(read_pdf_text, data, max_pages=self.max_pages)
            except NoTextLayer as exc:
                raise DocumentRefused(
                    "ocr_not_available", f"a PDF without a text layer needs OCR ({exc})"
                ) from exc
            # Every page keeps its place (an empty one stays empty), so page numbers
            # in evidence are the PDF's own; each laid out on a grid, its columns kept.
            text = "\f".join(page.laid_out().text for page in pdf.pages)
            return DocumentText(
                text, media, pdf.page_count, pdf.pages_without_text, derived_by=PDF_READER
            )
        if media in _IMAGES:
            raise DocumentRefused("ocr_not_available", f"{media} needs OCR, not available yet")
        if media == MediaType.XML.value:
            raise DocumentRefused(
                "einvoice_not_supported", "e-invoice XML is not read yet (issue 44)"
            )
        if media == MediaType.TEXT.value:
            try:
                return DocumentText(data.decode("utf-8"), media)
            except UnicodeDecodeError as exc:
                raise DocumentRefused("unreadable_document", "not UTF-8 text") from exc
        raise DocumentRefused("unsupported_media_type", media)


async def keep_text(pool: asyncpg.Pool, doc: Mapping[str, Any], text: str, reader: str) -> str:
    """``text``, derived now from the file ``doc`` names, kept as the document's text
    unless an attempt kept one first; returns the text kept (the first one's)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    async with pool.acquire() as conn:
        await conn.execute(
            q("document_text_keep"), doc["id"], doc["tenant_id"], text, digest, reader
        )
        kept = await conn.fetchval(q("document_text_get"), doc["id"], doc["tenant_id"])
    if kept is None:  # the row went away between the two statements: read what we have
        return text
    return str(kept)
