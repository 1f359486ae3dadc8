"""The inbox consumer and the DLQ archiver never stop for good (issue 17).

The same never-die rule as the outbox relay (tests/faults/test_relay_stall.py):
any failed cycle of a consumer's loop is logged and retried with bounded
backoff, a handler runs for a bounded time and its delivery is requeued after a
bounded backoff, and the maintenance actor's ``start()`` (the supervisor's health
check) replaces a consumer whose loop died. Before, only transient errors were
retried: anything else ended the loop silently (or, in a handler, was requeued
at once), and a hung handler held its delivery for ever.
Real PostgreSQL and RabbitMQ; the broker is never restarted.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

import pipeline.messaging.consumer as consumer_module
import pipeline.messaging.dlq as dlq_module
from cluster.drivers import Maintenance
from pipeline.database import create_pool
from pipeline.jobs import JobStore
from pipeline.messaging import BrokerMetrics, OutboxRelay
from pipeline.messaging.inbox import InboxConsumer
from pipeline.queries import q
from pipeline.settings import Settings
from tests.support.amqp import topology
from tests.support.jobs import accept_many, new_tenant

pytestmark = [pytest.mark.faults, pytest.mark.integration]

APP = "inbox-under-test"


@pytest.fixture
async def broker(dsn: str) -> AsyncIterator[Settings]:
    async with topology(dsn) as settings:
        yield settings


async def inbox_count(pool: asyncpg.Pool) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM execution_inbox"))


async def wait_inbox(pool: asyncpg.Pool, n: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while (have := await inbox_count(pool)) < n and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return have


async def publish_jobs(pool: asyncpg.Pool, settings: Settings, n: int) -> None:
    """``n`` accepted jobs, their events confirmed on the work queue."""
    await accept_many(JobStore(pool), await new_tenant(pool), n)
    relay = OutboxRelay(pool, settings, metrics=BrokerMetrics(CollectorRegistry()))
    published = 0
    for _ in range(50):
        published += (await relay.run_once()).published
        if published >= n:
            break
    await relay.stop()
    assert published == n


def _inbox(pool: asyncpg.Pool, settings: Settings, **kw: Any) -> InboxConsumer:
    return InboxConsumer(
        pool, settings, metrics=BrokerMetrics(CollectorRegistry()), backoff=(0.1, 1.0), **kw
    )


async def test_a_cycle_that_raises_anything_is_logged_and_retried(
    pool: asyncpg.Pool,
    broker: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    real = consumer_module.AmqpLink.open
    calls = 0

    async def flaky(cfg: Any, name: str) -> Any:
        nonlocal calls
        if name == "inbox":
            calls += 1
            if calls == 1:
                raise RuntimeError("not a broker error")
        return await real(cfg, name)

    await publish_jobs(pool, broker, 10)
    monkeypatch.setattr(consumer_module.AmqpLink, "open", flaky)
    inbox = _inbox(pool, broker)
    with caplog.at_level(logging.ERROR, logger="pipeline.messaging.consumer"):
        await inbox.start()
        try:
            assert await wait_inbox(pool, 10, 20) == 10  # the old loop ended here: 0
            assert inbox.running and not inbox.stalled()
            assert inbox.consumer.progress.failed_rounds == 1
            assert inbox.consumer.progress.last_error == "RuntimeError: not a broker error"
        finally:
            await inbox.stop()
    assert any("cycle failed" in r.message for r in caplog.records)


async def test_a_handler_that_hangs_is_requeued_after_its_timeout(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    await publish_jobs(pool, broker, 3)
    inbox = _inbox(pool, broker, prefetch=1, handler_timeout=1.0)
    real = inbox.inbox.ingest
    calls = 0

    async def hangs_once(message: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.Event().wait()  # a wait nothing ends, like a lost reply
        return await real(message)

    inbox.inbox.ingest = hangs_once  # type: ignore[method-assign]
    await inbox.start()
    try:
        # prefetch 1: on the old loop the hung delivery blocked the queue for ever
        assert await wait_inbox(pool, 3, 15) == 3
        assert inbox.running and not inbox.stalled()
    finally:
        await inbox.stop()
    assert calls == 4  # the hung delivery came back once


async def test_a_failing_handler_is_requeued_with_growing_backoff(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    await publish_jobs(pool, broker, 1)
    inbox = _inbox(pool, broker, prefetch=1)
    real = inbox.inbox.ingest
    seen: list[float] = []

    async def fails_four_times(message: Any) -> Any:
        seen.append(time.monotonic())
        if len(seen) <= 4:
            raise ValueError("a bug, not a database outage")
        return await real(message)

    inbox.inbox.ingest = fails_four_times  # type: ignore[method-assign]
    await inbox.start()
    try:
        assert await wait_inbox(pool, 1, 15) == 1
    finally:
        await inbox.stop()
    gaps = [b - a for a, b in itertools.pairwise(seen)]
    assert len(gaps) == 4
    # 0.1, 0.2, 0.4, 0.8 s before each requeue; the old loop redelivered at once
    assert gaps[0] >= 0.09 and gaps[-1] >= 0.7 and gaps[-1] > gaps[0]


async def test_inbox_keeps_ingesting_while_its_backends_are_terminated(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    settings = broker.model_copy(
        update={"database_url": f"{broker.database_url}?application_name={APP}"}
    )
    n = 150
    await publish_jobs(pool, broker, n)
    inbox_pool = await create_pool(settings.database_url, min_size=1, max_size=4)
    inbox = _inbox(inbox_pool, settings, retry_seconds=0.05)
    rnd = random.Random(17)
    kills = 0
    await inbox.start()
    try:
        deadline = time.monotonic() + 60
        while await inbox_count(pool) < n and time.monotonic() < deadline:
            await asyncio.sleep(rnd.uniform(0.0, 0.05))
            async with pool.acquire() as conn:
                kills += len(await conn.fetch(q("chaos_backend_terminate"), [APP]))
            assert inbox.running, f"the inbox loop ended after {kills} terminations"
        assert await inbox_count(pool) == n
        assert inbox.running and not inbox.stalled()
    finally:
        await inbox.stop()
        await inbox_pool.close()
    assert kills >= 10


async def test_dlq_depth_monitor_survives_any_error(
    pool: asyncpg.Pool, broker: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = dlq_module.dlq_depth
    calls = 0

    async def flaky(*a: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyError("not a depth error")
        return await real(*a, **kw)

    monkeypatch.setattr(dlq_module, "dlq_depth", flaky)
    archiver = dlq_module.DeadLetterArchiver(
        pool, broker, metrics=BrokerMetrics(CollectorRegistry()), depth_interval=0.05
    )
    await archiver.start()
    try:
        for _ in range(100):
            if calls >= 3:
                break
            await asyncio.sleep(0.05)
        assert calls >= 3  # the old monitor died after the first
        assert archiver.running and not archiver.stalled()
    finally:
        await archiver.stop()


async def test_maintenance_start_replaces_consumers_that_died(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    maintenance = Maintenance(broker)
    await maintenance.start()
    try:
        inbox, archiver = maintenance._consumers
        assert isinstance(inbox, InboxConsumer)
        assert isinstance(archiver, dlq_module.DeadLetterArchiver)
        assert archiver._monitor is not None and inbox.consumer._task is not None
        inbox.consumer._task.cancel()  # the loops are gone; the actor still answers
        archiver._monitor.cancel()
        await asyncio.sleep(0.1)
        health = maintenance.health()
        assert health["InboxConsumer"]["stalled"] is True
        assert health["DeadLetterArchiver"]["stalled"] is True
        await maintenance.start()  # what the runtime supervisor's health check calls
        fresh_inbox, fresh_archiver = maintenance._consumers
        assert fresh_inbox is not inbox and fresh_archiver is not archiver
        assert fresh_inbox.running and fresh_archiver.running
        await accept_many(JobStore(pool, broker), await new_tenant(pool), 5)
        assert await wait_inbox(pool, 5, 20) == 5  # relay → work queue → new inbox
        assert not any(h.get("stalled") for h in maintenance.health().values())
    finally:
        await maintenance.stop()
