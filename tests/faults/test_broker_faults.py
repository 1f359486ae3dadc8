"""Broker-path faults: a consumer killed between commit and ack, a cut connection
under load, and a black-holed link (confirm timeout). Real PostgreSQL and
RabbitMQ; outages are made by a loopback TCP proxy, never by stopping the
shared broker.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from pipeline.clock import ManualClock
from pipeline.database import create_pool
from pipeline.jobs import JobStore
from pipeline.messaging import (
    BrokerMetrics,
    Delivery,
    InboxConsumer,
    OutboxRelay,
    RelayConfig,
    Settlement,
)
from pipeline.messaging.inbox import InboxOutcome
from pipeline.messaging.outbox import RelayReport
from pipeline.settings import Settings
from tests.support.amqp import AMQP_URL, config, ready_count, topology
from tests.support.jobs import new_tenant, request
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.faults, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def broker(dsn: str) -> AsyncIterator[Settings]:
    async with topology(dsn) as settings:
        yield settings


@pytest.fixture
def proxy() -> AsyncIterator[TcpProxy]:
    p = TcpProxy("127.0.0.1", 5672)
    yield p
    p.close()


def through(settings: Settings, proxy: TcpProxy) -> Settings:
    return settings.model_copy(
        update={"amqp_url": proxy.url(AMQP_URL), "amqp_connect_timeout_seconds": 1.0}
    )


async def accept_bulk(pool: asyncpg.Pool, n: int) -> list[uuid.UUID]:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    gate = asyncio.Semaphore(8)

    async def one(i: int) -> uuid.UUID:
        async with gate:
            return (await store.accept(request(tenant, key=f"bulk-{i}"))).job_id

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def consume_all(pool: asyncpg.Pool, settings: Settings, expected: int) -> Counter[str]:
    """Run the ingress consumer until ``expected`` deliveries were settled."""
    outcomes: Counter[str] = Counter()
    enough = asyncio.Event()

    async def count(_c: None, settled: Settlement) -> None:
        outcomes[settled.disposition.result.outcome.value] += 1
        if sum(outcomes.values()) >= expected:
            enough.set()

    inbox = InboxConsumer(pool, settings, metrics=BrokerMetrics(CollectorRegistry()))
    inbox.consumer.on_settled.add(count)
    await inbox.start()
    await asyncio.wait_for(enough.wait(), 60)
    await inbox.stop()
    return outcomes


async def test_consumer_sigkilled_after_commit_before_ack_executes_the_job_once(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = (await store.accept(request(tenant))).job_id
    relay = OutboxRelay(pool, broker, metrics=BrokerMetrics(CollectorRegistry()))
    assert (await relay.run_once()).published == 1
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.inbox_child",
        json.dumps(json.loads(broker.model_dump_json())),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    committed = ""
    while not committed.startswith("COMMITTED"):
        committed = (await asyncio.wait_for(child.stdout.readline(), 30)).decode()
        assert committed, "the consumer process exited before committing"
    event_id = uuid.UUID(committed.split()[1])
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM execution_inbox") == 1

    child.send_signal(signal.SIGKILL)  # between the inbox commit and the ack
    assert await child.wait() == -signal.SIGKILL

    # A driver claims the job; then the broker redelivers the unacked message.
    [lease] = await store.claim("driver-1")
    assert lease.job_id == job
    seen: list[Delivery] = []
    inbox = InboxConsumer(pool, broker, metrics=BrokerMetrics(CollectorRegistry()))

    async def see(_c: None, settled: Settlement) -> None:
        seen.append(settled.delivery)

    inbox.consumer.on_settled.add(see)
    [again] = await inbox.run_once()
    await inbox.stop()

    assert again.outcome is InboxOutcome.DUPLICATE and again.event_id == event_id
    assert len(seen) == 1 and seen[0].redelivered
    await store.succeed(lease, result={"total": "1.00"})  # the lease survived the redelivery
    assert await store.claim("driver-2") == []
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM execution_inbox") == 1
        assert await conn.fetchval("SELECT count(*) FROM job_attempts") == 1
        row = await conn.fetchrow("SELECT state, attempt, fence FROM extraction_jobs")
    assert (row["state"], row["attempt"], row["fence"]) == ("SUCCEEDED", 1, 1)
    assert await ready_count(config(broker).work_queue) == 0
    await relay.stop()


async def test_cut_connection_while_relaying_1000_events_loses_none(
    dsn: str, broker: Settings, proxy: TcpProxy
) -> None:
    pool = await create_pool(dsn, min_size=2, max_size=10)
    jobs = await accept_bulk(pool, 1000)
    relay = OutboxRelay(
        pool,
        through(broker, proxy),
        config=RelayConfig(
            batch_size=100, retry_seconds=0.2, confirm_timeout_seconds=2.0, claim_seconds=10.0
        ),
        metrics=BrokerMetrics(CollectorRegistry()),
    )
    reports: list[RelayReport] = []
    cut_seen = asyncio.Event()
    refused_while_cut = asyncio.Event()

    async def watch(_c: None, report: RelayReport) -> None:
        reports.append(report)
        if report.unknown:
            cut_seen.set()
        if cut_seen.is_set() and report.broker_unavailable:
            refused_while_cut.set()

    relay.on_batch.add(watch)
    proxy.sever_after(upstream_bytes=150_000)  # mid-stream, a few hundred events in
    await relay.start()
    await asyncio.wait_for(cut_seen.wait(), 30)
    await asyncio.wait_for(refused_while_cut.wait(), 30)  # reconnects fail while cut
    proxy.restore()
    await relay.wait_drained(60)
    await relay.stop()
    # And the relay crash the spec names (confirmed, then died before the
    # update): 100 events go out a second time, for certain.
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE outbox_events SET published_at = NULL WHERE event_id IN "
            "(SELECT event_id FROM outbox_events ORDER BY random() LIMIT 100)"
        )
    assert (await relay.run_once()).published == 100
    await relay.stop()

    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT published_at, publish_attempts FROM outbox_events")
    assert len(rows) == 1000 and all(r["published_at"] is not None for r in rows)
    assert max(r["publish_attempts"] for r in rows) >= 2  # some were published again
    published_before_cut = sum(
        r.published for r in reports[: reports.index(next(r for r in reports if r.unknown))]
    )
    assert 0 < published_before_cut < 1000  # the cut really came mid-run
    total = await ready_count(config(broker).work_queue)
    assert total >= 1100

    outcomes = await consume_all(pool, broker, total)

    assert outcomes["ingested"] == 1000
    assert outcomes["duplicate"] == total - 1000 >= 100
    async with pool.acquire() as conn:
        inbox_jobs = await conn.fetch("SELECT job_id FROM execution_inbox")
        untouched = await conn.fetchval(
            "SELECT count(*) FROM extraction_jobs WHERE state = 'READY' AND state_version = 1"
        )
    assert sorted(r["job_id"] for r in inbox_jobs) == sorted(jobs)
    assert untouched == 1000  # duplicates changed nothing downstream
    await pool.close()


async def test_confirm_timeout_is_an_unknown_outcome_published_again_later(
    pool: asyncpg.Pool, broker: Settings, proxy: TcpProxy
) -> None:
    tenant = await new_tenant(pool)
    store = JobStore(pool)
    for _ in range(20):
        await store.accept(request(tenant))
    clock = ManualClock()
    relay = OutboxRelay(
        pool,
        through(broker, proxy),
        clock=clock,
        config=RelayConfig(confirm_timeout_seconds=1.0, claim_seconds=5.0, retry_seconds=1.0),
        metrics=BrokerMetrics(CollectorRegistry()),
    )
    assert relay.publisher is not None
    await relay.publisher.connect()
    proxy.pause()  # black hole: the socket stays open, nothing gets through

    publishing = asyncio.create_task(relay.run_once())
    await asyncio.sleep(0.3)  # inside the 1 s confirm wait
    async with pool.acquire() as conn:
        open_tx = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND state LIKE 'idle in transaction%'"
        )
    assert not publishing.done() and open_tx == 0  # no transaction spans the broker call
    report = await publishing

    assert (report.unknown, report.published) == (20, 0)
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT published_at, last_error FROM outbox_events")
    assert all(r["published_at"] is None for r in rows)
    assert all(r["last_error"].startswith("unknown outcome") for r in rows)

    proxy.resume()  # the abandoned connection's publishes may still land: duplicates
    clock.advance(2)
    again = await relay.run_once()
    assert again.published == 20
    await relay.stop()
    total = await ready_count(config(broker).work_queue)
    assert 20 <= total <= 40
    outcomes = await consume_all(pool, broker, total)
    assert outcomes["ingested"] == 20 and outcomes["duplicate"] == total - 20


async def test_services_started_while_the_broker_is_unreachable_catch_up(
    pool: asyncpg.Pool, broker: Settings, proxy: TcpProxy
) -> None:
    tenant = await new_tenant(pool)
    store = JobStore(pool)
    for _ in range(10):
        await store.accept(request(tenant))
    cut = through(broker, proxy)
    metrics = BrokerMetrics(CollectorRegistry())
    relay = OutboxRelay(pool, cut, config=RelayConfig(retry_seconds=0.1), metrics=metrics)
    inbox = InboxConsumer(pool, cut, metrics=metrics)
    ingested = asyncio.Event()

    async def count(_c: None, _settled: Settlement) -> None:
        if (
            metrics.registry.get_sample_value(
                "fenceline_inbox_messages_total", {"outcome": "ingested"}
            )
            == 10
        ):
            ingested.set()

    inbox.consumer.on_settled.add(count)
    proxy.sever()
    await relay.start()  # neither raises: both keep retrying
    await inbox.start()
    assert not inbox.consumer.consuming.is_set()
    proxy.restore()
    await relay.wait_drained(20)
    await asyncio.wait_for(ingested.wait(), 20)
    await inbox.stop()
    await relay.stop()
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM execution_inbox") == 10
