"""Retention: the content of settled jobs ends, then their history, per tenant policy.

"Nothing ends" (issue 46): without this pass documents, results and job events
grow for ever. Each tenant has two horizons (``tenant_retention``, migration 031;
defaults :class:`RetentionConfig`), counted from a final job's ``finished_at``
(SUCCEEDED, FAILED_TERMINAL, CANCELLED; a job awaiting review keeps everything):

* **content** (default 30 days): the extracted result and its validation detail,
  the document's text (``documents.content``, ``document_texts``: only once no
  unremoved job shares the document), the payload copies of finished deliveries, and
  what reviewers wrote about the invoice (a correction's values, reasons' details and
  note; a decision's note: migration 046, as erasure empties them).
  A document so released that names a stored object (an uploaded file) is marked
  ``object_pending_at``; after the batch's commit the pass removes the object unless
  a documents row of any tenant still needs it, and records the outcome on the row
  (:mod:`pipeline.jobs.object_removal`, shared with erasure). A store that does not
  answer leaves it pending for the next pass. The audit
  skeleton stays: the job row (states, fence, request hash), the document row
  (sha256, size, media type), the result's decision, attempts, review decisions
  (approve or reject) and corrections (which fields, which reasons' codes), the
  deliveries' ``body_sha256``. Each job gets a ``job_retention_marks`` row
  saying what went and when; ``explain`` prints it.
* **audit** (default 365 days): the job's ``job_events`` and ``execution_inbox``
  rows go as well; the mark records it.

A legal hold (the tenant's or one job's, :mod:`pipeline.jobs.legal_holds`) stops
both. Dead letters keep their own retention (:mod:`pipeline.messaging.dlq_retention`).

**It never blocks the claim path.** Each batch is one statement in its own short
transaction over at most ``batch`` jobs, locked ``FOR NO KEY UPDATE SKIP LOCKED``
(a job another transaction holds is left for the next pass, never waited for);
the claim path only touches READY / RETRY_SCHEDULED / RUNNING rows and their
indexes, which the pass neither locks nor writes. Within a pass the batches walk
``(finished_at, id)`` with a keyset cursor (index ``extraction_jobs_final_finished``),
so a pass reads each due job once. Every batch checks its row counts: each job it
locked is marked, or the batch raises.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.errors import DocumentStoreUnavailable
from pipeline.jobs.object_removal import (
    OBJECT_REMOVED,
    OBJECT_SHARED,
    ErasableStore,
    remove_unneeded_object,
)
from pipeline.periodic import PeriodicPass
from pipeline.queries import q
from pipeline.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionConfig:
    """The default horizons (a tenant's own policy overrides them), the batch size,
    and how often the maintenance actor runs the pass."""

    content_days: int = 30
    audit_days: int = 365
    batch: int = 500
    interval_seconds: float = 3600.0
    #: After each batch the pass waits this many times as long as the batch took, so
    #: it works at most 1 / (1 + ratio) of its wall time (0: back to back).
    pause_ratio: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.content_days <= self.audit_days:
            raise ValueError("need 1 <= content_days <= audit_days")
        if self.batch <= 0 or self.interval_seconds <= 0:
            raise ValueError("batch and interval must be positive")
        if not 0 <= self.pause_ratio <= 100:
            raise ValueError("pause_ratio must be within 0..100")

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionConfig:
        return cls(
            content_days=settings.retention_content_days,
            audit_days=settings.retention_audit_days,
            batch=settings.retention_batch,
            interval_seconds=settings.retention_interval_seconds,
            pause_ratio=settings.retention_pause_ratio,
        )


@dataclass
class RetentionReport:
    """What one pass removed (or, dry, would remove), per table, and how long it took."""

    dry_run: bool
    content_jobs: int = 0
    results: int = 0
    documents: int = 0
    document_texts: int = 0
    delivery_payloads: int = 0
    #: Rows of what reviewers wrote, emptied: corrections (values before and after,
    #: reasons' details, note) and decisions (note).
    review_corrections: int = 0
    review_decisions: int = 0
    #: Stored objects removed (dry: released or pending, each removed unless another
    #: documents row still needs it); kept because still needed; left pending (the
    #: store did not answer, or the pass had no store) for the next pass.
    objects: int = 0
    objects_shared: int = 0
    objects_pending: int = 0
    audit_jobs: int = 0
    job_events: int = 0
    inbox_records: int = 0
    content_batches: int = 0
    audit_batches: int = 0
    #: The most jobs one batch locked (never above the configured batch).
    largest_batch: int = 0
    seconds: float = 0.0
    #: Of ``seconds``, how long the pass waited between batches (``pause_ratio``).
    paused_seconds: float = 0.0
    batch_seconds: list[float] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows emptied or deleted (the marks the pass writes are not counted)."""
        return (
            self.results
            + self.documents
            + self.document_texts
            + self.delivery_payloads
            + self.review_corrections
            + self.review_decisions
            + self.job_events
            + self.inbox_records
        )

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("batch_seconds")
        out["rows"] = self.rows
        out["max_batch_seconds"] = round(max(self.batch_seconds, default=0.0), 4)
        out["paused_seconds"] = round(self.paused_seconds, 3)
        return out


class RetentionBatchMismatch(RuntimeError):
    """A batch marked a different number of jobs than it locked (its transaction is
    rolled back: nothing of it is kept)."""


async def _horizons(conn: asyncpg.Connection, config: RetentionConfig) -> tuple[int, int]:
    row = await conn.fetchrow(
        q("retention_policy_min_days"), config.content_days, config.audit_days
    )
    return int(row["content_days"]), int(row["audit_days"])


async def retention_due(
    pool: asyncpg.Pool,
    config: RetentionConfig,
    *,
    tenant: uuid.UUID | None = None,
    clock: Clock | None = None,
) -> RetentionReport:
    """What a pass would remove now (all tenants, or one); writes nothing."""
    now = (clock or DatabaseClock()).now()
    started = time.perf_counter()
    async with pool.acquire() as conn:
        content = await conn.fetchrow(
            q("retention_content_due_count"), now, config.content_days, tenant
        )
        audit = await conn.fetchrow(q("retention_audit_due_count"), now, config.audit_days, tenant)
    return RetentionReport(
        dry_run=True,
        content_jobs=content["jobs"],
        results=content["results"],
        documents=content["documents"],
        document_texts=content["document_texts"],
        delivery_payloads=content["delivery_payloads"],
        review_corrections=content["review_corrections"],
        review_decisions=content["review_decisions"],
        objects=content["objects"],
        audit_jobs=audit["jobs"],
        job_events=audit["job_events"],
        inbox_records=audit["inbox_records"],
        seconds=time.perf_counter() - started,
    )


async def run_retention(
    pool: asyncpg.Pool,
    config: RetentionConfig,
    *,
    tenant: uuid.UUID | None = None,
    clock: Clock | None = None,
    store: ErasableStore | None = None,
) -> RetentionReport:
    """One pass: content batches until none is due, the stored objects they released
    (and earlier passes left pending), then audit batches. Without ``store`` the
    objects stay pending for a pass that has one.

    Raises:
        RetentionBatchMismatch: a batch's marks did not match the jobs it locked.
    """
    now = (clock or DatabaseClock()).now()
    report = RetentionReport(dry_run=False)
    started = time.perf_counter()
    async with pool.acquire() as conn:
        content_days, audit_days = await _horizons(conn, config)
    cursor: tuple[datetime | None, uuid.UUID | None] = (None, None)
    while True:
        row = await _batch(
            pool,
            report,
            "retention_content_remove_batch",
            now,
            config.batch,
            config.content_days,
            tenant,
            content_days,
            *cursor,
        )
        report.content_batches += 1
        report.content_jobs += row["jobs"]
        report.results += row["results"]
        report.documents += row["documents"]
        report.document_texts += row["document_texts"]
        report.delivery_payloads += row["delivery_payloads"]
        report.review_corrections += row["review_corrections"]
        report.review_decisions += row["review_decisions"]
        if row["jobs"] < config.batch:
            break
        cursor = (row["cursor_finished_at"], row["cursor_id"])
        await _pause(report, config)
    if store is not None:
        await _remove_objects(pool, report, store, tenant, config.batch, now)
    async with pool.acquire() as conn:
        report.objects_pending = int(
            await conn.fetchval(q("retention_object_pending_count"), tenant)
        )
    while True:
        row = await _batch(
            pool,
            report,
            "retention_audit_remove_batch",
            now,
            config.batch,
            config.audit_days,
            tenant,
            audit_days,
        )
        report.audit_batches += 1
        report.audit_jobs += row["jobs"]
        report.job_events += row["job_events"]
        report.inbox_records += row["inbox_records"]
        if row["jobs"] < config.batch and row["refused_records"] < config.batch:
            break
        await _pause(report, config)
    report.seconds = time.perf_counter() - started
    return report


class RetentionPass(PeriodicPass):
    """The maintenance actor's periodic :func:`run_retention` over every tenant."""

    pass_name = "retention pass"

    def __init__(
        self,
        pool: asyncpg.Pool,
        config: RetentionConfig,
        *,
        clock: Clock | None = None,
        store: ErasableStore | None = None,
    ) -> None:
        self.pool = pool
        self.config = config
        self.clock = clock or DatabaseClock()
        self.store = store
        self.last: RetentionReport | None = None

    async def run_once(self) -> RetentionReport:
        report = await run_retention(self.pool, self.config, clock=self.clock, store=self.store)
        if report.content_jobs or report.audit_jobs:
            log.info("retention: %s", report.as_dict())
        self.last = report
        return report

    def pass_interval(self) -> float:
        return self.config.interval_seconds


async def _pause(report: RetentionReport, config: RetentionConfig) -> None:
    """Leave the database to others for ``pause_ratio`` times the last batch's time."""
    if config.pause_ratio and report.batch_seconds:
        wait = report.batch_seconds[-1] * config.pause_ratio
        report.paused_seconds += wait
        await asyncio.sleep(wait)


async def _batch(
    pool: asyncpg.Pool, report: RetentionReport, query: str, *args: Any
) -> asyncpg.Record:
    """One bounded batch in its own short transaction: timed into ``report``, and
    refused unless it marked exactly the jobs it locked."""
    t0 = time.perf_counter()
    async with pool.acquire() as conn:
        row = await conn.fetchrow(q(query), *args)
    report.batch_seconds.append(time.perf_counter() - t0)
    report.largest_batch = max(report.largest_batch, row["jobs"])
    if row["marked"] != row["jobs"]:
        raise RetentionBatchMismatch(f"{query}: locked {row['jobs']} jobs, marked {row['marked']}")
    return row


async def _remove_objects(
    pool: asyncpg.Pool,
    report: RetentionReport,
    store: ErasableStore,
    tenant: uuid.UUID | None,
    batch: int,
    now: datetime | None,
) -> None:
    """Each pending document's object, oldest first, each in its own short transaction
    (the uri's lock is held over the check, the removal and the record). A pass reads
    each pending document once (keyset cursor), so a store that fails ends nothing."""
    cursor: tuple[datetime | None, uuid.UUID | None] = (None, None)
    while True:
        async with pool.acquire() as conn:
            rows = await conn.fetch(q("retention_object_pending_list"), tenant, batch, *cursor)
        for row in rows:
            outcome = await _remove_object(pool, row["id"], row["tenant_id"], store, now)
            if outcome == OBJECT_REMOVED:
                report.objects += 1
            elif outcome == OBJECT_SHARED:
                report.objects_shared += 1
        if len(rows) < batch:
            return
        cursor = (rows[-1]["object_pending_at"], rows[-1]["id"])


async def _remove_object(
    pool: asyncpg.Pool,
    document: uuid.UUID,
    tenant: uuid.UUID | None,
    store: ErasableStore,
    now: datetime | None,
) -> str | None:
    """Remove one pending document's object and record the outcome; None when another
    pass holds it, it is no longer pending, or the store did not answer (still pending)."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(q("retention_object_lock"), document, tenant)
        if row is None or row["object_pending_at"] is None:
            return None  # another pass has it, or finished it
        try:
            outcome = await remove_unneeded_object(conn, row["uri"], row["version"], store)
        except DocumentStoreUnavailable as exc:
            log.warning("retention: stored object %s stays pending: %s", row["uri"], exc)
            return None
        recorded = await conn.fetchval(
            q("retention_object_record_if_pending"),
            document,
            tenant,
            outcome,
            now,
            row["object_pending_at"],
        )
        if recorded is None:  # pragma: no cover - the row is locked above
            raise RuntimeError(f"document {document}: its object outcome was recorded twice")
    return outcome
