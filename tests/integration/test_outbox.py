"""Outbox relay against the real PostgreSQL and RabbitMQ (issue 4)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pika
import pytest
from prometheus_client import CollectorRegistry

from pipeline.clock import ManualClock
from pipeline.database import create_pool
from pipeline.errors import BrokerUnavailable, ReplayRefused
from pipeline.jobs import EVENT_DEAD_LETTERED, EVENT_REQUESTED, JobStore
from pipeline.messaging import BrokerMetrics, DeadLetterArchiver, OutboxRelay, RelayConfig
from pipeline.messaging.broker import setup_topology
from pipeline.messaging.dlq import dlq_list, dlq_replay, dlq_show
from pipeline.messaging.outbox import Route
from pipeline.settings import Settings
from pipeline.states import JobState
from tests.support.amqp import (
    broker_settings,
    config,
    delete_topology,
    peek_all,
    ready_count,
    take_all,
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


async def outbox_rows(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT * FROM outbox_events ORDER BY created_at, event_id")


async def test_published_only_after_confirm_and_messages_carry_references_only(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    secret_text = "INVOICE ACME total 1234.56 EUR IBAN DE00SECRET"
    jobs = [
        (await store.accept(request(tenant, text=f"{secret_text} #{i}"))).job_id for i in range(20)
    ]
    metrics = BrokerMetrics(CollectorRegistry())
    relay = OutboxRelay(pool, broker, metrics=metrics)

    report = await relay.run_once()

    assert (report.claimed, report.published, report.failed) == (20, 20, 0)
    rows = await outbox_rows(pool)
    assert all(r["published_at"] is not None and r["published_via"] == "broker" for r in rows)
    assert all(r["publish_attempts"] == 1 and r["last_error"] is None for r in rows)
    messages = await peek_all(config(broker).work_queue)
    assert len(messages) == 20
    by_event = {str(r["event_id"]): r for r in rows}
    for m in messages:
        doc = json.loads(m.body)
        assert set(doc) == {"event_id", "type", "version", "job_id"}
        assert doc["type"] == EVENT_REQUESTED and doc["version"] == 1
        assert m.message_id == doc["event_id"] and doc["event_id"] in by_event
        assert uuid.UUID(doc["job_id"]) == by_event[doc["event_id"]]["job_id"]
        assert b"ACME" not in m.body and "DE00SECRET" not in json.dumps(m.headers, default=str)
    assert {uuid.UUID(json.loads(m.body)["job_id"]) for m in messages} == set(jobs)
    assert metric(metrics, "fenceline_outbox_published_total", via="broker") == 20
    assert metric(metrics, "fenceline_outbox_unpublished_events") == 0
    await relay.stop()


async def test_unroutable_publish_is_returned_and_not_marked_published(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    store = JobStore(pool)
    await accept_many(store, await new_tenant(pool), 5)
    metrics = BrokerMetrics(CollectorRegistry())
    cfg = config(broker)
    relay = OutboxRelay(
        pool, broker, metrics=metrics, routes={EVENT_REQUESTED: Route(cfg.exchange, "unbound.key")}
    )

    report = await relay.run_once()

    assert (report.claimed, report.returned, report.published) == (5, 5, 0)
    rows = await outbox_rows(pool)
    assert all(r["published_at"] is None for r in rows)
    assert all("unroutable" in r["last_error"] and "312" in r["last_error"] for r in rows)
    assert metric(metrics, "fenceline_outbox_unroutable_total") == 5
    assert metric(metrics, "fenceline_outbox_publish_failures_total", outcome="returned") == 5
    assert metric(metrics, "fenceline_outbox_unpublished_events") == 5
    assert await ready_count(cfg.work_queue) == 0
    # The unroutable events back off instead of being hammered again at once.
    again = await relay.run_once()
    assert again.claimed == 0
    await relay.stop()


async def test_publication_age_metric_tracks_the_oldest_unpublished_event(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    await accept_many(JobStore(pool), await new_tenant(pool), 3)
    clock = ManualClock()
    clock.advance(120)
    metrics = BrokerMetrics(CollectorRegistry())
    cfg = config(broker)
    stuck = OutboxRelay(
        pool,
        broker,
        clock=clock,
        metrics=metrics,
        routes={EVENT_REQUESTED: Route(cfg.exchange, "unbound.key")},
    )
    await stuck.run_once()
    age = metric(metrics, "fenceline_outbox_oldest_unpublished_seconds")
    assert 110 < age < 200
    clock.advance(61)  # past the unroutable back-off: a fixed binding lets them through
    fixed = OutboxRelay(pool, broker, clock=clock, metrics=metrics)
    report = await fixed.run_once()
    assert report.published == 3
    assert metric(metrics, "fenceline_outbox_oldest_unpublished_seconds") == 0
    await stuck.stop()
    await fixed.stop()


async def test_concurrent_relays_claim_disjoint_batches(dsn: str, broker: Settings) -> None:
    setup = await create_pool(dsn, min_size=1, max_size=4)
    await accept_many(JobStore(setup), await new_tenant(setup), 300)
    pools = [await create_pool(dsn, min_size=1, max_size=2) for _ in range(3)]
    relays = [
        OutboxRelay(
            p,
            broker,
            config=RelayConfig(batch_size=7, listen=False),
            metrics=BrokerMetrics(CollectorRegistry()),
        )
        for p in pools
    ]

    async def drain(relay: OutboxRelay) -> int:
        total = 0
        while (report := await relay.run_once()).claimed:
            total += report.published
        return total

    totals = await asyncio.gather(*(drain(r) for r in relays))

    assert sum(totals) == 300 and all(t > 0 for t in totals)
    rows = await outbox_rows(setup)
    assert all(r["publish_attempts"] == 1 and r["published_at"] is not None for r in rows)
    assert await ready_count(config(broker).work_queue) == 300  # no event published twice
    for r in relays:
        await r.stop()
    for p in [*pools, setup]:
        await p.close()


async def test_terminal_failure_reaches_the_dlq_archive_and_is_not_replayable(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = (await store.accept(request(tenant))).job_id
    [lease] = await store.claim("w1")
    await store.fail(lease, error_class="context_too_long", reason="context_too_long")
    metrics = BrokerMetrics(CollectorRegistry())
    relay = OutboxRelay(pool, broker, metrics=metrics)
    archiver = DeadLetterArchiver(pool, broker, metrics=metrics)

    report = await relay.run_once()
    assert report.published == 2  # the requested event and the dead-letter event
    assert report.local == 1  # extraction.failed.v1 has no broker consumer
    assert await archiver.run_once() == 1

    [letter] = await dlq_list(pool)
    assert letter["source"] == "outbox" and letter["reason"] == "context_too_long"
    assert letter["job_id"] == job and letter["tenant_id"] == tenant.id
    assert letter["event_type"] == EVENT_DEAD_LETTERED
    assert await dlq_list(pool, tenant_id=uuid.uuid4()) == []  # tenant-scoped reads
    shown = await dlq_show(pool, letter["id"])
    assert json.loads(bytes(shown["body"]))["job_id"] == str(job)
    with pytest.raises(ReplayRefused):
        await dlq_replay(pool, letter["id"], requested_by="ops@example")
    assert (await store.get(tenant.id, job))["state"] == JobState.FAILED_TERMINAL
    assert await take_all(config(broker).dead_letter_queue) == []  # acked after archiving
    # The relay publishes the dead-letter event again (crash after the confirm):
    # the archive keeps one letter.
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE outbox_events SET published_at = NULL WHERE event_type = $1",
            EVENT_DEAD_LETTERED,
        )
    assert (await relay.run_once()).published == 1
    assert await archiver.run_once() == 1
    assert len(await dlq_list(pool)) == 1
    await relay.stop()
    await archiver.stop()


async def test_broker_less_relay_handles_events_locally(pool: asyncpg.Pool, dsn: str) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    await accept_many(store, tenant, 4)
    [lease] = await store.claim("w1")
    await store.fail(lease, error_class="context_too_long", reason="context_too_long")
    metrics = BrokerMetrics(CollectorRegistry())
    relay = OutboxRelay(pool, Settings(database_url=dsn, amqp_url=None), metrics=metrics)
    assert relay.publisher is None

    report = await relay.run_once()

    assert report.local == report.claimed == 6 and report.published == 0
    rows = await outbox_rows(pool)
    assert all(r["published_via"] == "local" and r["published_at"] is not None for r in rows)
    [letter] = await dlq_list(pool)
    assert letter["source"] == "outbox" and letter["job_id"] == lease.job_id
    await relay.stop()


async def rabbitmqctl_queue(name: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "rabbitmqctl",
        "list_queues",
        "-q",
        "name",
        "type",
        "arguments",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    [line] = [ln for ln in out.decode().splitlines() if ln.split("\t")[0] == name]
    return line


async def test_setup_topology_is_idempotent_and_declares_the_specified_queues(dsn: str) -> None:
    settings = broker_settings(dsn)
    cfg = config(settings)
    try:
        first = await asyncio.to_thread(setup_topology, settings)
        assert await asyncio.to_thread(setup_topology, settings) == first
        work = await rabbitmqctl_queue(cfg.work_queue)
        assert "\tquorum\t" in work
        for arg in (
            f'{{"x-dead-letter-exchange","{cfg.dead_letter_exchange}"}}',
            '{"x-dead-letter-strategy","at-least-once"}',
            '{"x-overflow","reject-publish"}',
            '{"x-delivery-limit",5}',
        ):
            assert arg in work
        assert "\tquorum\t" in await rabbitmqctl_queue(cfg.dead_letter_queue)
        # A conflicting declaration is refused by the broker, not papered over.
        changed = settings.model_copy(update={"amqp_delivery_limit": 9})
        with pytest.raises(pika.exceptions.ChannelClosedByBroker, match="PRECONDITION_FAILED"):
            await asyncio.to_thread(setup_topology, changed)
    finally:
        await asyncio.to_thread(delete_topology, settings)
    with pytest.raises(BrokerUnavailable):
        setup_topology(Settings(database_url=dsn, amqp_url=None))


async def test_a_failed_publish_releases_only_events_its_claim_still_holds(
    pool: asyncpg.Pool,
) -> None:
    """Relay A's lease ran out and relay B claimed the event: A's late release is a no-op."""
    from datetime import timedelta

    from pipeline.queries import q

    tenant = await new_tenant(pool)
    await accept_many(JobStore(pool), tenant, 1)
    async with pool.acquire() as conn:
        t0 = await conn.fetchval("SELECT now()")
        [a] = await conn.fetch(q("outbox_claim_batch"), t0, 10, 5.0)
        later = t0 + timedelta(seconds=10)  # A's 5 s lease has expired
        [b] = await conn.fetch(q("outbox_claim_batch"), later, 10, 5.0)
        assert b["event_id"] == a["event_id"] and b["claimed_until"] > a["claimed_until"]
        stale = await conn.fetch(
            q("outbox_release_with_error"),
            [a["event_id"]],
            "A: unknown",
            1.0,
            later,
            a["claimed_until"],
        )
        assert stale == []
        row = await conn.fetchrow(
            "SELECT claimed_until, last_error FROM outbox_events WHERE event_id = $1",
            a["event_id"],
        )
        assert (row["claimed_until"], row["last_error"]) == (b["claimed_until"], None)
        own = await conn.fetch(
            q("outbox_release_with_error"),
            [b["event_id"]],
            "B: unknown",
            1.0,
            later,
            b["claimed_until"],
        )
        assert [r["event_id"] for r in own] == [b["event_id"]]
