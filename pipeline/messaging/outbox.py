"""The outbox relay: committed outbox events → RabbitMQ, with publisher confirms.

Invariants (checked by ``tests/integration/test_outbox.py`` and
``tests/faults/test_broker_faults.py``):

* ``published_at`` is set only after the broker confirmed the message (or, for
  an event no broker consumer reads and in broker-less mode, when it was handled
  locally: ``published_via = 'local'``).
* No transaction is open while the relay talks to the broker: the claim is one
  statement (SKIP LOCKED + a ``claimed_until`` lease, bounded batch), then the
  publish, then one statement recording each outcome.
* A confirm timeout or a dropped connection is an *unknown* outcome: the event
  stays unpublished and is published again after ``retry_seconds``. A relay that
  crashes between the confirm and the update publishes again too. Consumers
  therefore see at-least-once delivery and dedupe (:mod:`pipeline.messaging.inbox`).
* An unroutable publish (``basic.return``) is not published: ``last_error``
  says so, the alert counter rises, and the event waits
  ``unroutable_retry_seconds`` for an operator to fix the binding.
* Every wait is bounded: one round (claim, publish, record) may take at most
  ``claim_seconds`` (its lease); a round that fails or overruns is logged, the
  broker link is dropped and the loop retries after ``retry_seconds``. Nothing
  ends the loop but :meth:`OutboxRelay.stop`; :attr:`OutboxRelay.progress` says
  when it last finished a round, so a health check can replace a stuck relay.
* Messages carry event id, type, version and job id only (never document text);
  the relay's send time travels in a header for the broker-lag metric. Where an event
  goes and what it looks like on the wire is :mod:`pipeline.messaging.routes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline import checkpoints
from pipeline.clock import Clock, DatabaseClock
from pipeline.errors import BrokerUnavailable
from pipeline.hooks import Hooks
from pipeline.jobs import EVENT_DEAD_LETTERED
from pipeline.messaging.broker import BrokerConfig, declare_topology
from pipeline.messaging.dlq import archive_outbox_event
from pipeline.messaging.metrics import BrokerMetrics, default_metrics
from pipeline.messaging.publisher import ConfirmingPublisher, PublishResult, PublishStatus
from pipeline.messaging.routes import Route, default_routes, event_message, outgoing, publish_span
from pipeline.messaging.scheduler import TRANSIENT_DB_ERRORS, NotificationListener
from pipeline.queries import q
from pipeline.service import LoopService
from pipeline.settings import Settings
from pipeline.tracing import set_error, traceparent_of
from pipeline.waiting import wait_within

log = logging.getLogger(__name__)

OUTBOX_CHANNEL = "fenceline_outbox"


class RelayConfig(BaseModel):
    """Batching, leases and back-off of the relay."""

    model_config = ConfigDict(frozen=True)

    batch_size: int = Field(200, ge=1, le=10_000)
    #: Relay lease on claimed events; must outlast a publish and its confirms.
    claim_seconds: float = Field(30.0, gt=0)
    #: Unknown outcome or nack: claimable again after this long.
    retry_seconds: float = Field(1.0, gt=0)
    #: Unroutable: claimable again after this long (an operator must fix a binding).
    unroutable_retry_seconds: float = Field(60.0, gt=0)
    #: Poll interval when no NOTIFY arrives.
    idle_seconds: float = Field(1.0, gt=0)
    confirm_timeout_seconds: float = Field(5.0, gt=0)
    #: No round finished for this long: the relay is stuck (:meth:`OutboxRelay.stalled`).
    stall_seconds: float = Field(90.0, gt=0)
    listen: bool = True

    @model_validator(mode="after")
    def _lease_outlasts_publish(self) -> RelayConfig:
        if self.claim_seconds <= self.confirm_timeout_seconds:
            raise ValueError("claim_seconds must exceed confirm_timeout_seconds")
        if self.stall_seconds <= self.claim_seconds:
            raise ValueError("stall_seconds must exceed claim_seconds (the longest round)")
        return self

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> RelayConfig:
        values: dict[str, Any] = {"confirm_timeout_seconds": settings.amqp_confirm_timeout_seconds}
        values.update(overrides)
        return cls(**values)


@dataclass
class RelayReport:
    claimed: int = 0
    published: int = 0  #: confirmed by the broker
    local: int = 0  #: handled without the broker
    returned: int = 0
    nacked: int = 0
    unknown: int = 0
    broker_unavailable: bool = False
    unpublished: int | None = None  #: after this run, when measured
    oldest_unpublished_seconds: float | None = None
    published_ids: list[uuid.UUID] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.returned + self.nacked + self.unknown


class OutboxRelay(LoopService):
    """Publishes committed outbox events; one service per process is enough.

    Several relays may run at once (SKIP LOCKED keeps them apart). Without a
    broker (``settings.amqp_url`` unset) every event is handled locally and the
    durable scheduler finds the jobs.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        *,
        config: RelayConfig | None = None,
        routes: Mapping[str, Route] | None = None,
        clock: Clock | None = None,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.config = config or RelayConfig.from_settings(settings)
        self.broker = BrokerConfig.from_settings(settings)
        self.clock = clock or DatabaseClock()
        self.metrics = metrics or default_metrics()
        self.publisher = (
            ConfirmingPublisher(self.broker, name="outbox-relay") if self.broker else None
        )
        if routes is not None:
            self.routes: dict[str, Route] = dict(routes)
        else:
            self.routes = default_routes(self.broker) if self.broker else {}
        #: Run with every report, no connection (tests wait on these instead of
        #: sleeping); one that raises fails the round, which the loop retries.
        self.on_batch: Hooks[None, RelayReport] = Hooks()
        self.listener = NotificationListener(
            settings.database_url, OUTBOX_CHANNEL, lambda _p: self._wake.set()
        )
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._drained: list[asyncio.Future[None]] = []
        self._declared = False
        self._measured_at = 0.0
        #: A round finishes within its lease; none for this long: the loop is stuck.
        self.stall_seconds = self.config.stall_seconds

    # ------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("relay already started")
        self._stopping.clear()
        await self._declare()  # a broker that is down now is retried by the loop
        if self.config.listen:
            await self.listener.start()
        self._launch(self._run(), "outbox-relay").add_done_callback(_log_death)

    def health_name(self) -> str:
        return "outbox relay"

    async def stop(self, timeout: float | None = None) -> None:
        """Stop the loop; after ``timeout`` seconds (default: one round) cancel it."""
        self._stopping.set()
        self._wake.set()
        if self._task is not None:
            task, self._task = self._task, None
            # A loop that already ended (died or was cancelled) was reported by _log_death.
            await asyncio.wait({task}, timeout=timeout or self.config.claim_seconds)
            if not task.done():
                log.error("outbox relay: the loop did not stop in time; cancelled")
                task.cancel()
                await asyncio.wait({task})
        await self.listener.stop()
        if self.publisher is not None:
            await self.publisher.close()

    async def wait_drained(self, timeout: float) -> None:
        """Wait until the relay observes no unpublished event at all."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drained.append(fut)
        self._wake.set()
        await wait_within(fut, timeout)

    async def _declare(self) -> bool:
        """Declare the topology once per relay; False while the broker is unreachable.

        The declaration runs a blocking pika connection in a thread; a broker that
        accepts the connection and then never answers would hold that thread, so the
        relay stops waiting after ``claim_seconds`` and retries.
        """
        if self.broker is None or self._declared:
            return True
        try:
            await wait_within(
                asyncio.to_thread(declare_topology, self.broker), self.config.claim_seconds
            )
        except (BrokerUnavailable, TimeoutError) as exc:
            log.warning("outbox relay: cannot declare the topology yet: %r", exc)
            return False
        self._declared = True
        return True

    async def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            idle = self.config.idle_seconds
            if not await self._declare():
                with contextlib.suppress(TimeoutError):
                    await wait_within(self._stopping.wait(), self.config.retry_seconds)
                continue
            try:
                async with asyncio.timeout(self.config.claim_seconds):
                    report = await self.run_once()
            except Exception as exc:  # any failed round is retried; it never ends the loop
                await self._round_failed(exc)
                idle = self.config.retry_seconds
            else:
                self.progress.succeeded()
                if report.claimed >= self.config.batch_size and not report.failed:
                    continue  # more waiting: no pause between full batches
                if report.failed or report.broker_unavailable:
                    idle = min(idle, self.config.retry_seconds)
            with contextlib.suppress(TimeoutError):
                await wait_within(self._wake.wait(), idle)

    async def _round_failed(self, exc: Exception) -> None:
        """Record and log a failed round; drop the broker link if the round overran.

        Events of the round keep ``published_at`` NULL: they are claimable again
        when their lease (``claim_seconds``) runs out, and published then.
        """
        self.progress.failed(exc)
        self.metrics.outbox_round_failures.labels(error=type(exc).__name__).inc()
        if isinstance(exc, TimeoutError):
            log.error("outbox relay: a round overran %.0fs; retrying", self.config.claim_seconds)
            if self.publisher is not None:
                await self.publisher.reset(f"round overran {self.config.claim_seconds}s")
        elif isinstance(exc, TRANSIENT_DB_ERRORS):
            log.warning("outbox relay: database unavailable: %r", exc)
        else:
            log.error("outbox relay: round failed; retrying", exc_info=exc)

    # -------------------------------------------------------------- one pass
    async def run_once(self) -> RelayReport:
        """Claim one bounded batch, publish it, record every outcome."""
        report = RelayReport()
        now = self.clock.now()
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                q("outbox_claim_batch"), now, self.config.batch_size, self.config.claim_seconds
            )
        report.claimed = len(rows)
        remote: list[tuple[Any, Route]] = []
        local: list[Any] = []
        for row in rows:
            route = self.routes.get(row["event_type"]) if self.publisher else None
            if route is None:
                local.append(row)
            else:
                remote.append((row, route))
        if local:
            await self._handle_locally(local, report)
        if remote:
            await self._publish(remote, report)
        # Publication age is measured when caught up, when someone waits for a
        # drain, and at least once a second under sustained full batches.
        if (
            report.claimed < self.config.batch_size
            or self._drained
            or time.monotonic() - self._measured_at >= 1.0
        ):
            await self._measure(report)
        await self.on_batch.run(None, report)
        return report

    async def _handle_locally(self, rows: Sequence[Any], report: RelayReport) -> None:
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            for row in rows:
                if row["event_type"] == EVENT_DEAD_LETTERED:
                    await archive_outbox_event(
                        conn,
                        event_id=row["event_id"],
                        job_id=row["job_id"],
                        event_type=row["event_type"],
                        payload=row["payload"],
                        body=event_message(row).body(),
                        now=now,
                    )
            done = await conn.fetch(
                q("outbox_mark_published"), [r["event_id"] for r in rows], "local", now
            )
        for row in rows:  # a zero-length span: the event's publication, done locally
            publish_span(row, "local").end()
        report.local = len(done)
        self.metrics.outbox_published.labels(via="local").inc(len(done))
        if len(done) != len(rows):
            log.info("outbox relay: %d events were already published", len(rows) - len(done))

    async def _publish(self, items: Sequence[tuple[Any, Route]], report: RelayReport) -> None:
        assert self.publisher is not None
        spans = [publish_span(row, "broker") for row, _route in items]
        messages = [
            outgoing(row, route, traceparent_of(span))
            for (row, route), span in zip(items, spans, strict=True)
        ]
        started = time.perf_counter()
        try:
            results = await self.publisher.publish(
                messages, timeout=self.config.confirm_timeout_seconds
            )
        except BrokerUnavailable as exc:
            report.broker_unavailable = True
            results = [
                PublishResult(m.message_id, PublishStatus.UNKNOWN, str(exc)) for m in messages
            ]
        self.metrics.outbox_publish_seconds.observe(time.perf_counter() - started)
        for span, result in zip(spans, results, strict=True):
            span.set_attribute("fenceline.publish_status", result.status.value)
            if result.status is not PublishStatus.CONFIRMED:
                set_error(span, result.status.value, result.detail)
            span.end()
        by_status: dict[PublishStatus, list[tuple[uuid.UUID, str]]] = {}
        for (row, _route), result in zip(items, results, strict=True):
            by_status.setdefault(result.status, []).append((row["event_id"], result.detail))
        if PublishStatus.CONFIRMED in by_status:  # the broker has them; published_at not yet
            checkpoints.reached(checkpoints.RELAY_CONFIRMED)
        now = self.clock.now()
        claimed_until = items[0][0]["claimed_until"]  # one claim statement: one lease
        async with self.pool.acquire() as conn:
            confirmed = [eid for eid, _ in by_status.get(PublishStatus.CONFIRMED, [])]
            if confirmed:
                done = await conn.fetch(q("outbox_mark_published"), confirmed, "broker", now)
                report.published = len(done)
                report.published_ids = [r["event_id"] for r in done]
                self.metrics.outbox_published.labels(via="broker").inc(len(done))
                if len(done) != len(confirmed):
                    log.info(
                        "outbox relay: %d confirmed events were already marked by another relay",
                        len(confirmed) - len(done),
                    )
            for status, delay in (
                (PublishStatus.RETURNED, self.config.unroutable_retry_seconds),
                (PublishStatus.NACKED, self.config.retry_seconds),
                (PublishStatus.UNKNOWN, self.config.retry_seconds),
            ):
                failed = by_status.get(status, [])
                if not failed:
                    continue
                detail = failed[0][1]
                error = {
                    PublishStatus.RETURNED: f"unroutable (basic.return {detail})",
                    PublishStatus.NACKED: f"nacked by the broker ({detail})",
                    PublishStatus.UNKNOWN: f"unknown outcome, will publish again ({detail})",
                }[status]
                released = await conn.fetch(
                    q("outbox_release_with_error"),
                    [eid for eid, _ in failed],
                    error[:500],
                    float(delay),
                    now,
                    claimed_until,
                )
                if len(released) != len(failed):
                    log.info(
                        "outbox relay: %d of %d %s events were published or re-claimed meanwhile",
                        len(failed) - len(released),
                        len(failed),
                        status.value,
                    )
                setattr(report, status.value, len(failed))
                self.metrics.outbox_publish_failures.labels(outcome=status.value).inc(len(failed))
                if status is PublishStatus.RETURNED:
                    self.metrics.outbox_unroutable.inc(len(failed))
                    log.error("outbox relay: %d events unroutable: %s", len(failed), detail)

    async def _measure(self, report: RelayReport) -> None:
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(q("outbox_backlog_stats"), self.clock.now())
        self._measured_at = time.monotonic()
        report.unpublished = int(row["unpublished"])
        report.oldest_unpublished_seconds = float(row["oldest_unpublished_seconds"])
        self.metrics.outbox_unpublished.set(report.unpublished)
        self.metrics.outbox_oldest_unpublished_seconds.set(report.oldest_unpublished_seconds)
        if report.unpublished == 0:
            waiters, self._drained = self._drained, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)


def _log_death(task: asyncio.Task[None]) -> None:
    """The loop only ends on stop(); if it ever dies, say so at once."""
    if not task.cancelled() and task.exception() is not None:
        log.error("outbox relay: the loop died", exc_info=task.exception())
