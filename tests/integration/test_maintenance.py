"""The maintenance actor's body, as the runtime starts it, against the real services.

With a broker configured, :class:`cluster.drivers.Maintenance` must run both
ends of the broker path: the relay that publishes execution signals and the
consumers that read them (inbox) and archive dead letters, or the work queue
only grows. Without a broker it runs the reaper and the relay alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest
from prometheus_client import REGISTRY, generate_latest

from cluster.drivers import Maintenance
from pipeline.jobs import JobStore
from pipeline.messaging.dlq import dlq_list
from pipeline.settings import Settings
from tests.support.amqp import config, publish_raw, ready_count, topology
from tests.support.jobs import accept_many, new_tenant

pytestmark = pytest.mark.integration


@pytest.fixture
async def broker(dsn: str) -> AsyncIterator[Settings]:
    async with topology(dsn, reaper_interval_seconds=0.2) as settings:
        yield settings


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


async def test_with_a_broker_signals_reach_the_inbox_and_dead_letters_the_archive(
    pool: asyncpg.Pool, broker: Settings
) -> None:
    maintenance = Maintenance(broker)
    await maintenance.start()
    try:
        assert maintenance.services() == [
            "reaper",
            "relay",
            "dlq_retention",
            "retention",
            "ack_overdue",
            "spend_reconciler",
            "InboxConsumer",
            "DeadLetterArchiver",
        ]
        tenant = await new_tenant(pool)
        jobs = await accept_many(JobStore(pool, broker), tenant, 20)

        async def all_ingested() -> bool:
            async with pool.acquire() as conn:
                n = await conn.fetchval(
                    "SELECT count(*) FROM execution_inbox WHERE job_id = ANY($1::uuid[])", jobs
                )
            return int(n) == len(jobs)

        await eventually(all_ingested)
        cfg = config(broker)
        assert await ready_count(cfg.work_queue) == 0  # consumed, not piling up

        # The relay stamps published_at after the broker's confirm, so a consumer
        # may ingest a message before its outbox row is marked: wait for the mark.
        async def all_published() -> bool:
            async with pool.acquire() as conn:
                unpublished = await conn.fetchval(
                    "SELECT count(*) FROM outbox_events WHERE published_at IS NULL"
                )
            return int(unpublished) == 0

        await eventually(all_published)

        # A poison message is dead-lettered by the inbox and archived without an operator.
        await publish_raw(broker, b"not json", headers={"x-trace": "poison-1"})

        async def archived() -> bool:
            return len(await dlq_list(pool)) == 1

        await eventually(archived)
        [letter] = await dlq_list(pool)
        assert letter["reason"] == "not_json"
        assert await ready_count(cfg.dead_letter_queue) == 0
        text = generate_latest(REGISTRY).decode()  # what the bridge records into Ray
        assert "fenceline_outbox_oldest_unpublished_seconds" in text
        assert 'fenceline_inbox_messages_total{outcome="poison"}' in text
    finally:
        await maintenance.stop()
    assert maintenance.services() == []


async def test_without_a_broker_only_the_reaper_and_the_relay_run(dsn: str) -> None:
    maintenance = Maintenance(Settings(database_url=dsn))
    await maintenance.start()
    try:
        assert maintenance.services() == [
            "reaper",
            "relay",
            "dlq_retention",
            "retention",
            "ack_overdue",
            "spend_reconciler",
        ]
    finally:
        await maintenance.stop()
