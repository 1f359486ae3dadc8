"""The durable inbox: broker delivery → execution responsibility in PostgreSQL.

One transaction per delivery — a single statement, so one round trip — inserts
the inbox record (unique on ``event_id``, with the payload digest) and, if the
job is waiting to run, notifies the scheduler; the broker ack follows only
after that commit. The ack therefore means "execution responsibility was
durably transferred", not "inference ran".

Redelivery is expected (a consumer crash between commit and ack, a relay
publishing again after an unknown outcome):

* same event id, same digest → acked as a no-op;
* same event id, different digest → quarantined: sent to the DLQ with reason
  ``digest_mismatch``, the alert counter rises, nothing else changes;
* the inbox never writes the job, so it can never reset a RUNNING or settled job.

Poison messages (not JSON, missing fields, unknown version, unexpected type, a
job that does not exist) go to the DLQ after one delivery with a reason header;
retrying them cannot help.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from enum import StrEnum

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.errors import PoisonMessage
from pipeline.jobs import EVENT_REQUESTED
from pipeline.messaging.broker import HEADER_SENT_AT, BrokerConfig, EventMessage
from pipeline.messaging.consumer import Delivery, Disposition
from pipeline.messaging.metrics import BrokerMetrics, default_metrics
from pipeline.messaging.queue_service import QueueService
from pipeline.messaging.scheduler import TRANSIENT_DB_ERRORS
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tracing import SPAN_INBOX, SpanKind, context_from_headers, job_span, set_error

log = logging.getLogger(__name__)


class InboxOutcome(StrEnum):
    INGESTED = "ingested"  #: new inbox record committed
    DUPLICATE = "duplicate"  #: same event id and digest: a redelivery, no-op
    QUARANTINED = "quarantined"  #: same event id, different digest: DLQ + alert
    POISON = "poison"  #: unreadable or unknown message: DLQ
    UNKNOWN_JOB = "unknown_job"  #: names a job this database does not have: DLQ


@dataclass(frozen=True)
class IngestResult:
    outcome: InboxOutcome
    event_id: uuid.UUID | None = None
    job_id: uuid.UUID | None = None
    job_state: JobState | None = None
    reason: str = ""
    detail: str = ""
    #: Relay send → inbox commit, from the relay's header (None without it).
    lag_seconds: float | None = None


class Inbox:
    """The database half of the ingress consumer, usable without a broker."""

    def __init__(self, pool: asyncpg.Pool, *, clock: Clock | None = None) -> None:
        self.pool = pool
        self.clock = clock or DatabaseClock()

    async def ingest(self, message: EventMessage) -> IngestResult:
        """Record ``message`` durably, exactly once per event id (one statement)."""
        if message.event_type != EVENT_REQUESTED:
            raise PoisonMessage("unexpected_type", message.event_type)
        if message.job_id is None:
            raise PoisonMessage("missing_fields", "job_id is null")
        digest = message.digest()
        eid, jid = message.event_id, message.job_id
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(q("inbox_record"), eid, jid, digest, self.clock.now())
            existing_job, existing_digest = row["existing_job_id"], row["existing_digest"]
            if existing_digest is None and not row["inserted"] and row["job_state"] is not None:
                # A concurrent delivery of the same event committed after our snapshot.
                again = await conn.fetchrow(q("inbox_get"), eid)
                if again is None:  # pragma: no cover - the conflicting row is committed
                    raise RuntimeError(f"inbox conflict on {eid} without a row")
                existing_job, existing_digest = again["job_id"], again["payload_digest"]
        if existing_digest is not None:
            if existing_digest == digest:
                return IngestResult(InboxOutcome.DUPLICATE, eid, jid)
            return IngestResult(
                InboxOutcome.QUARANTINED,
                eid,
                jid,
                reason="digest_mismatch",
                detail=(
                    f"event {eid} first seen for job {existing_job} with digest "
                    f"{existing_digest[:16]}, now job {jid} digest {digest[:16]}"
                ),
            )
        if row["job_state"] is None:
            return IngestResult(
                InboxOutcome.UNKNOWN_JOB, eid, jid, reason="unknown_job", detail=str(jid)
            )
        return IngestResult(InboxOutcome.INGESTED, eid, jid, JobState(row["job_state"]))


#: Test hook, awaited after the inbox commit and before the ack.
AfterCommit = Callable[[IngestResult], Awaitable[None]]


class InboxConsumer(QueueService):
    """The ingress consumer service: the work queue → :class:`Inbox` → ack."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        *,
        clock: Clock | None = None,
        metrics: BrokerMetrics | None = None,
        prefetch: int | None = None,
        after_commit: AfterCommit | None = None,
        retry_seconds: float = 1.0,
        handler_timeout: float = 30.0,
        backoff: tuple[float, float] = (0.1, 5.0),
    ) -> None:
        cfg = BrokerConfig.required(settings, "ingress consumer")
        self.inbox = Inbox(pool, clock=clock)
        self.metrics = metrics or default_metrics()
        self.after_commit = after_commit
        self.retry_seconds = retry_seconds
        super().__init__(
            cfg,
            cfg.work_queue,
            prefetch=prefetch or cfg.prefetch,
            name="inbox",
            source="inbox",
            handler_timeout=handler_timeout,
            backoff=backoff,
        )

    async def run_once(self, limit: int = 100) -> list[IngestResult]:
        """Ingest up to ``limit`` ready messages now (pull mode)."""
        settled = await self.consumer.run_once(limit)
        return [d.result for d in settled if isinstance(d.result, IngestResult)]

    async def handle(self, d: Delivery) -> Disposition:
        """Decide one delivery; the consumer acks only after this returns."""
        with job_span(
            SPAN_INBOX,
            context_from_headers(d.headers),
            {"fenceline.message_id": d.message_id, "fenceline.redelivered": d.redelivered},
            kind=SpanKind.CONSUMER,
        ) as span:
            disposition = await self._handle(d)
            result = disposition.result
            if isinstance(result, IngestResult):
                span.set_attribute("fenceline.inbox_outcome", result.outcome.value)
                if result.job_id is not None:
                    span.set_attribute("fenceline.job_id", str(result.job_id))
                if disposition.action != "ack":
                    set_error(span, result.reason or result.outcome.value, result.detail or "")
            return disposition

    async def _handle(self, d: Delivery) -> Disposition:
        try:
            message = EventMessage.parse(d.body)
            result = await self._ingest(message)
        except PoisonMessage as exc:
            result = IngestResult(InboxOutcome.POISON, reason=exc.reason, detail=exc.detail)
        sent_at = d.headers.get(HEADER_SENT_AT)
        if isinstance(sent_at, int) and result.outcome in (
            InboxOutcome.INGESTED,
            InboxOutcome.DUPLICATE,
        ):
            lag = max(0.0, time.time() - sent_at / 1e6)
            result = replace(result, lag_seconds=lag)
            self.metrics.broker_lag_seconds.observe(lag)
        self.metrics.inbox_messages.labels(outcome=result.outcome.value).inc()
        if result.outcome is InboxOutcome.QUARANTINED:
            self.metrics.inbox_digest_mismatch.inc()
            log.error("inbox: quarantined %s: %s", result.event_id, result.detail)
        if self.after_commit is not None:
            await self.after_commit(result)
        if result.outcome in (InboxOutcome.INGESTED, InboxOutcome.DUPLICATE):
            return Disposition("ack", result=result)
        return Disposition("dead_letter", result.reason, result.detail, result=result)

    async def _ingest(self, message: EventMessage) -> IngestResult:
        """Retry while the database is unreachable: the delivery stays unacked meanwhile.

        Any other error, and a database down for longer than the consumer's
        ``handler_timeout``, requeues the delivery after a bounded backoff
        (:class:`QueueConsumer`); the consumer's loop goes on either way.
        """
        while True:
            try:
                return await self.inbox.ingest(message)
            except TRANSIENT_DB_ERRORS as exc:
                log.warning("inbox: database unavailable (%s); retrying", exc)
                await asyncio.sleep(self.retry_seconds)
