"""Ingress consumer, durable inbox and DLQ against the real PostgreSQL and RabbitMQ."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from pipeline.database import create_pool
from pipeline.errors import ReplayRefused
from pipeline.jobs import EVENT_REQUESTED, JobStore
from pipeline.messaging import (
    BrokerMetrics,
    DeadLetterArchiver,
    Delivery,
    Disposition,
    InboxConsumer,
    IngestResult,
    OutboxRelay,
    Settlement,
)
from pipeline.messaging.broker import HEADER_REASON, HEADER_SOURCE, EventMessage
from pipeline.messaging.dlq import dlq_depth, dlq_list, dlq_replay, dlq_show
from pipeline.messaging.inbox import InboxOutcome
from pipeline.settings import Settings
from pipeline.states import JobState
from tests.support.amqp import (
    config,
    peek_all,
    publish_raw,
    ready_count,
    topology,
)
from tests.support.jobs import accept_many, new_tenant, request

pytestmark = pytest.mark.integration


@pytest.fixture
async def broker(dsn: str) -> AsyncIterator[Settings]:
    async with topology(dsn) as settings:
        yield settings


def metric(metrics: BrokerMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


async def inbox_rows(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT * FROM execution_inbox ORDER BY received_at")


async def job_row(pool: asyncpg.Pool, job_id: uuid.UUID) -> asyncpg.Record:
    async with pool.acquire() as conn:
        return await conn.fetchrow(
            "SELECT state, state_version, fence, attempt FROM extraction_jobs WHERE id = $1",
            job_id,
        )


async def republish_all(pool: asyncpg.Pool, relay: OutboxRelay) -> int:
    """What a relay crash between confirm and update leads to: everything again."""
    async with pool.acquire() as conn:
        await conn.execute("UPDATE outbox_events SET published_at = NULL, published_via = NULL")
    return (await relay.run_once()).published


async def test_ingest_commits_then_acks_and_redelivery_is_a_no_op(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    store = JobStore(pool)
    jobs = await accept_many(store, await new_tenant(pool), 10)
    metrics = BrokerMetrics(CollectorRegistry())
    relay = OutboxRelay(pool, broker, metrics=metrics)
    inbox = InboxConsumer(pool, broker, metrics=metrics)
    assert (await relay.run_once()).published == 10

    first = await inbox.run_once()

    assert [r.outcome for r in first] == [InboxOutcome.INGESTED] * 10
    assert all(r.lag_seconds is not None and r.lag_seconds >= 0 for r in first)
    assert await ready_count(config(broker).work_queue) == 0  # acked after commit
    rows = await inbox_rows(pool)
    assert {r["job_id"] for r in rows} == set(jobs)
    versions = {j: (await job_row(pool, j))["state_version"] for j in jobs}

    assert await republish_all(pool, relay) == 10
    again = await inbox.run_once()

    assert [r.outcome for r in again] == [InboxOutcome.DUPLICATE] * 10
    assert await inbox_rows(pool) == rows
    assert {j: (await job_row(pool, j))["state_version"] for j in jobs} == versions
    assert metric(metrics, "fenceline_inbox_messages_total", outcome="ingested") == 10
    assert metric(metrics, "fenceline_inbox_messages_total", outcome="duplicate") == 10
    assert metric(metrics, "fenceline_broker_lag_seconds_count") == 20
    assert await ready_count(config(broker).work_queue) == 0
    await inbox.stop()
    await relay.stop()


async def test_digest_mismatch_is_quarantined_and_leaves_jobs_untouched(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    store = JobStore(pool)
    job_a, job_b = await accept_many(store, await new_tenant(pool), 2)
    metrics = BrokerMetrics(CollectorRegistry())
    relay = OutboxRelay(pool, broker, metrics=metrics)
    inbox = InboxConsumer(pool, broker, metrics=metrics)
    await relay.run_once()
    await inbox.run_once()
    [row_a] = [r for r in await inbox_rows(pool) if r["job_id"] == job_a]
    before = {j: await job_row(pool, j) for j in (job_a, job_b)}
    # The same event id, now naming another job: a different payload digest.
    forged = EventMessage(row_a["event_id"], EVENT_REQUESTED, 1, job_b)
    await publish_raw(broker, forged.body(), message_id=str(forged.event_id))

    [result] = await inbox.run_once()

    assert result.outcome is InboxOutcome.QUARANTINED and result.reason == "digest_mismatch"
    assert metric(metrics, "fenceline_inbox_digest_mismatch_total") == 1
    assert {j: await job_row(pool, j) for j in (job_a, job_b)} == before
    [kept] = [r for r in await inbox_rows(pool) if r["event_id"] == row_a["event_id"]]
    assert kept["job_id"] == job_a and kept["payload_digest"] == row_a["payload_digest"]
    cfg = config(broker)
    assert await ready_count(cfg.work_queue) == 0
    [dead] = await peek_all(cfg.dead_letter_queue)
    assert dead.headers[HEADER_REASON] == "digest_mismatch"
    assert dead.headers[HEADER_SOURCE] == "inbox"
    assert dead.body == forged.body()
    await inbox.stop()
    await relay.stop()


POISON = [
    (b"\xff\xfe not json", "not_json"),
    (b'["a list"]', "not_object"),
    (json.dumps({"event_id": str(uuid.uuid4()), "version": 1}).encode(), "missing_fields"),
    (
        json.dumps(
            {"event_id": str(uuid.uuid4()), "type": EVENT_REQUESTED, "version": 2, "job_id": None}
        ).encode(),
        "unknown_version",
    ),
    (
        json.dumps(
            {
                "event_id": str(uuid.uuid4()),
                "type": EVENT_REQUESTED,
                "version": 1,
                "job_id": str(uuid.uuid4()),
                "document_text": "INVOICE ...",
            }
        ).encode(),
        "unexpected_fields",
    ),
    (
        EventMessage(uuid.uuid4(), "extraction.completed.v1", 1, uuid.uuid4()).body(),
        "unexpected_type",
    ),
    (EventMessage(uuid.uuid4(), EVENT_REQUESTED, 1, uuid.uuid4()).body(), "unknown_job"),
]


@pytest.fixture
async def shared_db(module_dsn: str) -> AsyncIterator[tuple[asyncpg.Pool, Settings]]:
    """One database for the poison cases (they write no rows), a topology each."""
    pool = await create_pool(module_dsn, min_size=1, max_size=4)
    async with topology(module_dsn) as settings:
        yield pool, settings
    await pool.close()


@pytest.mark.parametrize(("body", "reason"), POISON, ids=[r for _, r in POISON])
async def test_poison_goes_to_the_dlq_with_a_reason_after_one_delivery(
    shared_db: tuple[asyncpg.Pool, Settings], body: bytes, reason: str
) -> None:
    pool, broker = shared_db
    metrics = BrokerMetrics(CollectorRegistry())
    inbox = InboxConsumer(pool, broker, metrics=metrics)
    seen: list[tuple[Delivery, Disposition]] = []
    settled = asyncio.Event()

    async def on_settled(_c: None, s: Settlement) -> None:
        seen.append((s.delivery, s.disposition))
        settled.set()

    inbox.consumer.on_settled.add(on_settled)
    await publish_raw(broker, body, headers={"x-trace": "t-1"})

    await inbox.start()
    await asyncio.wait_for(settled.wait(), 10)
    await inbox.stop()

    [(delivery, disposition)] = seen
    assert not delivery.redelivered and disposition.action == "ack"  # one delivery, settled
    assert disposition.reason == reason
    cfg = config(broker)
    assert await ready_count(cfg.work_queue) == 0
    [dead] = await peek_all(cfg.dead_letter_queue)
    assert dead.headers[HEADER_REASON] == reason
    assert dead.headers["x-trace"] == "t-1"  # original headers kept
    assert dead.headers.get("x-delivery-count", 0) == 0  # never redelivered before
    assert dead.body == body
    outcome = "unknown_job" if reason == "unknown_job" else "poison"
    assert metric(metrics, "fenceline_inbox_messages_total", outcome=outcome) == 1
    assert await inbox_rows(pool) == []


async def test_inbox_never_resets_a_running_or_settled_job(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = (await store.accept(request(tenant))).job_id
    relay = OutboxRelay(pool, broker, metrics=BrokerMetrics(CollectorRegistry()))
    inbox = InboxConsumer(pool, broker, metrics=BrokerMetrics(CollectorRegistry()))
    [lease] = await store.claim("w1")
    await relay.run_once()

    [running] = await inbox.run_once()
    assert running.outcome is InboxOutcome.INGESTED and running.job_state is JobState.RUNNING
    row = await job_row(pool, job)
    assert (row["state"], row["fence"], row["attempt"]) == ("RUNNING", 1, 1)
    await store.succeed(lease, result={"total": "1.00"})  # the lease is intact

    async with pool.acquire() as conn:  # a second request event for the same job
        await conn.execute(
            "INSERT INTO outbox_events (event_id, job_id, event_type, payload) "
            "VALUES ($1, $2, $3, '{\"v\": 1}')",
            uuid.uuid4(),
            job,
            EVENT_REQUESTED,
        )
    await relay.run_once()
    [settled] = await inbox.run_once()
    assert settled.job_state is JobState.SUCCEEDED
    row = await job_row(pool, job)
    assert (row["state"], row["fence"], row["attempt"]) == ("SUCCEEDED", 1, 1)
    assert await store.claim("w2") == []
    await inbox.stop()
    await relay.stop()


async def test_prefetch_bounds_concurrent_ingestion(pool: asyncpg.Pool, broker: Settings) -> None:
    await accept_many(JobStore(pool), await new_tenant(pool), 12)
    await OutboxRelay(pool, broker, metrics=BrokerMetrics(CollectorRegistry())).run_once()
    release = asyncio.Event()
    in_flight = 0
    peak = 0
    two_waiting = asyncio.Event()
    done: list[IngestResult] = []

    async def hold(result: IngestResult) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 2:
            two_waiting.set()
        await release.wait()
        in_flight -= 1
        done.append(result)

    inbox = InboxConsumer(
        pool, broker, prefetch=2, after_commit=hold, metrics=BrokerMetrics(CollectorRegistry())
    )
    await inbox.start()
    await asyncio.wait_for(two_waiting.wait(), 10)
    await asyncio.sleep(0.3)  # give the broker the chance to (wrongly) deliver a third
    assert peak == 2 and await ready_count(config(broker).work_queue) == 10
    all_done = asyncio.Event()

    async def count(_c: None, _s: Settlement) -> None:
        if len(done) == 12:
            all_done.set()

    inbox.consumer.on_settled.add(count)
    release.set()
    await asyncio.wait_for(all_done.wait(), 10)
    await inbox.stop()
    assert len(done) == 12 and peak == 2
    assert len(await inbox_rows(pool)) == 12


async def test_dead_letter_replay_reenqueues_through_the_outbox_with_an_audit_row(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = (await store.accept(request(tenant))).job_id
    async with pool.acquire() as conn:  # the job's own event left earlier
        await conn.execute("UPDATE outbox_events SET published_at = now()")
    metrics = BrokerMetrics(CollectorRegistry())
    inbox = InboxConsumer(pool, broker, metrics=metrics)
    archiver = DeadLetterArchiver(pool, broker, metrics=metrics)
    relay = OutboxRelay(pool, broker, metrics=metrics)
    # A producer speaking a future message version about this job: poison here.
    body = json.dumps(
        {"event_id": str(uuid.uuid4()), "type": EVENT_REQUESTED, "version": 2, "job_id": str(job)}
    ).encode()
    await publish_raw(broker, body)
    [poison] = await inbox.run_once()
    assert poison.outcome is InboxOutcome.POISON
    assert await archiver.run_once() == 1
    [letter] = await dlq_list(pool, tenant_id=tenant.id)
    assert (letter["reason"], letter["source"], letter["job_id"]) == (
        "unknown_version",
        "inbox",
        job,
    )

    replay = await dlq_replay(
        pool, letter["id"], requested_by="ops@example", note="v2 rollback", metrics=metrics
    )

    shown = await dlq_show(pool, letter["id"])
    assert shown["replay_count"] == 1
    [audit] = shown["replays"]
    assert audit["outbox_event_id"] == replay.outbox_event_id
    assert (audit["requested_by"], audit["note"]) == ("ops@example", "v2 rollback")
    assert (await relay.run_once()).published_ids == [replay.outbox_event_id]
    [ingested] = await inbox.run_once()
    assert ingested.outcome is InboxOutcome.INGESTED and ingested.job_id == job
    assert metric(metrics, "fenceline_dlq_replayed_total") == 1
    [lease] = await store.claim("w1")
    await store.succeed(lease, result={})
    with pytest.raises(ReplayRefused):  # a settled job is never re-run by replay
        await dlq_replay(pool, letter["id"], requested_by="ops@example")
    await inbox.stop()
    await archiver.stop()
    await relay.stop()


async def test_handler_crash_requeues_instead_of_acking(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    await accept_many(JobStore(pool), await new_tenant(pool), 1)
    await OutboxRelay(pool, broker, metrics=BrokerMetrics(CollectorRegistry())).run_once()
    inbox = InboxConsumer(pool, broker, metrics=BrokerMetrics(CollectorRegistry()))

    async def crash(_d: Delivery) -> Disposition:
        raise RuntimeError("bug in a handler")

    inbox.consumer.handler = crash
    [disposition] = await inbox.consumer.run_once(limit=1)
    assert disposition.action == "requeue"
    # The nack travels on the consumer's channel; another connection sees the
    # message ready again once the broker has processed it.
    for _ in range(50):
        if (ready := await ready_count(config(broker).work_queue)) == 1:
            break
        await asyncio.sleep(0.1)
    assert ready == 1
    inbox.consumer.handler = inbox.handle
    [result] = await inbox.run_once()
    assert result.outcome is InboxOutcome.INGESTED
    await inbox.stop()


async def test_delivery_limit_dead_letters_at_least_once_into_the_archive(dsn: str) -> None:
    async with topology(dsn, amqp_delivery_limit=2) as settings:
        pool = await create_pool(dsn, min_size=1, max_size=4)
        store = JobStore(pool)
        [job] = await accept_many(store, await new_tenant(pool), 1)
        metrics = BrokerMetrics(CollectorRegistry())
        relay = OutboxRelay(pool, settings, metrics=metrics)
        await relay.run_once()
        inbox = InboxConsumer(pool, settings, metrics=metrics)
        archiver = DeadLetterArchiver(pool, settings, metrics=metrics)

        async def crash(_d: Delivery) -> Disposition:
            raise RuntimeError("a bug that fails every delivery")

        inbox.consumer.handler = crash
        deliveries = 0
        while await inbox.consumer.run_once(limit=1):
            deliveries += 1
            assert deliveries < 10, "the delivery limit never dead-lettered the message"
        assert deliveries == 3  # the first delivery and two redeliveries

        archived = 0
        for _ in range(100):  # the broker dead-letters asynchronously; bounded wait
            archived += await archiver.run_once()
            if archived:
                break
            await asyncio.sleep(0.02)
        assert archived == 1
        [letter] = await dlq_list(pool)
        assert letter["source"] == "broker" and letter["job_id"] == job
        assert letter["reason"] == "delivery_limit"  # x-death, RabbitMQ 3.10
        assert (await dlq_depth(pool, settings, metrics=metrics))["archive"] == 1
        assert metric(metrics, "fenceline_dlq_depth", store="archive") == 1
        assert metric(metrics, "fenceline_dlq_depth", store="broker") == 0

        await dlq_replay(pool, letter["id"], requested_by="ops@example", metrics=metrics)
        assert (await dlq_depth(pool, settings, metrics=metrics))["archive"] == 0
        assert (await relay.run_once()).published == 1
        inbox.consumer.handler = inbox.handle
        [result] = await inbox.run_once()
        assert result.outcome is InboxOutcome.INGESTED and result.job_id == job
        for service in (inbox, archiver, relay):
            await service.stop()
        await pool.close()
