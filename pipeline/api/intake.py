"""Durable acceptance of extraction jobs (spec sections 2 and 3).

``POST /v1/extraction-jobs`` ends here. The invariants:

* **Durable before 202.** The document (sha256 digest, immutable content
  version), the job and its ``extraction.requested.v1`` outbox event commit in
  one transaction (:meth:`pipeline.jobs.store.JobStore.accept`); the response is sent
  only after the commit. A crash before the commit leaves none of them.
* **Idempotency.** ``Idempotency-Key`` is unique per tenant. The same key with
  the same request (document version, schema version, model policy,
  result-affecting options — the request hash) returns the same job: 202 the
  first time, 200 with the same body afterwards — the original receipt, with
  the state as accepted; the status URL gives the current one. The same key
  with a different request is 409 and writes nothing. Without the header the server generates a
  key (returned in the ``Idempotency-Key`` response header and the body): a
  retried request without a key is then a second job, so clients that retry
  must send one.
* **Admission first, in the same statement.** The tenant's advisory lock, the
  quota and idempotency read, the decision and the writes are one statement
  (``intake_accept``, migration 018): one round trip, its own transaction. A
  refusal (:mod:`pipeline.jobs.quotas` words it; the Kafka ingress admits through
  the same statement and checks) writes nothing. A replay of an accepted
  request is never refused by admission: that work is already accepted.
* **Input is checked before it reaches PostgreSQL.** The body becomes a
  :class:`~pipeline.api.submission.Submission` there (400, 413, 415 or 422, never a
  500): a pasted text, an uploaded file or a reference to a stored object.
* **Bytes never enter PostgreSQL.** A file's bytes are put into the document store
  before the accept statement, a reference's object is headed and read there
  (:mod:`pipeline.api.document_intake`); the row keeps uri, version, SHA-256, media
  type, size and page count. The request hash covers the digest (the document
  version), so the same file again under the same key is a replay.
* **Bounded documents.** A document over a size limit (bytes, estimated tokens) is
  413, over a shape limit (lines, characters on one line) 422, both
  ``document_over_limit`` naming the limit, its value and the document's
  (:mod:`pipeline.extraction.bounds`); checked before admission, so nothing is
  written — a replay of a request accepted under looser limits is refused too.
* **Nothing invisible where a person reads a name.** A file name or an option
  name (a key of ``options``) with a bidi control, zero-width or other invisible
  character is 422 ``unsafe_text`` (:mod:`pipeline.api.submission`), and
  nothing is written: ``invoice\\u202efdp.exe`` must not reach a screen as
  ``invoiceexe.pdf``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from pydantic import BaseModel

from pipeline.api.document_intake import DocumentIntake
from pipeline.api.problems import ApiProblem, over_limit_problem
from pipeline.api.request_options import refuse_unserved_options
from pipeline.api.submission import (
    DocumentBody,
    DocumentReferenceBody,
    FileUpload,
    Submission,
    resolve_idempotency_key,
)
from pipeline.documents import DocumentStore
from pipeline.errors import AdmissionRejected
from pipeline.extraction import SIZE_LIMITS, DocumentLimits, over_limit
from pipeline.hooks import Hook, Hooks
from pipeline.jobs import (
    Accepted,
    AcceptRequest,
    AdmissionCheck,
    Demand,
    DocumentIn,
    JobStore,
    TenantQuota,
    demand_for,
)
from pipeline.settings import Settings
from pipeline.states import JobState

#: Called inside the accept transaction after the job and outbox rows are written
#: and before the commit. A documented test seam for crash injection: raising (or
#: killing the process) here must leave no job, event or document behind.
AcceptHook = Hook[asyncpg.Connection, Accepted]


class JobAccepted(BaseModel):
    """The acceptance receipt; the same body for the first request and its replays."""

    job_id: uuid.UUID
    state: JobState
    state_version: int
    idempotency_key: str
    deadline_at: datetime
    status_url: str
    events_url: str
    result_url: str


@dataclass(frozen=True)
class Receipt:
    accepted: Accepted
    idempotency_key: str
    generated_key: bool

    @property
    def created(self) -> bool:
        return self.accepted.created

    def body(self) -> JobAccepted:
        base = f"/v1/extraction-jobs/{self.accepted.job_id}"
        return JobAccepted(
            job_id=self.accepted.job_id,
            state=self.accepted.state,
            state_version=self.accepted.state_version,
            idempotency_key=self.idempotency_key,
            deadline_at=self.accepted.deadline_at,
            status_url=base,
            events_url=f"{base}/events",
            result_url=f"{base}/result",
        )


def check_document_limits(text: str, limits: DocumentLimits) -> None:
    """Refuse a document over ``limits`` before anything is written.

    Raises:
        ApiProblem: 413 (bytes, estimated tokens) or 422 (lines, characters on one
            line), reason ``document_over_limit``, with ``limit``, ``allowed``,
            ``actual`` (and ``line``) as members.
    """
    refusal = over_limit(text, limits)
    if refusal is None:
        return
    raise over_limit_problem(refusal, 413 if refusal.limit in SIZE_LIMITS else 422)


# ------------------------------------------------------------------ the service
class IntakeService:
    """Admission + durable acceptance in one transaction per request."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        store: JobStore,
        admission: TenantQuota,
        settings: Settings,
        *,
        documents: DocumentStore,
        accept_hook: AcceptHook | None = None,
    ) -> None:
        self.pool = pool
        self.store = store
        self.admission = admission
        self.settings = settings
        #: Run in the accept transaction of each new job (see :data:`AcceptHook`).
        self.accept_hooks: Hooks[asyncpg.Connection, Accepted] = Hooks(
            [accept_hook] if accept_hook is not None else []
        )
        self.limits = DocumentLimits.from_settings(settings)
        self.documents = DocumentIntake(
            documents,
            pool,
            max_file_bytes=settings.max_document_file_bytes,
            max_pages=settings.max_document_pages,
            acquire_timeout=settings.db_acquire_timeout_seconds,
        )

    async def submit(
        self,
        tenant_id: uuid.UUID,
        submission: Submission,
        idempotency_key: str | None,
        *,
        api_key_id: uuid.UUID | None = None,
    ) -> Receipt:
        """Admit and durably accept ``submission`` for ``tenant_id``.

        ``api_key_id``: the caller's key, checked again inside the transaction (in the
        read it runs anyway), so a key revoked or expired before the commit cannot
        get a job accepted even when the request was authenticated from the key cache.

        A file's bytes are stored (a reference's object read) before the accept
        statement; a refusal after that leaves an object no row names, which is harmless.

        Raises:
            ApiProblem: 400 for a malformed Idempotency-Key; 401 for a key no longer
                active; 413/422 for a document over its limits; 422 for a reference
                the store does not hold; 503 when the store does not answer.
            IdempotencyConflict: the key was used for a different request (409).
            AdmissionRejected: quota (429) or capacity (503); nothing written.
        """
        key, generated = resolve_idempotency_key(idempotency_key)
        # Before the document is stored: an option this deployment cannot honour
        # writes nothing (pipeline/api/request_options.py).
        refuse_unserved_options(submission.options, self.settings)
        doc = await self.document_in(tenant_id, submission.document)
        demand = demand_for(doc.size, self.settings)
        options = submission.options
        req = AcceptRequest(
            tenant_id=tenant_id,
            idempotency_key=key,
            document=doc,
            schema_version=options.schema_version,
            model_policy=options.model_policy,
            options=dict(options.options),
            priority=options.priority,
            estimated_tokens=demand.tokens,
            deadline_seconds=options.deadline_seconds,
        )
        async with self.pool.acquire(timeout=self.settings.db_acquire_timeout_seconds) as conn:
            capacity, check = await self.admission_check(conn, api_key_id, demand)
            if not self.accept_hooks:
                # One statement, its own transaction: lock, read, decide, write.
                row = await self.store.admit_and_accept(req, check, conn=conn)
                accepted = self._answer(row, req, demand, capacity)
            else:
                async with conn.transaction():
                    row = await self.store.admit_and_accept(req, check, conn=conn)
                    accepted = self._answer(row, req, demand, capacity)
                    if accepted.created:
                        await self.accept_hooks.run(conn, accepted)
        if accepted.created and isinstance(submission.document, FileUpload):
            await self.documents.ensure_stored(tenant_id, submission.document, doc)
        return Receipt(accepted=accepted, idempotency_key=key, generated_key=generated)

    async def document_in(
        self, tenant_id: uuid.UUID, document: DocumentBody | DocumentReferenceBody | FileUpload
    ) -> DocumentIn:
        """The document as the accept statement writes it: a text within its limits, or
        a stored object's reference (:class:`DocumentIntake`)."""
        if isinstance(document, FileUpload):
            return await self.documents.upload(tenant_id, document)
        if isinstance(document, DocumentBody):
            text_doc = DocumentIn(
                content=document.text,
                content_type=document.content_type,
                filename=document.filename,
            )
        else:
            text_doc = await self.documents.reference(tenant_id, document)
            if text_doc.reference is not None:
                return text_doc
        check_document_limits(text_doc.content, self.limits)
        return text_doc

    async def admission_check(
        self, conn: asyncpg.Connection, api_key_id: uuid.UUID | None, demand: Demand
    ) -> tuple[AdmissionRejected | None, AdmissionCheck]:
        """The capacity verdict (read on ``conn``) and what ``intake_accept`` decides with."""
        return await self.admission.check(conn, api_key_id, demand)

    def _answer(
        self,
        row: asyncpg.Record,
        req: AcceptRequest,
        demand: Demand,
        capacity: AdmissionRejected | None,
    ) -> Accepted:
        """The receipt ``intake_accept``'s row stands for, or the refusal it names.

        Raises:
            ApiProblem: 401, the caller's key was revoked or has expired.
            IdempotencyConflict: a known key with a different request (409).
            AdmissionRejected: capacity (503) or a quota (429).
        """
        if row["outcome"] == "key_inactive":
            _check_key_state(row["key_state"])
        return self.admission.answer(row, req, demand, capacity)


def _check_key_state(state: str | None) -> None:
    """401 for a caller's key the accept transaction found revoked or expired."""
    if state is None or state == "active":
        return
    if state == "expired":
        raise ApiProblem(
            401,
            "this API key has expired; use its replacement",
            reason="key_expired",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    raise ApiProblem(
        401,
        "a valid API key is required",
        reason="unauthorized",
        headers={"WWW-Authenticate": "Bearer"},
    )
