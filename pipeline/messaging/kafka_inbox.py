"""The Kafka ingress's inbox: one record of a topic becomes one job, exactly once.

:class:`KafkaInbox` admits and accepts a record's job through the REST intake's
statement (``intake_accept``) with its checks (:class:`~pipeline.jobs.TenantQuota`) and
writes the record's ``kafka_ingress_records`` row (unique on its tenant, topic,
partition and offset; migration 043) in one transaction; a record read again finds
its row and changes nothing. A record that cannot become a job is recorded as
*refused* with its reason. The consumer that feeds it and commits offsets is
:mod:`pipeline.messaging.kafka_ingress`; nothing here speaks Kafka.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import asyncpg
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.clock import Clock, DatabaseClock
from pipeline.errors import IdempotencyConflict
from pipeline.jobs import (
    AcceptRequest,
    Demand,
    DocumentIn,
    JobStore,
    TenantQuota,
    demand_for,
)
from pipeline.messaging.offsets import Partition
from pipeline.queries import q

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ the message
class KafkaDocument(BaseModel):
    """The OCR text of one document, as the REST intake's ``document`` takes it."""

    model_config = ConfigDict(extra="forbid")

    text: Annotated[str, Field(min_length=1, pattern=r"^[^\x00]*$")]
    content_type: Annotated[str, Field(pattern=r"^[a-z]+/[a-z0-9.+-]{1,80}$")] = "text/plain"
    filename: Annotated[str, Field(max_length=255)] | None = None


class KafkaSubmission(BaseModel):
    """One record's value: a subset of ``POST /v1/extraction-jobs``'s JSON body.

    ``idempotency_key`` (optional) dedupes a producer's own retries, which land at
    new offsets; without it the record's position is the key. Request options and
    document references are not taken here (a record naming them is refused).
    """

    model_config = ConfigDict(extra="forbid")

    document: KafkaDocument
    idempotency_key: Annotated[str, Field(pattern=r"^[\x21-\x7e]{1,200}$")] | None = None
    priority: Annotated[int, Field(ge=-10, le=10, strict=True)] = 0
    deadline_seconds: Annotated[float, Field(gt=0, le=30 * 86400)] | None = None


class KafkaOutcome(StrEnum):
    ACCEPTED = "accepted"  #: a new job
    REPLAYED = "replayed"  #: the record's idempotency key named a job already accepted
    REFUSED = "refused"  #: recorded with its reason; no job
    DUPLICATE = "duplicate"  #: this position was recorded before: read again, no-op


#: The count of admission refusals in :attr:`KafkaIngress.counts` (not an outcome: a
#: held record is tried again, and counted again each time it is refused).
HELD = "held"


@dataclass(frozen=True)
class KafkaRecord:
    """Where a record came from, and its value."""

    topic: str
    partition: int
    offset: int
    value: bytes | None

    @property
    def part(self) -> Partition:
        return (self.topic, self.partition)

    @property
    def position_key(self) -> str:
        """The idempotency key of a record that names none: its source position."""
        return f"kafka:{self.topic}:{self.partition}:{self.offset}"


@dataclass(frozen=True)
class KafkaIngestResult:
    outcome: KafkaOutcome
    job_id: uuid.UUID | None = None
    reason: str | None = None


class _Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _AlreadyRecorded(Exception):
    """The position's row committed after our read: roll our job back."""


def _submission(value: bytes | None) -> KafkaSubmission:
    if value is None:
        raise _Refused("empty_record")
    try:
        return KafkaSubmission.model_validate(json.loads(value))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _Refused("not_json") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise _Refused(f"invalid:{where}:{first['type']}") from None


# ------------------------------------------------------------------ the inbox
class KafkaInbox:
    """The database half: one record → its job and its position row, in one transaction.

    Admission is the REST intake's: ``quota`` (by default one over the store's
    settings) and the demand :func:`~pipeline.jobs.demand_for` estimates from the
    document's size. ``refuse_text`` (a document's text → the limit it is over, or
    None) is the REST intake's too, handed in by the caller that composes it
    (``fenceline kafka-ingress``).
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        store: JobStore,
        tenant_id: uuid.UUID,
        *,
        quota: TenantQuota | None = None,
        refuse_text: Callable[[str], str | None] = lambda _text: None,
        clock: Clock | None = None,
    ) -> None:
        self.pool = pool
        self.store = store
        self.tenant_id = tenant_id
        self.settings = store.settings
        self.clock = clock or DatabaseClock()
        self.quota = quota or TenantQuota(self.settings, clock=self.clock)
        self.refuse_text = refuse_text

    async def ingest(self, rec: KafkaRecord) -> KafkaIngestResult:
        """Record ``rec`` durably, exactly once per source position.

        Raises:
            AdmissionRejected: a quota, the spend budget or capacity refused the job;
                nothing was written, and the record is to be tried again.
        """
        position = (self.tenant_id, rec.topic, rec.partition, rec.offset)
        async with self.pool.acquire() as conn:
            seen = await conn.fetchrow(q("kafka_ingress_get"), *position)
            if seen is not None:
                return KafkaIngestResult(KafkaOutcome.DUPLICATE, seen["job_id"], seen["reason"])
            try:
                req, demand = self._request(rec)
                capacity, check = await self.quota.check(conn, None, demand)
                async with conn.transaction():
                    row = await self.store.admit_and_accept(req, check, conn=conn)
                    accepted = self.quota.answer(row, req, demand, capacity)
                    outcome = KafkaOutcome.ACCEPTED if accepted.created else KafkaOutcome.REPLAYED
                    got = await conn.fetchval(
                        q("kafka_ingress_record"),
                        *position,
                        accepted.job_id,
                        outcome.value,
                        None,
                        self.clock.now(),
                    )
                    if got is None:
                        raise _AlreadyRecorded
                return KafkaIngestResult(outcome, accepted.job_id)
            except _AlreadyRecorded:
                return KafkaIngestResult(KafkaOutcome.DUPLICATE)
            except IdempotencyConflict:
                reason = "idempotency_conflict"
            except _Refused as exc:
                reason = exc.reason
            got = await conn.fetchval(
                q("kafka_ingress_record"),
                *position,
                None,
                KafkaOutcome.REFUSED.value,
                reason,
                self.clock.now(),
            )
        if got is None:
            return KafkaIngestResult(KafkaOutcome.DUPLICATE)
        log.warning("kafka ingress: refused %s/%d@%d: %s", *position[1:], reason)
        return KafkaIngestResult(KafkaOutcome.REFUSED, reason=reason)

    def _request(self, rec: KafkaRecord) -> tuple[AcceptRequest, Demand]:
        sub = _submission(rec.value)
        over = self.refuse_text(sub.document.text)
        if over is not None:
            raise _Refused(f"document_over_limit:{over}")
        doc = DocumentIn(sub.document.text, sub.document.content_type, sub.document.filename)
        demand = demand_for(doc.size, self.settings)
        req = AcceptRequest(
            tenant_id=self.tenant_id,
            idempotency_key=sub.idempotency_key or rec.position_key,
            document=doc,
            priority=sub.priority,
            estimated_tokens=demand.tokens,
            deadline_seconds=sub.deadline_seconds,
        )
        return req, demand
