"""The page view: a file's pages as images, each value's evidence boxed on them.

A job whose document is a file (PDF, PNG, JPEG, TIFF) is reviewed against its pages:
:meth:`PageFiles.png` serves page *n* as a PNG of bounded size
(:func:`pipeline.documents.page_png`), and :meth:`PageFiles.view` gives, per page, the
rectangles of every evidence span of the result
(:func:`pipeline.documents.span_rects`) as per-mille of the page's width and height,
for an SVG laid over the image (no inline style: the console's CSP allows none).
Evidence offsets point into the text the file was kept as, and the words kept beside
it (migration 025: boxes as fractions of the page, OCR'd pages included) place them;
for a text kept before its words were (NULL ``derived_words``) a PDF's text layer is
laid out again (:func:`pipeline.documents.kept_page_words`). An OCR'd page is shown as
OCR read it, turned upright and level by the turn kept with its words
(:func:`pipeline.documents.kept_turns`), which is the frame its boxes are fractions
of. A page whose words do not line up with the kept text (an OCR'd page kept without
words or without its turn, a text read before its layout changed) shows its image
without boxes.

Tenant scoping: every read goes through ``console_document_get_for_tenant``, so
another tenant's job is :class:`~pipeline.errors.NotFound` like a missing one, and so
is a page the file does not have.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from pipeline.api.evidence_marks import Span, anchor_id, field_id
from pipeline.data_keys import DataKeys, document_subject
from pipeline.documents import (
    DocumentPage,
    DocumentRef,
    DocumentStore,
    MediaType,
    kept_page_words,
    kept_turns,
    kept_words,
    page_png,
    span_rects,
)
from pipeline.errors import (
    DocumentChanged,
    DocumentMissing,
    DocumentOverLimit,
    DocumentRefused,
    DocumentStoreUnavailable,
    NotFound,
)
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.tenants import Principal

#: Box coordinates are per-mille of the page (an SVG viewBox of 1000 x 1000).
SCALE = 1000
#: What a file that cannot be read or rendered is: no page to show.
_UNREADABLE = (DocumentChanged, DocumentMissing, DocumentOverLimit, DocumentRefused)


@dataclass(frozen=True)
class PageBox:
    """One rectangle of a field's evidence, in per-mille of the page."""

    field: str
    row_id: str
    anchor: str
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class PageView:
    """One page: where its image is and the evidence boxes on it."""

    number: int
    image_url: str
    boxes: tuple[PageBox, ...]


@dataclass(frozen=True)
class _File:
    data: bytes
    media_type: MediaType
    kept_text: str | None
    page_count: int | None
    kept_words: Any


class PageFiles:
    """Tenant-scoped reads of a job's file for the page view."""

    def __init__(self, pool: asyncpg.Pool, store: DocumentStore | None, settings: Settings):
        self.pool = pool
        self.store = store
        self.settings = settings
        self.data_keys = DataKeys.from_settings(settings)

    async def _row(self, principal: Principal, job_id: uuid.UUID) -> Any:
        async with self.pool.acquire(timeout=self.settings.db_acquire_timeout_seconds) as conn:
            row = await conn.fetchrow(
                q("console_document_get_for_tenant"), job_id, principal.tenant_id
            )
            if row is None or row["uri"] is None:
                raise NotFound(f"job {job_id} has no file")
            # the text it was read as is sealed at rest (migration 039)
            return await self.data_keys.open_fields(
                conn, principal.tenant_id, row, document_subject(row["sha256"]), "derived_text"
            )

    async def _file(self, principal: Principal, job_id: uuid.UUID) -> _File:
        """The job's file; NotFound for a text, another tenant's job or a missing object.

        Raises:
            DocumentStoreUnavailable: the store did not answer, or there is none.
        """
        row = await self._row(principal, job_id)
        if self.store is None:
            raise DocumentStoreUnavailable("this API has no document store configured")
        try:
            media = MediaType(row["content_type"])
            data = await self.store.get(DocumentRef(row["uri"], row["version"], row["sha256"]))
        except (ValueError, DocumentChanged, DocumentMissing) as exc:
            raise NotFound(f"the file of job {job_id}: {exc}") from exc
        return _File(data, media, row["derived_text"], row["page_count"], row["derived_words"])

    async def png(self, principal: Principal, job_id: uuid.UUID, number: int) -> bytes:
        """Page ``number`` of the job's file as PNG.

        Raises:
            NotFound: no such job in the tenant, no file, no such page, an unreadable file.
            DocumentStoreUnavailable: the store did not answer.
        """
        file = await self._file(principal, job_id)
        s = self.settings
        try:
            return await asyncio.to_thread(
                page_png,
                file.data,
                file.media_type,
                number,
                max_pages=s.max_document_pages,
                max_pixels=s.max_document_page_pixels,
                turn=kept_turns(file.kept_words).get(number),
            )
        except _UNREADABLE as exc:
            raise NotFound(f"page {number} of job {job_id}: {exc}") from exc

    async def view(
        self, principal: Principal, job_id: uuid.UUID, spans: list[Span]
    ) -> list[PageView]:
        """The pages of the job's file with the boxes of ``spans`` on them.

        Raises:
            NotFound: no such job in the tenant, no file, an unreadable file.
            DocumentStoreUnavailable: the store did not answer.
        """
        file = await self._file(principal, job_id)
        if file.media_type is MediaType.XML:
            return []  # an e-invoice's XML has no page to show (its evidence: XML paths)
        kept = file.kept_text
        count = len(kept.split("\f")) if kept is not None else (file.page_count or 1)
        words: dict[int, DocumentPage] = {}
        if kept is not None and file.kept_words is not None:
            words = kept_words(file.kept_words, kept)
        elif kept is not None:
            try:
                words = await asyncio.to_thread(
                    kept_page_words,
                    file.data,
                    file.media_type,
                    kept,
                    max_pages=self.settings.max_document_pages,
                )
            except _UNREADABLE as exc:
                raise NotFound(f"the file of job {job_id}: {exc}") from exc
        pages = []
        for number in range(1, count + 1):
            boxes: list[PageBox] = []
            page = words.get(number)
            for span in spans:
                if page is None or span.page != number:
                    continue
                for rect in span_rects(page, span.start, span.end):
                    boxes.append(
                        PageBox(
                            span.field,
                            field_id(span.field),
                            anchor_id(span.field),
                            round(rect.left * SCALE, 1),
                            round(rect.top * SCALE, 1),
                            round((rect.right - rect.left) * SCALE, 1),
                            round((rect.bottom - rect.top) * SCALE, 1),
                        )
                    )
            url = f"/console/jobs/{job_id}/pages/{number}.png"
            pages.append(PageView(number, url, tuple(boxes)))
        return pages
