"""The document stage: a job's document as the text the extraction reads.

A pasted text is read from its documents row, as always. A file (a row with a
``uri``, migration 023) is read from the document store, checked against the
SHA-256 it was accepted with, and turned into text by its media type:

* **PDF with a text layer**: :func:`~pipeline.documents.read_document`, each page's
  words laid out on a grid, the pages joined with form feeds (``\\f``, the page
  break every extraction stage reads), then the text extraction as for a pasted text;
* **PDF pages without a text layer, PNG, JPEG, TIFF**: OCR with Debian's tesseract
  (``make ocr-tools``), within the pixel, page and time limits; tesseract missing is
  ``ocr_unavailable`` (retryable), a page past its time ``ocr_page_timeout``, a
  file on whose pages neither the text layer nor OCR finds a word ``no_text_found``,
  a file whose pages all together take longer than ``document_read_seconds``
  ``document_read_timeout`` (terminal); pages are OCR'd by the stage's ``ocr``
  (in this process by default; the cluster runtime's Ray OCR pool when it runs one);
* **XML** (an e-invoice): its bytes as ``einvoice``, and its text as the document's
  text (what validation reads: the XML prints its own currency and IBAN); a PDF whose
  embedded file is an e-invoice's XML (Factur-X/ZUGFeRD ``factur-x.xml``,
  ``zugferd-invoice.xml``, XRechnung ``xrechnung.xml``) is read as above and carries that
  XML as ``einvoice`` too: the attempt reads it without a model
  (:func:`~pipeline.worker.interpretation.interpret_einvoice`);
* an encrypted or unreadable PDF, or one over the page limit: terminal with the
  named reason (``encrypted_document``, ``unreadable_document``,
  ``document_over_limit``).

Reading errors keep the store's split: :class:`~pipeline.errors.DocumentChanged`
(``document_changed``) and :class:`~pipeline.errors.DocumentMissing`
(``document_missing``) are terminal, :class:`~pipeline.errors.DocumentStoreUnavailable`
retryable. What was read (media type, pages, characters, pages without text) goes on
the attempt's ``document.read`` span.

A file's text is derived once: the first attempt keeps it (``document_texts``,
migration 024, first writer wins), with its words' boxes and OCR confidences
(migration 025: the review console's evidence boxes, OCR'd pages included, and the
per-value proof of values OCR read, :mod:`pipeline.worker.ocr_proof`), and every later
attempt, the review console and corrections read that text and those words, so
evidence offsets always point into the text they were found in and a retry does not
read the file again.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from pipeline.data_keys import DataKeys, document_subject
from pipeline.documents import (
    DocumentRef,
    DocumentStore,
    MediaType,
    PageOcr,
    TenantOcr,
    pdf_attachments,
    read_document,
    words_to_keep,
)
from pipeline.documents import DocumentText as DocumentTextRead
from pipeline.errors import DocumentRefused, DocumentStoreUnavailable
from pipeline.extraction import einvoice_reader, is_einvoice_reader, is_embedded_invoice
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.tracing import SPAN_DOCUMENT, child_span, set_error

_IMAGES = frozenset({MediaType.PNG.value, MediaType.JPEG.value, MediaType.TIFF.value})
#: The readers a file's text is derived with, recorded beside the text they gave.
PDF_READER = "pdf-text-grid/1"
OCR_READER = "tesseract/5"


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
    #: The reader that derived ``text`` from a file's bytes now (``pdf-text-grid/1``,
    #: ``tesseract/5``, or both); None for a pasted text or a file's text kept by an
    #: earlier attempt.
    derived_by: str | None = None
    #: The pages whose text came from OCR.
    ocr_pages: tuple[int, ...] = ()
    #: Whether OCR read any of the text (now, or when it was kept).
    by_ocr: bool = False
    #: The words of the text, with their boxes and OCR confidences, as kept beside it
    #: (:func:`pipeline.documents.words_to_keep`): derived now, or read back with a
    #: kept text; None for a pasted text, an XML, or a text kept before migration 025.
    words: Mapping[str, Any] | None = None
    #: An e-invoice's XML: the uploaded file, or the one a PDF embeds; None otherwise.
    einvoice: bytes | None = None


class DocumentStage:
    """Reads a job's document (a ``document_get`` row) as text."""

    def __init__(
        self,
        store: DocumentStore | None,
        *,
        max_pages: int,
        settings: Settings | None = None,
        ocr: PageOcr | TenantOcr | None = None,
    ) -> None:
        self.store = store
        #: Where pages without text are recognised: None is in this process; a pool
        #: shared by tenants (:class:`TenantOcr`) reads each document as its tenant's.
        self.ocr = ocr
        #: What reading a file may spend: pages, pixels, OCR languages, resolution and
        #: time per page (the process's FENCELINE_* settings unless given).
        self.settings = (settings or Settings()).model_copy(
            update={"max_document_pages": max_pages}
        )

    async def read(
        self, row: Mapping[str, Any], *, ocr_languages: str | None = None
    ) -> DocumentText:
        """The text of the document ``row`` names.

        ``ocr_languages`` (``+``-joined; the job's ``ocr_languages`` option) are the
        languages its pages without text are read with, instead of the configured ones
        (those installed, as for the configured list: the intake admitted only those).

        Raises:
            DocumentChanged: the stored bytes are not the accepted ones (terminal).
            DocumentMissing: no object behind the reference (terminal).
            DocumentStoreUnavailable: the store did not answer, or this driver has
                none (retryable).
            DocumentRefused: ``image_too_large``, ``no_text_found``,
                ``encrypted_document``, ``unreadable_document`` (terminal).
            DocumentOverLimit: a PDF over the page limit (terminal).
            DocumentReadTimeout: reading took longer than ``document_read_seconds``
                (terminal).
        """
        media = str(row["content_type"])
        if row["uri"] is None:
            return DocumentText(str(row["content"]), media)
        if row.get("derived_text") is not None:  # read once before: the same text again
            by_ocr = OCR_READER in str(row.get("derived_reader") or "")
            einvoice = None
            if is_einvoice_reader(str(row.get("derived_reader") or "")):
                # A PDF that embeds an e-invoice: its XML is read again (only its text is
                # kept); any other file is never read again.
                einvoice = await asyncio.to_thread(_embedded_invoice, await self._bytes(row))
            return DocumentText(
                str(row["derived_text"]),
                media,
                row["page_count"],
                by_ocr=by_ocr,
                words=row.get("derived_words"),
                einvoice=einvoice,
            )
        settings = self.settings
        if ocr_languages is not None:
            settings = settings.model_copy(update={"ocr_languages": ocr_languages})
        attrs = {
            "fenceline.document.media_type": media,
            "fenceline.document.ocr_languages": settings.ocr_languages,
        }
        with child_span(SPAN_DOCUMENT, attrs) as span:
            try:
                read = await self._read_file(row, media, settings)
            except Exception as exc:
                set_error(span, getattr(exc, "error_class", type(exc).__name__), str(exc))
                raise
            span.set_attribute("fenceline.document.characters", len(read.text))
            if read.pages is not None:
                span.set_attribute("fenceline.document.pages", read.pages)
                span.set_attribute("fenceline.document.pages_without_text", read.pages_without_text)
                span.set_attribute("fenceline.document.ocr_pages", read.ocr_pages)
        return read

    async def _bytes(self, row: Mapping[str, Any]) -> bytes:
        if self.store is None:
            raise DocumentStoreUnavailable("this driver has no document store configured")
        return await self.store.get(DocumentRef(row["uri"], row["version"], row["sha256"]))

    async def _read_file(
        self, row: Mapping[str, Any], media: str, settings: Settings
    ) -> DocumentText:
        data = await self._bytes(row)
        if media == MediaType.PDF.value or media in _IMAGES:
            # A PDF's text layer laid out on a grid, OCR for its pages without text; a
            # scan or photo by OCR (pipeline/documents/document_text.py). Every page
            # keeps its place, so page numbers in evidence are the file's own.
            # The time limit runs from here: the store's get is bounded on its own.
            deadline = time.monotonic() + settings.document_read_seconds
            tenant = str(row.get("tenant_id") or "")
            read = await asyncio.to_thread(
                self._read_pages, data, MediaType(media), deadline, tenant, settings
            )
            ocr = read.ocr_pages
            reader = PDF_READER if media == MediaType.PDF.value else OCR_READER
            if ocr and media == MediaType.PDF.value:
                reader = f"{PDF_READER}+{OCR_READER}"
            einvoice = (
                await asyncio.to_thread(_embedded_invoice, data)
                if media == MediaType.PDF.value
                else None
            )
            if einvoice is not None:
                reader = f"{reader}+{einvoice_reader(einvoice)}"
            empty = tuple(p.number for p in read.pages if not _has_text(p.text))
            if len(empty) == len(read.pages):
                raise DocumentRefused(
                    "no_text_found", f"no text on any of {len(read.pages)} page(s), OCR included"
                )
            return DocumentText(
                read.text,
                media,
                len(read.pages),
                empty,
                derived_by=reader,
                ocr_pages=ocr,
                by_ocr=bool(ocr),
                words=words_to_keep(read),
                einvoice=einvoice,
            )
        if media == MediaType.XML.value:
            return DocumentText(data.decode("utf-8", errors="replace"), media, einvoice=data)
        if media == MediaType.TEXT.value:
            try:
                return DocumentText(data.decode("utf-8"), media)
            except UnicodeDecodeError as exc:
                raise DocumentRefused("unreadable_document", "not UTF-8 text") from exc
        raise DocumentRefused("unsupported_media_type", media)

    def _read_pages(
        self, data: bytes, media: MediaType, deadline: float, tenant: str, settings: Settings
    ) -> DocumentTextRead:
        ocr = self.ocr
        if ocr is None:
            return read_document(data, media, settings, deadline=deadline)
        if isinstance(ocr, TenantOcr):  # its pages take their turn as their tenant's
            ocr = ocr.for_tenant(tenant)
        # The settings travel with each page to the pool's replicas: the job's languages too.
        return read_document(data, media, settings, ocr=ocr, deadline=deadline)


def _embedded_invoice(data: bytes) -> bytes | None:
    """The e-invoice XML a PDF embeds under one of the formats' names, if any."""
    for name, blob in pdf_attachments(data).items():
        if is_embedded_invoice(name):
            return blob
    return None


async def keep_text(
    pool: asyncpg.Pool,
    doc: Mapping[str, Any],
    text: str,
    reader: str,
    words: Mapping[str, Any] | None = None,
    *,
    keys: DataKeys | None = None,
) -> tuple[str, Mapping[str, Any] | None]:
    """``text``, derived now from the file ``doc`` names, kept as the document's text
    with its ``words`` (their boxes and OCR confidences: migration 025) unless an
    attempt kept one first; returns the text kept and its words (the first one's: a
    value OCR read is proven against the words of the text it was found in).

    The text is kept sealed under the tenant's data key (``keys``; None: unsealed),
    bound to the tenant and the document's SHA-256; its words hold offsets, boxes and
    confidences, no text."""
    keys = keys or DataKeys(None)
    digest = hashlib.sha256(text.encode()).hexdigest()
    tenant, subject = doc["tenant_id"], document_subject(doc["sha256"])
    async with pool.acquire() as conn:
        stored = await keys.seal_text(conn, tenant, text, subject)
        await conn.execute(
            q("document_text_keep"), doc["id"], tenant, stored, digest, reader, words
        )
        kept = await conn.fetchrow(q("document_text_get"), doc["id"], tenant)
        if kept is None:  # the row went away between the two statements: read what we have
            return text, words
        return await keys.open_text(conn, tenant, str(kept["content"]), subject), kept["words"]


def _has_text(text: str) -> bool:
    """Whether a page prints a letter or a digit: tesseract reads a drawn box's edges
    as "|   |", which is no text to extract."""
    return any(ch.isalnum() for ch in text)
