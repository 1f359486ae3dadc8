"""Dead letters: archived from the DLQ, listed, shown and replayed by operators.

"A DLQ is neither a state machine nor a repair engine. It is an inspection
channel ... Without retention, access controls, alerts, replay ownership, and an
audit trail, a DLQ is just an invisible archive." (spec, section 4)

So the broker's DLQ is only a transit: :class:`DeadLetterArchiver` consumes it
and writes each message to ``dead_letters`` (idempotently, keyed by what the
message is) before it acks. Everything an operator does then works on
PostgreSQL: :func:`dlq_list`, :func:`dlq_show`, :func:`dlq_replay`. Without a
broker the relay archives terminal dead-letter events directly
(:func:`archive_outbox_event`), so the same commands work in broker-less mode.

Replay never touches the job: it writes a new ``extraction.requested.v1`` outbox
event and an audit row in one transaction, and only for a job that is still
waiting to run. The authoritative job keeps its terminal decision otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.database import fetch_dicts
from pipeline.errors import BrokerUnavailable, NotFound, ReplayRefused
from pipeline.jobs import EVENT_REQUESTED
from pipeline.messaging.broker import (
    HEADER_DETAIL,
    HEADER_REASON,
    HEADER_SOURCE,
    BrokerConfig,
    queue_depths,
)
from pipeline.messaging.consumer import ACK, Delivery, Disposition
from pipeline.messaging.metrics import BrokerMetrics, default_metrics
from pipeline.messaging.queue_service import QueueService
from pipeline.messaging.scheduler import TRANSIENT_DB_ERRORS
from pipeline.queries import q
from pipeline.service import ServiceHealth
from pipeline.settings import Settings
from pipeline.states import RUNNABLE, JobState

log = logging.getLogger(__name__)

DEPTH_ERRORS: tuple[type[BaseException], ...] = (BrokerUnavailable, *TRANSIENT_DB_ERRORS)

#: Bytes of a dead letter's body kept in the archive (messages carry references).
MAX_BODY_BYTES = 4096


@dataclass(frozen=True)
class Classified:
    """What the archive records about one DLQ message."""

    dedupe_key: str
    source: str
    reason: str
    detail: str | None
    event_id: uuid.UUID | None
    job_id: uuid.UUID | None


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value is not None else None
    except ValueError:
        return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def classify(d: Delivery) -> Classified:
    """Who dead-lettered a message and why, from its headers; ids from its body."""
    headers = d.headers
    digest = hashlib.sha256(d.body).hexdigest()
    if HEADER_REASON in headers:
        source = _text(headers.get(HEADER_SOURCE, "unknown"))
        reason = _text(headers[HEADER_REASON])
        detail: str | None = _text(headers.get(HEADER_DETAIL, "")) or None
    elif headers.get("x-death"):
        source = "broker"
        death = headers["x-death"][0]
        reason = _text(death.get("reason", "unknown"))
        detail = f"queue={_text(death.get('queue', ''))} count={death.get('count', '')}"
    else:
        source, reason, detail = "unknown", "unlabelled", None
    if source not in ("inbox", "broker", "outbox"):
        source = "unknown"
    job_id = None
    try:
        doc = json.loads(d.body)
        if isinstance(doc, dict):
            job_id = _uuid(doc.get("job_id"))
    except (UnicodeDecodeError, ValueError):
        pass
    key = (
        f"outbox:{d.message_id}"
        if source == "outbox"
        else f"{source}:{reason}:{d.message_id}:{digest}"
    )
    return Classified(key, source, reason, detail, _uuid(d.message_id), job_id)


def _jsonable(value: Any) -> Any:
    """AMQP header values (bytes, datetimes, decimals, nested tables) as JSON."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, datetime | Decimal):
        return str(value)
    return value


async def _archive(
    conn: asyncpg.Connection,
    c: Classified,
    *,
    message_id: str | None,
    event_type: str | None,
    routing_key: str | None,
    headers: dict[str, Any],
    body: bytes,
    now: datetime | None,
) -> uuid.UUID | None:
    row = await conn.fetchrow(
        q("dead_letter_insert_if_new"),
        uuid.uuid4(),
        c.dedupe_key,
        c.source,
        c.reason,
        c.detail,
        message_id,
        c.event_id,
        event_type,
        c.job_id,
        routing_key,
        _jsonable(headers),
        body[:MAX_BODY_BYTES],
        len(body) > MAX_BODY_BYTES,
        now,
    )
    return row["id"] if row is not None else None


async def archive_outbox_event(
    conn: asyncpg.Connection,
    *,
    event_id: uuid.UUID,
    job_id: uuid.UUID | None,
    event_type: str,
    payload: dict[str, Any],
    body: bytes,
    now: datetime | None = None,
) -> uuid.UUID | None:
    """Broker-less: archive a terminal decision's dead-letter event directly."""
    c = Classified(
        dedupe_key=f"outbox:{event_id}",
        source="outbox",
        reason=str(payload.get("reason") or "terminal"),
        detail=str(payload.get("error_class") or "") or None,
        event_id=event_id,
        job_id=job_id,
    )
    return await _archive(
        conn,
        c,
        message_id=str(event_id),
        event_type=event_type,
        routing_key=None,
        headers={},
        body=body,
        now=now,
    )


class DeadLetterArchiver(QueueService):
    """Consumes the DLQ into ``dead_letters``; acks each message after its insert commits."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        *,
        clock: Clock | None = None,
        metrics: BrokerMetrics | None = None,
        retry_seconds: float = 1.0,
        depth_interval: float = 15.0,
        handler_timeout: float = 30.0,
        backoff: tuple[float, float] = (0.1, 5.0),
    ) -> None:
        cfg = BrokerConfig.required(settings, "DLQ archiver")
        self.settings = settings
        self.depth_interval = depth_interval
        self._monitor: asyncio.Task[None] | None = None
        self.pool = pool
        self.clock = clock or DatabaseClock()
        self.metrics = metrics or default_metrics()
        self.retry_seconds = retry_seconds
        super().__init__(
            cfg,
            cfg.dead_letter_queue,
            prefetch=cfg.prefetch,
            name="dlq-archiver",
            source="archiver",
            handler_timeout=handler_timeout,
            backoff=backoff,
        )

    async def start(self) -> None:
        await super().start()
        self._monitor = asyncio.create_task(self._watch_depth(), name="dlq-depth")

    @property
    def running(self) -> bool:
        monitor = self._monitor is not None and not self._monitor.done()
        return self.consumer.running and monitor

    def stalled(self) -> bool:
        """The consumer loop or the depth monitor is gone, or the consumer is stuck."""
        return not self.running or self.consumer.stalled()

    def health(self) -> ServiceHealth:
        """The consumer's health, stalled too when the depth monitor is gone."""
        consumer = self.consumer.health()
        monitor = self._monitor is not None and not self._monitor.done()
        return replace(
            consumer,
            running=self.running,
            stalled=self.stalled(),
            details={**consumer.details, "depth_monitor": monitor},
        )

    async def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
            self._monitor = None
        await super().stop()

    async def _watch_depth(self) -> None:
        """Refresh the DLQ-depth and queue gauges every ``depth_interval`` seconds."""
        while True:
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a
                # cancellation that arrives as the refresh completes, and stop() then
                # waited for ever on a monitor that kept polling (seen in make test).
                async with asyncio.timeout(
                    max(self.depth_interval, self.cfg.connect_timeout_seconds)
                ):
                    await dlq_depth(self.pool, self.settings, metrics=self.metrics)
            except DEPTH_ERRORS as exc:
                log.warning("dlq depth: %r", exc)
            except Exception:  # any failed refresh is retried; it never ends the monitor
                log.exception("dlq depth: refresh failed; retrying")
            await asyncio.sleep(self.depth_interval)

    async def run_once(self, limit: int = 100) -> int:
        """Archive up to ``limit`` DLQ messages now; returns how many were handled."""
        return len(await self.consumer.run_once(limit))

    async def handle(self, d: Delivery) -> Disposition:
        c = classify(d)
        while True:
            try:
                async with self.pool.acquire() as conn:
                    new = await _archive(
                        conn,
                        c,
                        message_id=d.message_id,
                        event_type=d.message_type,
                        routing_key=_text(d.headers.get("x-fenceline-routing-key", d.routing_key)),
                        headers=d.headers,
                        body=d.body,
                        now=self.clock.now(),
                    )
                break
            except TRANSIENT_DB_ERRORS:
                # Unacked until archived; any other error (and an outage longer than
                # the handler timeout) requeues it after a bounded backoff.
                await asyncio.sleep(self.retry_seconds)
        if new is not None:
            self.metrics.dlq_archived.labels(source=c.source).inc()
        return ACK


# ------------------------------------------------------------ operator commands
@dataclass(frozen=True)
class Replay:
    dead_letter_id: uuid.UUID
    outbox_event_id: uuid.UUID
    job_id: uuid.UUID
    replay_count: int


async def dlq_list(
    pool: asyncpg.Pool,
    *,
    tenant_id: uuid.UUID | None = None,
    reason: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Archived dead letters, newest first.

    ``tenant_id=None`` is operator scope (every tenant); callers without operator
    scope must pass their tenant, and then see only letters of their jobs.
    """
    return await fetch_dicts(pool, "dead_letter_list", tenant_id, reason, limit)


async def dlq_show(
    pool: asyncpg.Pool, dead_letter_id: uuid.UUID, *, tenant_id: uuid.UUID | None = None
) -> dict[str, Any]:
    """One dead letter with its headers, (truncated) body and replay history."""
    async with pool.acquire() as conn:
        row = await conn.fetchrow(q("dead_letter_get"), dead_letter_id, tenant_id)
        if row is None:
            raise NotFound(f"dead letter {dead_letter_id}")
        replays = await conn.fetch(q("dead_letter_replay_list"), dead_letter_id)
    out = dict(row.items())
    out["replays"] = [dict(r.items()) for r in replays]
    return out


async def dlq_replay(
    pool: asyncpg.Pool,
    dead_letter_id: uuid.UUID,
    *,
    requested_by: str,
    note: str = "",
    tenant_id: uuid.UUID | None = None,
    clock: Clock | None = None,
    metrics: BrokerMetrics | None = None,
) -> Replay:
    """Re-enqueue a dead letter's job through the outbox, with an audit row.

    One transaction: lock the letter and its job, check the job still waits to
    run, insert a fresh ``extraction.requested.v1`` event (a new event id, so the
    inbox does not discard it as a duplicate), the audit row, and the count.

    Raises:
        NotFound: no such letter (or another tenant's).
        ReplayRefused: the letter names no job, or the job is not READY or
            RETRY_SCHEDULED (replay never resets a running or settled job).
    """
    if not requested_by.strip():
        raise ValueError("requested_by is required for the audit trail")
    now = (clock or DatabaseClock()).now()
    async with pool.acquire() as conn, conn.transaction():
        letter = await conn.fetchrow(q("dead_letter_lock"), dead_letter_id, tenant_id)
        if letter is None:
            raise NotFound(f"dead letter {dead_letter_id}")
        if letter["job_id"] is None:
            raise ReplayRefused(f"dead letter {dead_letter_id} names no job ({letter['reason']})")
        job = await conn.fetchrow(q("dead_letter_job_lock"), letter["job_id"])
        if job is None:
            raise ReplayRefused(f"job {letter['job_id']} does not exist")
        if JobState(job["state"]) not in RUNNABLE:
            raise ReplayRefused(f"job {job['id']} is {job['state']}; only waiting jobs replay")
        event_id = uuid.uuid4()
        payload = {
            "job_id": str(job["id"]),
            "schema_version": job["schema_version"],
            "v": 1,
            "replay_of": str(dead_letter_id),
        }
        await conn.execute(q("outbox_insert"), event_id, job["id"], EVENT_REQUESTED, payload, None)
        await conn.execute(
            q("dead_letter_replay_insert"),
            uuid.uuid4(),
            dead_letter_id,
            event_id,
            job["id"],
            requested_by,
            note,
            now,
        )
        count = await conn.fetchval(q("dead_letter_mark_replayed"), dead_letter_id, now)
        if count is None:  # pragma: no cover - the row is locked above
            raise NotFound(f"dead letter {dead_letter_id}")
    (metrics or default_metrics()).dlq_replayed.inc()
    return Replay(dead_letter_id, event_id, job["id"], int(count))


async def dlq_depth(
    pool: asyncpg.Pool, settings: Settings, *, metrics: BrokerMetrics | None = None
) -> dict[str, int]:
    """Dead letters unreplayed in the archive, and (with a broker) messages ready in
    the DLQ and the work queue; also published as gauges.

    A healthy, empty work queue says nothing about jobs waiting in the inbox:
    that backlog is the scheduler's ``fenceline_inbox_backlog_jobs``.
    """
    m = metrics or default_metrics()
    async with pool.acquire() as conn:
        archive = int(await conn.fetchval(q("dead_letter_pending_count")))
    out = {"archive": archive}
    m.dlq_depth.labels(store="archive").set(archive)
    cfg = BrokerConfig.from_settings(settings)
    if cfg is not None:
        depths = await asyncio.to_thread(queue_depths, cfg)
        out["broker"] = depths[cfg.dead_letter_queue]
        out["work"] = depths[cfg.work_queue]
        m.dlq_depth.labels(store="broker").set(out["broker"])
        m.broker_queue_messages.labels(queue="dead_letter").set(out["broker"])
        m.broker_queue_messages.labels(queue="work").set(out["work"])
    return out
