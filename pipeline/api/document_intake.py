"""Files and references at intake: the bytes go to the document store, the row keeps
where they are.

An uploaded file (:class:`~pipeline.api.submission.FileUpload`) is counted (a PDF's
pages) and put into the configured store *before* the accept transaction: a crash
between the two leaves an object no row names, which is harmless (the folder store
shares it by content, S3 overwrites it with the same bytes); the other order could
leave a row whose object was never written. A reference
(:class:`~pipeline.api.submission.DocumentReferenceBody`) is headed and read once in
the configured store, so its digest is the bytes' own (checked against the one the
client gave), its version is pinned and its media type sniffed; a reference the
store does not hold, of another store or another scheme is 422 and nothing is
written. No URL from a payload is ever fetched: the store only reads its own scheme.
Tenant scoping: a reference into the store's upload area (``fenceline-store://``, or
``<prefix>/<tenant>/<sha256>`` in the bucket) must name a document the tenant already
has, checked before the store is asked; keys elsewhere in the bucket are the
deployment's to hand out.

The result is a :class:`~pipeline.jobs.DocumentIn` carrying an
:class:`~pipeline.jobs.ObjectReference` (uri, version, SHA-256, size, page count),
which the accept statement writes with the job and its outbox event. A referenced
object whose bytes are UTF-8 text becomes a pasted text, as an uploaded one does.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import asyncpg

from pipeline.api.problems import ApiProblem, over_limit_problem, retry_after_seconds
from pipeline.api.submission import DocumentReferenceBody, FileUpload, sniff_upload
from pipeline.documents import (
    DocumentRef,
    DocumentStore,
    MediaType,
    StoredObject,
    pdf_page_count,
)
from pipeline.errors import (
    DocumentChanged,
    DocumentMissing,
    DocumentOverLimit,
    DocumentRefused,
    DocumentStoreUnavailable,
)
from pipeline.jobs import DocumentIn, ObjectReference
from pipeline.queries import q

log = logging.getLogger(__name__)

#: Seconds a client waits before retrying a request the store could not serve.
STORE_RETRY_AFTER_SECONDS = 5.0


class DocumentIntake:
    """Stores uploads and resolves references for one intake, in its configured store."""

    def __init__(
        self,
        store: DocumentStore,
        pool: asyncpg.Pool,
        *,
        max_file_bytes: int,
        max_pages: int,
        acquire_timeout: float | None = None,
    ) -> None:
        self.store = store
        self.pool = pool
        self.max_file_bytes = max_file_bytes
        self.max_pages = max_pages
        self.acquire_timeout = acquire_timeout

    async def upload(self, tenant: uuid.UUID, upload: FileUpload) -> DocumentIn:
        """Count ``upload``'s pages (a PDF), put its bytes, and name them.

        Raises:
            ApiProblem: 413 over the page limit; 422 an encrypted or unreadable PDF;
                503 the store did not answer.
        """
        pages = await self._page_count(upload.data, upload.media_type)
        try:
            stored = await self.store.put(tenant, upload.data, upload.media_type.value)
        except DocumentStoreUnavailable as exc:
            raise _unavailable(exc) from None
        return _document(stored, upload.media_type, pages, upload.filename)

    async def ensure_stored(self, tenant: uuid.UUID, upload: FileUpload, doc: DocumentIn) -> None:
        """After the accept's commit: the object its row names is there, or is put again.

        A removal (retention or erasure, :mod:`pipeline.jobs.object_removal`) that
        checked before this row committed took the uri's lock first, so it finished
        before the commit and this check sees its result. A store that does not answer
        now is logged: the job is accepted, and its worker retries the read.
        """
        ref = doc.reference
        if ref is None:
            return
        try:
            await self.store.head(DocumentRef(ref.uri, ref.version, ref.sha256))
        except DocumentMissing:
            log.warning(
                "stored object %s was removed before its accept committed: put again", ref.uri
            )
            try:
                await self.store.put(tenant, upload.data, upload.media_type.value)
            except DocumentStoreUnavailable as exc:
                log.error("stored object %s could not be put again: %s", ref.uri, exc)
        except DocumentStoreUnavailable as exc:
            log.warning("stored object %s could not be checked after its accept: %s", ref.uri, exc)

    async def reference(self, tenant: uuid.UUID, body: DocumentReferenceBody) -> DocumentIn:
        """Head and read the object ``body`` names, check its digest, and name it.

        A reference into the store's own upload area must name a document ``tenant``
        already has; any other is answered as a missing object before the store is
        asked, so a tenant can neither read nor probe another's uploads.

        Raises:
            ApiProblem: 422 ``document_missing`` (no such object or version, not an
                object of the configured store, or another tenant's upload) or
                ``document_changed`` (another digest than ``body.sha256``); 413 over
                the file or page limit; 415 a media type no stage reads; 503 the
                store did not answer.
        """
        ref = DocumentRef(body.uri, body.version, body.sha256)
        try:
            await self._check_owner(tenant, body.uri)
            head = await self.store.head(ref, max_bytes=self.max_file_bytes)
            data = await self.store.get(head.ref)
        except DocumentMissing as exc:
            raise ApiProblem(422, str(exc), reason="document_missing") from None
        except DocumentChanged as exc:
            raise ApiProblem(422, str(exc), reason="document_changed") from None
        except DocumentOverLimit as exc:
            raise over_limit_problem(exc) from None
        except DocumentStoreUnavailable as exc:
            raise _unavailable(exc) from None
        media = sniff_upload(data, self.max_file_bytes)
        if media is None:
            text = data.decode("utf-8")
            if "\x00" in text:
                raise ApiProblem(422, "NUL characters are not allowed", reason="nul_character")
            return DocumentIn(content=text, filename=body.filename)
        pages = await self._page_count(data, media)
        return _document(head, media, pages, body.filename)

    async def _check_owner(self, tenant: uuid.UUID, uri: str) -> None:
        """DocumentMissing for an upload-area reference ``tenant`` holds no document of."""
        digest = self.store.upload_digest(uri)
        if digest is None:
            return
        async with self.pool.acquire(timeout=self.acquire_timeout) as conn:
            held = await conn.fetchval(q("document_exists_for_tenant"), tenant, digest)
        if not held:
            raise DocumentMissing(f"no object {uri}")

    async def _page_count(self, data: bytes, media: MediaType) -> int | None:
        """A PDF's pages (opened, not read, in a worker thread); None for other types."""
        if media is not MediaType.PDF:
            return None
        try:
            return await asyncio.to_thread(pdf_page_count, data, max_pages=self.max_pages)
        except DocumentOverLimit as exc:
            raise over_limit_problem(exc) from None
        except DocumentRefused as exc:
            raise ApiProblem(422, str(exc), reason=exc.reason) from None


def _document(
    stored: StoredObject, media: MediaType, pages: int | None, filename: str | None
) -> DocumentIn:
    return DocumentIn(
        content_type=media.value,
        filename=filename,
        reference=ObjectReference(
            uri=stored.uri,
            version=stored.version,
            sha256=stored.sha256,
            size=stored.size,
            page_count=pages,
        ),
    )


def _unavailable(exc: DocumentStoreUnavailable) -> ApiProblem:
    seconds = retry_after_seconds(STORE_RETRY_AFTER_SECONDS)
    return ApiProblem(
        503,
        f"the document store did not answer; nothing was accepted ({exc})",
        reason="document_store_unavailable",
        headers={"Retry-After": str(seconds)},
    )
