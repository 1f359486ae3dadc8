"""Kafka ingress: submissions read from a topic become jobs, each record exactly once.

A producer (an ERP, a scanning service) writes one submission per record to a topic
of one tenant; ``fenceline kafka-ingress`` reads it in a consumer group and accepts
each record as a job (docs/kafka.md). The offset protocol is the spec's (§2):

* **Auto-commit is off** (and so is the client's automatic offset store): an offset
  is committed only by :class:`KafkaIngress`, only after the record's inbox row.
* **Each record is durable before its offset is committed.** :class:`KafkaInbox`
  accepts the job and writes the record's ``kafka_ingress_records`` row (unique on
  its tenant, topic, partition and offset; migration 043) in one transaction. A
  record read again after a crash in between finds its row and changes nothing.
* **Only a contiguous durable prefix is committed.** Records are handled several at
  once and finish out of order; :class:`~pipeline.messaging.offsets.OffsetTracker`
  gives each partition's commit position, which never passes a record not yet
  durable.
* **Paused, never blocked.** When ``window`` records are outstanding the ingress
  pauses its partitions and goes on polling (heartbeats, rebalances, the
  ``max.poll.interval.ms`` contract); it resumes below half the window. Nothing here
  waits for inference: accepting a job is one short transaction.

A record that cannot become a job (not JSON, not a submission, over a document limit,
an idempotency key reused for another document) is recorded as *refused* with its
reason and its offset moves on: retrying cannot help, and the row is where an
operator finds it. A database that does not answer is retried; any other error stops
the ingress with the record uncommitted, so a restart reads it again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

import asyncpg
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.clock import Clock, DatabaseClock
from pipeline.errors import IdempotencyConflict
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.messaging.offsets import OffsetTracker, Partition
from pipeline.messaging.scheduler import TRANSIENT_DB_ERRORS
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

    ``estimate_tokens`` (document bytes → tokens) and ``refuse_text`` (a document's
    text → the limit it is over, or None) are the REST intake's, handed in by the
    caller that composes them (``fenceline kafka-ingress``).
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        store: JobStore,
        tenant_id: uuid.UUID,
        *,
        estimate_tokens: Callable[[int], int] = lambda _size: 0,
        refuse_text: Callable[[str], str | None] = lambda _text: None,
        clock: Clock | None = None,
    ) -> None:
        self.pool = pool
        self.store = store
        self.tenant_id = tenant_id
        self.estimate_tokens = estimate_tokens
        self.refuse_text = refuse_text
        self.clock = clock or DatabaseClock()

    async def ingest(self, rec: KafkaRecord) -> KafkaIngestResult:
        """Record ``rec`` durably, exactly once per source position."""
        position = (self.tenant_id, rec.topic, rec.partition, rec.offset)
        async with self.pool.acquire() as conn:
            seen = await conn.fetchrow(q("kafka_ingress_get"), *position)
            if seen is not None:
                return KafkaIngestResult(KafkaOutcome.DUPLICATE, seen["job_id"], seen["reason"])
            try:
                req = self._request(rec)
                async with conn.transaction():
                    accepted = await self.store.accept(req, conn=conn)
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

    def _request(self, rec: KafkaRecord) -> AcceptRequest:
        sub = _submission(rec.value)
        over = self.refuse_text(sub.document.text)
        if over is not None:
            raise _Refused(f"document_over_limit:{over}")
        doc = DocumentIn(sub.document.text, sub.document.content_type, sub.document.filename)
        return AcceptRequest(
            tenant_id=self.tenant_id,
            idempotency_key=sub.idempotency_key or rec.position_key,
            document=doc,
            priority=sub.priority,
            estimated_tokens=self.estimate_tokens(doc.size),
            deadline_seconds=sub.deadline_seconds,
        )


# ------------------------------------------------------------------ the consumer
@dataclass(frozen=True)
class KafkaIngressConfig:
    bootstrap_servers: str
    topic: str
    group_id: str
    #: Records outstanding (read, not yet behind a committed position) before pausing.
    window: int = 64
    poll_timeout_seconds: float = 0.2
    max_poll_interval_ms: int = 300_000
    session_timeout_ms: int = 45_000
    #: Further librdkafka settings (security, client id); they cannot turn auto-commit on.
    extra: dict[str, Any] = field(default_factory=dict)

    def consumer_config(self) -> dict[str, Any]:
        return {
            **self.extra,
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "max.poll.interval.ms": self.max_poll_interval_ms,
            "session.timeout.ms": self.session_timeout_ms,
        }


#: Test hook, awaited after a record's inbox transaction and before it counts as durable.
AfterIngest = Callable[[KafkaRecord, KafkaIngestResult], Awaitable[None]]


class KafkaIngress:
    """Reads the topic, hands records to :class:`KafkaInbox`, commits durable prefixes."""

    def __init__(
        self,
        inbox: KafkaInbox,
        config: KafkaIngressConfig,
        *,
        after_ingest: AfterIngest | None = None,
        retry_seconds: float = 1.0,
    ) -> None:
        if config.window < 1:
            raise ValueError("window must be at least 1")
        self.inbox = inbox
        self.config = config
        self.after_ingest = after_ingest
        self.retry_seconds = retry_seconds
        self.tracker = OffsetTracker()
        #: Outcomes so far, by :class:`KafkaOutcome` value.
        self.counts: Counter[str] = Counter()
        #: Every position the broker confirmed as committed (the last per partition).
        self.commits: dict[Partition, int] = {}
        self.paused = False
        #: Times the window filled and the partitions were paused.
        self.pauses = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._revoked: list[Partition] = []
        self._failure: BaseException | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set (or a record fails); then finish what was
        read, commit its durable prefix and leave the group."""
        consumer = Consumer(self.config.consumer_config())
        consumer.subscribe([self.config.topic], on_revoke=self._on_revoke, on_lost=self._on_revoke)
        try:
            while not stop.is_set() and self._failure is None:
                await self._turn(consumer)
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            self._apply_revocations()
            await self._commit(consumer)
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.to_thread(consumer.close)
        if self._failure is not None:
            raise self._failure

    async def _turn(self, consumer: Consumer) -> None:
        """One poll: pause or resume, read up to the window's room, commit."""
        outstanding = self.tracker.outstanding
        if outstanding >= self.config.window:
            await asyncio.to_thread(self._pause, consumer)
        elif self.paused and outstanding <= self.config.window // 2:
            await asyncio.to_thread(self._resume, consumer)
        room = max(1, self.config.window - outstanding)
        messages: list[Message] = await asyncio.to_thread(
            consumer.consume, room, self.config.poll_timeout_seconds
        )
        self._apply_revocations()
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise KafkaException(err)
                log.warning("kafka ingress: %s", err)
                continue
            rec = KafkaRecord(
                msg.topic() or "", msg.partition() or 0, msg.offset() or 0, msg.value()
            )
            self.tracker.read(rec.part, rec.offset)
            task = asyncio.create_task(self._handle(rec))
            self._tasks.add(task)
            task.add_done_callback(self._done)
        await self._commit(consumer)

    def _pause(self, consumer: Consumer) -> None:
        # Again each time: a partition assigned while paused is paused too.
        consumer.pause(consumer.assignment())
        self.pauses += 0 if self.paused else 1
        self.paused = True

    def _resume(self, consumer: Consumer) -> None:
        consumer.resume(consumer.assignment())
        self.paused = False

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Runs on the polling thread inside consume(): only note it; the event loop
        # applies it after consume() returns, before any commit.
        self._revoked.extend((p.topic, p.partition) for p in partitions)

    def _apply_revocations(self) -> None:
        if self._revoked:
            revoked, self._revoked = self._revoked, []
            self.tracker.revoke(revoked)
            self.paused = self.paused and self.tracker.outstanding > 0

    async def _commit(self, consumer: Consumer) -> None:
        positions = self.tracker.to_commit()
        if not positions:
            return
        offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items())]
        try:
            await asyncio.to_thread(consumer.commit, offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            # Not committed: offered again next turn; a record read again is a no-op.
            log.warning("kafka ingress: commit of %s failed: %s", positions, exc)
            return
        self.tracker.committed(positions)
        self.commits.update(positions)

    async def _handle(self, rec: KafkaRecord) -> None:
        while True:
            try:
                result = await self.inbox.ingest(rec)
                break
            except TRANSIENT_DB_ERRORS as exc:
                log.warning("kafka ingress: database unavailable (%s); retrying", exc)
                await asyncio.sleep(self.retry_seconds)
        if self.after_ingest is not None:
            await self.after_ingest(rec, result)
        self.counts[result.outcome.value] += 1
        self.tracker.durable(rec.part, rec.offset)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self._failure is None:
            log.error("kafka ingress: stopping: %r", exc)
            self._failure = exc
