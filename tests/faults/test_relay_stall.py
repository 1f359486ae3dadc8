"""The outbox relay never stops for good: the stall the 2,000-invoice chaos run found.

After ``pg_terminate_backend`` on the relay's pooled connections, asyncpg 0.32
can report the dead connection on its next query as ``InternalClientError``
("cannot switch to state N; another operation (2) is in progress"), which was not
a transient database error. It ended the relay's loop; the task kept its
exception, so nothing was logged, and the maintenance actor still answered calls.
Real PostgreSQL and RabbitMQ; the broker is never restarted.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from cluster.drivers import Maintenance
from pipeline.database import create_pool
from pipeline.jobs import JobStore
from pipeline.messaging import BrokerMetrics, OutboxRelay, RelayConfig
from pipeline.messaging.outbox import RelayReport
from pipeline.queries import q
from pipeline.settings import Settings
from tests.support.amqp import config, ready_count, topology
from tests.support.jobs import new_tenant, request

pytestmark = [pytest.mark.faults, pytest.mark.integration]

APP = "relay-under-test"


@pytest.fixture
async def broker(dsn: str) -> AsyncIterator[Settings]:
    async with topology(dsn) as settings:
        yield settings


async def published_via_broker(pool: asyncpg.Pool) -> tuple[int, int]:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT count(*) AS total, count(*) FILTER (WHERE published_via = 'broker') AS broker"
            " FROM outbox_events"
        )
    return int(row["total"]), int(row["broker"])


async def test_relay_keeps_publishing_while_its_backends_are_terminated(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    settings = broker.model_copy(
        update={"database_url": f"{broker.database_url}?application_name={APP}"}
    )
    relay_pool = await create_pool(settings.database_url, min_size=1, max_size=4)
    relay = OutboxRelay(
        relay_pool,
        settings,
        config=RelayConfig(retry_seconds=0.1, idle_seconds=0.2),
        metrics=BrokerMetrics(CollectorRegistry()),
    )
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    await relay.start()
    rnd = random.Random(17)
    kills = 0
    try:
        for i in range(300):
            await store.accept(request(tenant, key=f"stall-{i}"))
            if i % 4 == 0:  # about every 40 ms, at a random point of a round
                await asyncio.sleep(rnd.uniform(0.0, 0.05))
                async with pool.acquire() as conn:
                    kills += len(await conn.fetch(q("chaos_backend_terminate"), [APP]))
            assert relay.running, f"the relay loop ended after {kills} terminations"
        await relay.wait_drained(120)  # 30 s timed out once under a loaded full suite
        assert relay.running and not relay.stalled()
        assert relay.progress.failed_rounds >= 1  # the terminations did hit rounds
        assert await published_via_broker(pool) == (300, 300)
        assert await ready_count(config(broker).work_queue) >= 300  # confirmed, so queued
    finally:
        await relay.stop()
        await relay_pool.close()
    assert kills >= 50


def _relay(pool: asyncpg.Pool, settings: Settings, **cfg: Any) -> OutboxRelay:
    return OutboxRelay(
        pool,
        settings,
        config=RelayConfig(retry_seconds=0.1, idle_seconds=0.2, **cfg),
        metrics=BrokerMetrics(CollectorRegistry()),
    )


async def test_a_round_that_raises_anything_is_logged_and_retried(
    pool: asyncpg.Pool, broker: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    relay = _relay(pool, broker)
    real = relay.run_once
    calls = 0

    async def flaky() -> RelayReport:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("not a database error")
        return await real()

    relay.run_once = flaky  # type: ignore[method-assign]
    tenant = await new_tenant(pool)
    for _ in range(10):
        await JobStore(pool).accept(request(tenant))
    with caplog.at_level(logging.ERROR, logger="pipeline.messaging.outbox"):
        await relay.start()
        await relay.wait_drained(20)
    assert relay.running
    assert relay.progress.failed_rounds == 1
    assert relay.progress.last_error == "RuntimeError: not a database error"
    assert any("round failed" in r.message for r in caplog.records)
    assert await published_via_broker(pool) == (10, 10)
    await relay.stop()


async def test_a_round_that_hangs_is_abandoned_after_its_lease(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    relay = _relay(pool, broker, claim_seconds=1.5, confirm_timeout_seconds=1.0, stall_seconds=3)
    real = relay.run_once
    hung = asyncio.Event()
    calls = 0

    async def hangs_once() -> RelayReport:
        nonlocal calls
        calls += 1
        if calls == 1:
            hung.set()
            await asyncio.Event().wait()  # a wait nothing ends, like a lost reply
        return await real()

    relay.run_once = hangs_once  # type: ignore[method-assign]
    tenant = await new_tenant(pool)
    for _ in range(5):
        await JobStore(pool).accept(request(tenant))
    await relay.start()
    await asyncio.wait_for(hung.wait(), 5)
    await relay.wait_drained(15)
    assert relay.progress.failed_rounds == 1
    assert relay.progress.last_error.startswith("TimeoutError")
    assert await published_via_broker(pool) == (5, 5)
    assert relay.running and not relay.stalled()
    await relay.stop()


async def test_maintenance_start_replaces_a_relay_that_died(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    maintenance = Maintenance(broker)
    await maintenance.start()
    try:
        first = maintenance._relay
        assert first is not None and maintenance.health()["relay"]["stalled"] is False
        assert first._task is not None
        first._task.cancel()  # the loop is gone; the actor still answers
        await asyncio.sleep(0.1)
        assert maintenance.health()["relay"]["stalled"] is True
        await maintenance.start()  # what the runtime supervisor's health check calls
        second = maintenance._relay
        assert second is not None and second is not first and second.running
        tenant = await new_tenant(pool)
        for _ in range(5):
            await JobStore(pool, broker).accept(request(tenant))
        await second.wait_drained(20)
        assert await published_via_broker(pool) == (5, 5)
        assert maintenance.health()["relay"]["stalled"] is False
    finally:
        await maintenance.stop()
