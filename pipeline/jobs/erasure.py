"""Erasure of a job's content: the invoice goes, the audit skeleton stays.

A tenant (or an operator, for one job or a whole tenant) asks that an invoice's data
be forgotten. What goes, in one transaction (sql/queries/erasure.sql): a pasted
document's text and a file's name, the text a file was read as and its words, the
extracted values and the validation quoting them, the duplicate-detection identity,
review notes and corrections' values, error details, and the bodies of the job's
deliveries; then, after the commit, the file in the object store. What stays: states,
fences, attempts, decisions, every digest (the document's, each delivery body's, the
result's, kept in the tombstone) and the tombstone itself (``job_erasures``: who, why,
when, what was erased, what was kept and why). Invariants:

* **Tenant-scoped**: every read and write names the tenant; another tenant's job is
  :class:`~pipeline.errors.NotFound`.
* **Fenced first**: a job not settled (READY, RETRY_SCHEDULED, RUNNING) is cancelled
  through :func:`~pipeline.jobs.cancellation.cancel_in_transaction` in the same
  transaction (``cancelled_first``); a RUNNING attempt's late result then matches no
  fence and is recorded as stale, and a text it would keep finds the document erased.
* **Shared content**: a tenant's jobs that sent the same bytes share one documents
  row, and the embedded store one file across tenants. The row's content goes only
  when every job referring to it is erased; the file only when no documents row that
  is not erased names it (``object_outcome``: ``shared``). An object a client put in
  its own place in the bucket is not Fenceline's to delete (``client_object``).
* **Deliveries**: those not yet sent are abandoned; those sent are reported in the
  tombstone, never recalled: the receiver keeps its copy.
* **Idempotent and audited**: erasing again answers the same tombstone
  (``repeated=True``) and writes nothing but a stored-object removal that a crash cut
  short; the first erasure writes one job event (``content_erased``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.data_keys import shred_tenant_keys
from pipeline.database import fetch_owned
from pipeline.errors import DocumentStoreUnavailable
from pipeline.jobs.cancellation import CancelRequest, cancel_in_transaction
from pipeline.jobs.object_removal import (
    OBJECT_CLIENT,
    OBJECT_REMOVED,
    OBJECT_SHARED,
    ErasableStore,
    object_needed,
    remove_unneeded_object,
)
from pipeline.queries import q
from pipeline.states import CANCELLABLE, JobState

#: ``object_outcome`` of a tombstone whose object removal has not run yet (migration
#: 032); the others are :mod:`pipeline.jobs.object_removal`'s outcomes.
OBJECT_PENDING = "pending"


@dataclass(frozen=True)
class EraseRequest:
    """Who erases and why; both go to the tombstone."""

    requested_by: str
    reason: str | None = None

    def __post_init__(self) -> None:
        if not self.requested_by.strip() or len(self.requested_by) > 200:
            raise ValueError("requested_by is required (at most 200 characters)")
        if self.reason is not None and len(self.reason) > 4000:
            raise ValueError("reason is at most 4000 characters")


@dataclass(frozen=True)
class Erased:
    """One job's tombstone (``repeated``: it had been erased before this call)."""

    job_id: uuid.UUID
    erasure_id: uuid.UUID
    requested_by: str
    reason: str | None
    job_state: JobState
    cancelled_first: bool
    document_sha256: str | None
    document_erased: bool
    result_sha256: str | None
    object_uri: str | None
    object_outcome: str | None
    object_removed_at: datetime | None
    deliveries_abandoned: tuple[uuid.UUID, ...]
    deliveries_sent: tuple[uuid.UUID, ...]
    rows: dict[str, int]
    created_at: datetime
    repeated: bool = False


@dataclass
class EraseReport:
    """What a tenant-wide erasure did: the tombstones it wrote, in order, and the data
    key versions it shredded once no job was left (crypto-shredding: whatever copy of
    the tenant's sealed content survives elsewhere, a backup or a replica, is
    unreadable from then on)."""

    erased: list[Erased] = field(default_factory=list)
    keys_shredded: list[int] = field(default_factory=list)


async def erase_job(
    pool: asyncpg.Pool,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    request: EraseRequest,
    store: ErasableStore,
    *,
    clock: Clock | None = None,
) -> Erased:
    """Erase one of ``tenant_id``'s jobs, or return its tombstone again.

    A store that does not answer the removal leaves the tombstone's
    ``object_outcome`` ``pending``; erasing again retries it.

    Raises:
        NotFound: no such job for this tenant.
    """
    now = (clock or DatabaseClock()).now()
    async with pool.acquire() as conn:
        async with conn.transaction():
            erased = await _erase_locked(conn, tenant_id, job_id, request, store, now)
        if erased.object_outcome == OBJECT_PENDING and erased.object_uri is not None:
            erased = await _remove_object(conn, erased, tenant_id, store, now)
    return erased


async def erase_tenant(
    pool: asyncpg.Pool,
    tenant_id: uuid.UUID,
    request: EraseRequest,
    store: ErasableStore,
    *,
    batch: int = 100,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
    clock: Clock | None = None,
) -> EraseReport:
    """Erase the tenant's jobs (operator scope), each in its own transaction, oldest
    first, in batches of ``batch``; jobs in flight are cancelled first. Once none is
    left, the tenant's data keys are shredded (:func:`~pipeline.data_keys.shred_tenant_keys`);
    the tenant's next job gets a new one.

    Args:
        limit: stop after this many jobs (None: until none is left). Each job's
            erasure is idempotent, so a bounded call is simply called again.
        progress: called after each batch with the jobs erased so far.
    """
    if batch < 1 or (limit is not None and limit < 1):
        raise ValueError("batch and limit must be positive")
    report = EraseReport()
    while limit is None or len(report.erased) < limit:
        want = batch if limit is None else min(batch, limit - len(report.erased))
        async with pool.acquire() as conn:
            ids = [r["id"] for r in await conn.fetch(q("job_select_erasable"), tenant_id, want)]
        if not ids:
            break
        for job_id in ids:
            report.erased.append(
                await erase_job(pool, tenant_id, job_id, request, store, clock=clock)
            )
        if progress is not None:
            progress(len(report.erased))
    async with pool.acquire() as conn:
        if await erasable_jobs(conn, tenant_id) == 0:  # every job erased: the keys go too
            report.keys_shredded = await shred_tenant_keys(
                conn, tenant_id, now=(clock or DatabaseClock()).now()
            )
    return report


async def erasable_jobs(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> int:
    """How many of the tenant's jobs are not erased yet."""
    return int(await conn.fetchval(q("job_count_erasable"), tenant_id))


async def erasures_for_job(conn: asyncpg.Connection, job_id: uuid.UUID) -> list[dict[str, Any]]:
    """The job's tombstone, if any (``explain``; operator scope)."""
    rows = [dict(r.items()) for r in await conn.fetch(q("job_erasure_list_for_job"), job_id)]
    for row in rows:
        row["rows"] = _json(row["rows"])
    return rows


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _erased(row: asyncpg.Record, *, repeated: bool) -> Erased:
    return Erased(
        job_id=row["job_id"],
        erasure_id=row["id"],
        requested_by=row["requested_by"],
        reason=row["reason"],
        job_state=JobState(row["job_state"]),
        cancelled_first=row["cancelled_first"],
        document_sha256=row["document_sha256"],
        document_erased=row["document_erased"],
        result_sha256=row["result_sha256"],
        object_uri=row["object_uri"],
        object_outcome=row["object_outcome"],
        object_removed_at=row["object_removed_at"],
        deliveries_abandoned=tuple(row["deliveries_abandoned"]),
        deliveries_sent=tuple(row["deliveries_sent"]),
        rows={k: int(v) for k, v in _json(row["rows"]).items()},
        created_at=row["created_at"],
        repeated=repeated,
    )


def _count(status: str) -> int:
    """The row count of an asyncpg command status (``UPDATE 3``, ``DELETE 0``)."""
    return int(status.rsplit(" ", 1)[-1])


async def _erase_locked(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    request: EraseRequest,
    store: ErasableStore,
    now: datetime | None,
) -> Erased:
    job = await fetch_owned(conn, "job_lock_for_erase", job_id, tenant_id, "job")
    earlier = await conn.fetchrow(q("job_erasure_get_for_tenant"), job_id, tenant_id)
    if earlier is not None:
        return _erased(earlier, repeated=True)
    cancelled_first = JobState(job["state"]) in CANCELLABLE
    if cancelled_first:
        await cancel_in_transaction(
            conn,
            tenant_id,
            job_id,
            CancelRequest(requested_by=request.requested_by, reason="erasure"),
            now,
        )
        job = await fetch_owned(conn, "job_lock_for_erase", job_id, tenant_id, "job")
    rows: dict[str, int] = {}
    result_sha256 = await conn.fetchval(q("result_erase_for_job"), job_id, tenant_id)
    rows["extraction_results"] = int(result_sha256 is not None)
    for name, table in (
        ("invoice_identity_delete_for_job", "invoice_identities"),
        ("invoice_near_keys_delete_for_job", "invoice_near_keys"),
        ("review_correction_erase_for_job", "review_corrections"),
        ("review_decision_erase_for_job", "review_decisions"),
        ("attempt_erase_details_for_job", "job_attempts"),
        ("job_erase_error_if_locked", "extraction_jobs"),
    ):
        rows[table] = _count(await conn.execute(q(name), job_id, tenant_id))
    deliveries = await conn.fetchrow(q("delivery_erase_for_job"), job_id, tenant_id)
    rows["deliveries"] = int(deliveries["blanked"])
    document_id = job["document_id"]
    document_sha256: str | None = None
    document_erased = False
    object_uri = object_version = object_outcome = None
    if document_id is not None:
        doc = await conn.fetchrow(
            q("document_erase_if_unreferenced"), document_id, tenant_id, job_id, now
        )
        rows["documents"] = int(doc is not None)
        if doc is None:  # still another job's, or erased with another job already
            doc = await fetch_owned(conn, "document_get_for_erase", document_id, tenant_id, "doc")
            document_erased = doc["erased_at"] is not None
        else:
            document_erased = True
            rows["document_texts"] = _count(
                await conn.execute(q("document_text_delete_for_document"), document_id, tenant_id)
            )
            object_uri, object_version = doc["uri"], doc["version"]
        document_sha256 = doc["sha256"]
        if object_uri is not None:
            if store.upload_digest(object_uri) is None:
                object_outcome = OBJECT_CLIENT
            elif await object_needed(conn, object_uri):
                object_outcome = OBJECT_SHARED
            else:
                object_outcome = OBJECT_PENDING
    seq = await conn.fetchval(q("job_event_insert_erased"), job_id, tenant_id)
    if seq is None:  # pragma: no cover - the job row is locked above
        raise RuntimeError(f"job {job_id} vanished while erasing")
    written = await conn.fetchval(
        q("job_erasure_insert"),
        uuid.uuid4(),
        job_id,
        tenant_id,
        request.requested_by,
        request.reason,
        job["state"],
        cancelled_first,
        document_id,
        document_sha256,
        document_erased,
        result_sha256,
        object_uri,
        object_version,
        object_outcome,
        deliveries["abandoned"],
        deliveries["sent"],
        rows,
        now,
    )
    if written is None:  # pragma: no cover - the job row lock serialises erasures
        raise RuntimeError(f"job {job_id} was erased concurrently")
    tombstone = await conn.fetchrow(q("job_erasure_get_for_tenant"), job_id, tenant_id)
    return _erased(tombstone, repeated=False)


async def _remove_object(
    conn: asyncpg.Connection,
    erased: Erased,
    tenant_id: uuid.UUID,
    store: ErasableStore,
    now: datetime | None,
) -> Erased:
    """Remove the stored object after the commit (a store is no transaction), then
    record it; a crash in between leaves ``pending``, which erasing again finishes."""
    row = await conn.fetchrow(q("job_erasure_get_for_tenant"), erased.job_id, tenant_id)
    if row is None or row["object_outcome"] != OBJECT_PENDING:  # pragma: no cover - raced
        return erased
    async with conn.transaction():
        # Another tenant may have sent the same bytes since: the file is theirs too
        # now (the helper's lock and check; the tombstone stays pending then, and
        # that row's own release removes the object).
        try:
            outcome = await remove_unneeded_object(
                conn, row["object_uri"], row["object_version"], store
            )
        except DocumentStoreUnavailable:
            return erased  # still pending: erasing again retries the removal
        if outcome != OBJECT_REMOVED:
            return erased
        removed = await conn.fetchval(
            q("job_erasure_object_removed_if_pending"), erased.job_id, tenant_id, now
        )
    if removed is None:  # pragma: no cover - guarded by the read above in this session
        raise RuntimeError(f"job {erased.job_id}: the object removal was recorded twice")
    final = await conn.fetchrow(q("job_erasure_get_for_tenant"), erased.job_id, tenant_id)
    return _erased(final, repeated=erased.repeated)
