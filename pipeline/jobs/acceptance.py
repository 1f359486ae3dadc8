"""Acceptance: a request becomes a durable job, idempotently per (tenant, key).

The intake side of the job store stands apart from leases and outcomes: it only
inserts (the document, the job and its ``extraction.requested.v1`` outbox event, in
one statement) and answers a known key with the original receipt.
:class:`~pipeline.jobs.store.JobStore` takes it as a base; import from :mod:`pipeline.jobs`.

Invariants (``tests/integration/test_jobs*.py``):

* Acceptance writes the job and its outbox event in one transaction, and only the
  inserting branch writes the event.
* A replay answers the state *as accepted*, however far the job has moved since; a
  key reused for a different request hash raises :class:`IdempotencyConflict` and
  writes nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from pipeline.data_keys import document_subject
from pipeline.errors import IdempotencyConflict
from pipeline.identity import object_version, request_hash
from pipeline.jobs.records import (
    EVENT_REQUESTED,
    Accepted,
    AcceptRequest,
    AdmissionCheck,
    accepted_from_row,
)
from pipeline.jobs.settling import Settling
from pipeline.queries import q
from pipeline.tracing import SPAN_ACCEPT, new_traceparent, root_span


def request_hash_of(req: AcceptRequest) -> str:
    """What decides a key's replay: document version, schema, model policy, options."""
    return request_hash(
        object_version=object_version(req.document.sha256),
        schema_version=req.schema_version,
        model_policy=req.model_policy,
        options=req.options,
    )


def replay_of(
    existing: asyncpg.Record, rhash: str, *, document_id: uuid.UUID | None = None
) -> Accepted:
    """The original receipt of a known idempotency key, or :class:`IdempotencyConflict`.

    ``existing`` is a ``job_get_by_idempotency_key`` row (or any row with its
    columns: ``tenant_admission_get``). A replay is the state as
    accepted, not the current one (the status URL gives that).

    Raises:
        IdempotencyConflict: the key was accepted for a different request hash.
    """
    if existing["request_hash"] != rhash:
        raise IdempotencyConflict(
            "idempotency key already used for a different request",
            existing_job_id=str(existing["job_id"]),
        )
    return accepted_from_row(existing, created=False, document_id=document_id)


async def _keep_options(conn: asyncpg.Connection, req: AcceptRequest, job_id: uuid.UUID) -> None:
    """Store a new job's request options, in the transaction that accepted it.

    Nothing is written for a request without options (the intake's one statement
    stays one). Zero rows would mean the job is not the tenant's: refused loudly.
    """
    if not req.options:
        return
    got = await conn.fetchval(q("job_options_insert"), job_id, req.tenant_id, req.options)
    if got is None:  # pragma: no cover - the job was inserted for this tenant just now
        raise RuntimeError(f"job {job_id} is not tenant {req.tenant_id}'s")


class Accepting(Settling):
    """The job store's intake: :meth:`accept`, and :meth:`admit_and_accept` with admission."""

    async def accept(
        self, req: AcceptRequest, *, conn: asyncpg.Connection | None = None
    ) -> Accepted:
        """Durably accept a job, idempotently per (tenant, key).

        One statement (``job_accept_if_new``) writes the document, the job and its
        outbox event; a known key costs one more read. Inside the caller's
        transaction the caller rolls back on :class:`IdempotencyConflict`.

        Raises:
            IdempotencyConflict: the key was used for a different request; nothing
                is written (the transaction rolls back).
        """
        if conn is None:
            async with self.pool.acquire() as c:
                return await self.accept(req, conn=c)
        version = object_version(req.document.sha256)
        rhash = request_hash_of(req)
        with root_span(SPAN_ACCEPT, {"fenceline.tenant": str(req.tenant_id)}) as (span, tp):
            if conn.is_in_transaction():
                # The caller's transaction holds everything; a conflict raises and
                # rolls it back, so no savepoint (two round trips) is needed here.
                accepted = await self._accept(req, conn, version, rhash, tp)
            else:
                async with conn.transaction():  # a conflict rolls the document back
                    accepted = await self._accept(req, conn, version, rhash, tp)
            span.set_attribute("fenceline.job_id", str(accepted.job_id))
            span.set_attribute("fenceline.created", accepted.created)
        return accepted

    async def _accept(
        self,
        req: AcceptRequest,
        conn: asyncpg.Connection,
        version: str,
        rhash: str,
        traceparent: str,
    ) -> Accepted:
        content = await self._sealed_content(conn, req)
        row = await conn.fetchrow(
            q("job_accept_if_new"), *self._accept_args(req, version, rhash, traceparent, content)
        )
        if row["job_id"] is not None:
            await _keep_options(conn, req, row["job_id"])
            return accepted_from_row(row, created=True)
        existing = await conn.fetchrow(
            q("job_get_by_idempotency_key"), req.tenant_id, req.idempotency_key
        )
        if existing is None:  # pragma: no cover - unique index guarantees a row
            raise RuntimeError("idempotency conflict without an existing row")
        return replay_of(existing, rhash, document_id=row["document_id"])

    async def admit_and_accept(
        self, req: AcceptRequest, check: AdmissionCheck, *, conn: asyncpg.Connection
    ) -> asyncpg.Record:
        """Admission and acceptance as one statement: one round trip, and its own
        transaction unless ``conn`` is in one (``intake_accept``, migration 018).

        Returns the ``intake_accept`` row: its ``outcome`` says whether the job was
        accepted or why not (nothing is written then); the caller answers from it.
        """
        with root_span(SPAN_ACCEPT, {"fenceline.tenant": str(req.tenant_id)}) as (span, tp):
            if req.options and not conn.is_in_transaction():
                # The options row must commit with the job or not at all.
                async with conn.transaction():
                    row = await self._intake_accept(req, check, conn, tp)
                    if row["outcome"] == "accepted":
                        await _keep_options(conn, req, row["job_id"])
            else:
                row = await self._intake_accept(req, check, conn, tp)
                if req.options and row["outcome"] == "accepted":
                    await _keep_options(conn, req, row["job_id"])
            span.set_attribute("fenceline.outcome", row["outcome"])
            if row["job_id"] is not None:
                span.set_attribute("fenceline.job_id", str(row["job_id"]))
        return row

    async def warm_accept(
        self, req: AcceptRequest, check: AdmissionCheck, *, conn: asyncpg.Connection
    ) -> str:
        """:meth:`admit_and_accept` without a trace span, for a caller that rolls it back
        (the intake warming a connection: :func:`pipeline.api.warm_up.warm_connection`).
        Returns the outcome."""
        row = await self._intake_accept(req, check, conn, new_traceparent())
        return str(row["outcome"])

    async def _intake_accept(
        self, req: AcceptRequest, check: AdmissionCheck, conn: asyncpg.Connection, tp: str
    ) -> asyncpg.Record:
        version = object_version(req.document.sha256)
        content = await self._sealed_content(conn, req)
        row: asyncpg.Record = await conn.fetchrow(
            q("intake_accept"),
            check.lock_namespace,
            check.period,
            check.api_key_id,
            check.capacity_refused,
            check.cost,
            uuid.uuid4(),
            *self._accept_args(req, version, request_hash_of(req), tp, content),
        )
        return row

    async def _sealed_content(self, conn: asyncpg.Connection, req: AcceptRequest) -> str | None:
        """A pasted text as the documents row keeps it: sealed under the tenant's data
        key (bound to the tenant and the text's SHA-256), or None for a file."""
        doc = req.document
        if doc.reference is not None:
            return None
        return await self.data_keys.seal_text(
            conn, req.tenant_id, doc.content, document_subject(doc.sha256)
        )

    def _accept_args(
        self, req: AcceptRequest, version: str, rhash: str, traceparent: str, content: str | None
    ) -> tuple[Any, ...]:
        """``job_accept_if_new``'s 25 parameters (the tail of ``intake_accept``'s)."""
        doc = req.document
        ref = doc.reference
        deadline = req.deadline_seconds or self.settings.default_deadline_seconds
        max_attempts = req.max_attempts or self.policy.max_attempts
        job_id = uuid.uuid4()
        return (
            uuid.uuid4(),
            req.tenant_id,
            doc.sha256,
            version,
            content,
            doc.size,
            doc.content_type,
            doc.filename,
            job_id,
            req.idempotency_key,
            rhash,
            req.schema_version,
            req.model_policy,
            traceparent,
            req.priority,
            req.estimated_tokens,
            max_attempts,
            float(deadline),
            self.clock.now(),
            uuid.uuid4(),
            {"job_id": str(job_id), "schema_version": req.schema_version, "v": 1},
            EVENT_REQUESTED,
            None if ref is None else ref.uri,
            None if ref is None else ref.version,
            None if ref is None else ref.page_count,
        )
