"""Kafka ingress: submissions read from a topic become jobs, each record exactly once.

A producer (an ERP, a scanning service) writes one submission per record to a topic
of one tenant; ``fenceline kafka-ingress`` reads it in a consumer group and accepts
each record as a job (docs/kafka.md). The offset protocol is the spec's (§2):

* **Auto-commit is off** (and so is the client's automatic offset store): an offset
  is committed only by :class:`KafkaIngress`, only after the record's inbox row.
* **Each record is durable before its offset is committed.**
  :class:`~pipeline.messaging.kafka_inbox.KafkaInbox`
  admits and accepts the job and writes the record's ``kafka_ingress_records`` row (unique on
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

* **Admitted as REST admits.** The job is accepted through the REST intake's one
  statement (``intake_accept``) with its checks (:class:`~pipeline.jobs.TenantQuota`):
  tenant quotas, the spend budget (the cost reserved at acceptance) and system
  capacity. A refusal writes nothing and is *held*, not dropped: its partition is
  paused, the record is tried again after the refusal's retry-after (a bounded
  back-off) while polling goes on, and no offset passes it. A replay of a record
  already accepted is never refused.

A record that cannot become a job (not JSON, not a submission, over a document limit,
an idempotency key reused for another document) is recorded as *refused* with its
reason and its offset moves on: retrying cannot help, and the row is where an
operator finds it. A database that does not answer is retried; any other error stops
the ingress with the record uncommitted, so a restart reads it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from pipeline.errors import AdmissionRejected
from pipeline.messaging.kafka_inbox import (
    HELD,
    KafkaInbox,
    KafkaIngestResult,
    KafkaRecord,
)
from pipeline.messaging.kafka_metrics import KafkaIngressMetrics
from pipeline.messaging.offsets import OffsetTracker, Partition
from pipeline.messaging.scheduler import TRANSIENT_DB_ERRORS
from pipeline.waiting import wait_within

log = logging.getLogger(__name__)


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
    #: How often the committed positions and partition ends are read from the broker
    #: for the lag gauges (one request per partition and one for the group).
    lag_sample_seconds: float = 15.0
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


def hold_delay(retry_after: float, refusals: int, *, base: float, cap: float) -> float:
    """Seconds before a held record's next try after its ``refusals``-th refusal: the
    refusal's retry-after, longer as refusals repeat (doubling from ``base``), never
    above ``cap``."""
    backoff = base * float(2 ** min(refusals - 1, 16))
    return min(cap, max(retry_after, backoff))


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
        max_hold_seconds: float = 60.0,
        metrics: KafkaIngressMetrics | None = None,
    ) -> None:
        if config.window < 1:
            raise ValueError("window must be at least 1")
        self.inbox = inbox
        self.config = config
        self.after_ingest = after_ingest
        self.retry_seconds = retry_seconds
        #: The longest wait before a held record is tried again, whatever the
        #: refusal's retry-after (a spend budget's can be days).
        self.max_hold_seconds = max_hold_seconds
        self.tracker = OffsetTracker()
        self.metrics = metrics or KafkaIngressMetrics()
        self._next_lag_sample = 0.0
        #: Each assigned partition's committed position as the lag gauges count it: the
        #: group's when it was assigned (None: never committed), then each commit's.
        self._positions: dict[Partition, int | None] = {}
        #: Outcomes so far, by :class:`KafkaOutcome` value, and admission refusals as
        #: :data:`HELD` (each time a record is refused).
        self.counts: Counter[str] = Counter()
        #: Admission refusals by reason (``quota_pending_jobs``, ``capacity_backlog``, ...).
        self.held_reasons: Counter[str] = Counter()
        #: Records held by an admission refusal, per partition: those stay paused.
        self._held: Counter[Partition] = Counter()
        self._held_paused: set[Partition] = set()
        self._draining = asyncio.Event()
        #: Every position the broker confirmed as committed (the last per partition).
        self.commits: dict[Partition, int] = {}
        self.paused = False
        #: Times the window filled and the partitions were paused.
        self.pauses = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._revoked: list[Partition] = []
        self._failure: BaseException | None = None

    @property
    def held_partitions(self) -> set[Partition]:
        """The partitions paused now because a record of theirs is held."""
        return set(self._held_paused)

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set (or a record fails); then finish what was
        read, commit its durable prefix and leave the group."""
        consumer = Consumer(self.config.consumer_config())
        consumer.subscribe([self.config.topic], on_revoke=self._on_revoke, on_lost=self._on_revoke)
        try:
            while not stop.is_set() and self._failure is None:
                await self._turn(consumer)
            # A held record is left unfinished (uncommitted) rather than waited for.
            self._draining.set()
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
        await asyncio.to_thread(self._pause_held, consumer)
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
        await self._observe(consumer)

    async def _observe(self, consumer: Consumer) -> None:
        """Set the gauges; read the lag from the broker when its sample is due."""
        self.metrics.outstanding.set(self.tracker.outstanding)
        self.metrics.window_paused.set(1 if self.paused else 0)
        self.metrics.held_partitions.set(len(self._held_paused))
        now = asyncio.get_running_loop().time()
        if now < self._next_lag_sample:
            return
        self._next_lag_sample = now + self.config.lag_sample_seconds
        try:
            samples = await asyncio.to_thread(self._sample_positions, consumer)
        except KafkaException as exc:
            log.warning("kafka ingress: lag sample failed: %s", exc)
            return
        self.metrics.positions(samples)

    def _sample_positions(self, consumer: Consumer) -> dict[int, tuple[int | None, int, int]]:
        """Each assigned partition's committed position and its ends. The ends are
        librdkafka's cached watermarks from the last fetch (no broker request); the
        position is this ingress's last commit, or the group's, asked of the broker
        once for a partition this ingress has not committed since it was assigned."""
        assigned = consumer.assignment()
        unknown = [tp for tp in assigned if (tp.topic, tp.partition) not in self._positions]
        if unknown:
            for tp in consumer.committed(unknown, timeout=5.0):
                self._positions[(tp.topic, tp.partition)] = None if tp.offset < 0 else tp.offset
        out: dict[int, tuple[int | None, int, int]] = {}
        for tp in assigned:
            start, end = consumer.get_watermark_offsets(tp, cached=True)
            if start < 0 or end < 0:
                continue  # nothing fetched from it yet
            part = (tp.topic, tp.partition)
            out[tp.partition] = (self._positions.get(part), start, end)
        return out

    def _pause(self, consumer: Consumer) -> None:
        # Again each time: a partition assigned while paused is paused too.
        consumer.pause(consumer.assignment())
        self.pauses += 0 if self.paused else 1
        self.paused = True

    def _resume(self, consumer: Consumer) -> None:
        held = self._held_paused
        consumer.resume(
            [tp for tp in consumer.assignment() if (tp.topic, tp.partition) not in held]
        )
        self.paused = False

    def _pause_held(self, consumer: Consumer) -> None:
        """Pause the partitions with a held record; resume those whose records went
        through (unless the window holds every partition paused)."""
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        want = {part for part, n in self._held.items() if n > 0} & assigned
        hold = want - self._held_paused
        if hold:
            consumer.pause([TopicPartition(t, p) for t, p in sorted(hold)])
        freed = (self._held_paused - want) & assigned
        if freed and not self.paused:
            consumer.resume([TopicPartition(t, p) for t, p in sorted(freed)])
        self._held_paused = want

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Runs on the polling thread inside consume(): only note it; the event loop
        # applies it after consume() returns, before any commit.
        self._revoked.extend((p.topic, p.partition) for p in partitions)

    def _apply_revocations(self) -> None:
        if self._revoked:
            revoked, self._revoked = self._revoked, []
            self.tracker.revoke(revoked)
            for part in revoked:
                self._positions.pop(part, None)
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
            self.metrics.commit_failures.inc()
            return
        self.tracker.committed(positions)
        self.commits.update(positions)
        self._positions.update(positions)
        for (_topic, partition), position in positions.items():
            self.metrics.committed.labels(str(partition)).set(position)

    async def _handle(self, rec: KafkaRecord) -> None:
        refusals = 0
        try:
            while True:
                try:
                    result = await self.inbox.ingest(rec)
                    break
                except TRANSIENT_DB_ERRORS as exc:
                    log.warning("kafka ingress: database unavailable (%s); retrying", exc)
                    await asyncio.sleep(self.retry_seconds)
                except AdmissionRejected as exc:
                    refusals += 1
                    if refusals == 1:
                        self._held[rec.part] += 1
                    self.counts[HELD] += 1
                    self.held_reasons[exc.reason] += 1
                    self.metrics.refusals.labels(exc.reason).inc()
                    delay = hold_delay(
                        exc.retry_after,
                        refusals,
                        base=self.retry_seconds,
                        cap=self.max_hold_seconds,
                    )
                    log.info(
                        "kafka ingress: %s/%d@%d held (%s); again in %.1fs",
                        rec.topic, rec.partition, rec.offset, exc.reason, delay,
                    )  # fmt: skip
                    if not await self._still_ours_after(rec, delay):
                        return  # stopping, or revoked: read again by whoever owns it next
        finally:
            if refusals:
                self._held[rec.part] -= 1
        if self.after_ingest is not None:
            await self.after_ingest(rec, result)
        self.counts[result.outcome.value] += 1
        self.metrics.records.labels(result.outcome.value).inc()
        self.tracker.durable(rec.part, rec.offset)

    async def _still_ours_after(self, rec: KafkaRecord, delay: float) -> bool:
        """Wait ``delay`` seconds; False when the ingress stops meanwhile or the
        record's partition was revoked."""
        try:
            await wait_within(self._draining.wait(), delay)
        except TimeoutError:
            return self.tracker.waiting(rec.part, rec.offset)
        return False

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self._failure is None:
            log.error("kafka ingress: stopping: %r", exc)
            self._failure = exc
