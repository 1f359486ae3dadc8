"""The durable scheduler and broker-less mode against the real PostgreSQL (issue 4).

Workers here are deliberately simple (claim, succeed, wait on the signal with no
poll timeout of their own): if the scheduler failed to wake them, the test would
time out instead of passing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from pipeline.database import create_pool
from pipeline.errors import ProviderRateLimited
from pipeline.jobs import JobStore
from pipeline.messaging import (
    BrokerMetrics,
    InboxConsumer,
    OutboxRelay,
    Scheduler,
    SchedulerConfig,
    WorkSignal,
)
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.states import JobState
from tests.support.amqp import topology
from tests.support.jobs import accept_many, new_tenant

pytestmark = pytest.mark.integration


async def worker(
    store: JobStore,
    signal: WorkSignal,
    name: str,
    done: Counter[uuid.UUID],
    expected: int,
    finished: asyncio.Event,
) -> None:
    """Claim → succeed; when nothing is due, wait for the signal (no own polling)."""
    while not finished.is_set():
        token = signal.token()
        leases = await store.claim(name, limit=2)
        for lease in leases:
            await store.succeed(lease, result={"worker": name})
            done[lease.job_id] += 1
        if len(done) >= expected:
            finished.set()
            signal.notify()  # let the other workers see it and return
        elif not leases:
            await signal.wait(token)


async def test_work_signal_never_loses_a_wake_up_between_claim_and_wait() -> None:
    signal = WorkSignal()
    token = signal.token()
    signal.notify()  # arrives after an empty claim, before the wait
    assert await signal.wait(token, timeout=0.01) is True
    assert await signal.wait(signal.token(), timeout=0.01) is False
    waiter = asyncio.ensure_future(signal.wait(signal.token()))
    await asyncio.sleep(0)
    signal.notify()
    assert await asyncio.wait_for(waiter, 1) is True


async def test_broker_less_200_jobs_are_claimed_and_completed_once_each(dsn: str) -> None:
    settings = Settings(database_url=dsn, amqp_url=None, scan_interval_seconds=5.0)
    pool = await create_pool(dsn, min_size=2, max_size=8)
    store = JobStore(pool, settings)
    metrics = BrokerMetrics(CollectorRegistry())
    signal = WorkSignal()
    scheduler = Scheduler(pool, settings, signal, metrics=metrics)
    relay = OutboxRelay(pool, settings, metrics=metrics)
    await scheduler.start()
    await relay.start()
    await asyncio.wait_for(scheduler.listener.listening.wait(), 5)
    done: Counter[uuid.UUID] = Counter()
    finished = asyncio.Event()
    workers = [
        asyncio.create_task(worker(store, signal, f"w{i}", done, 200, finished)) for i in range(4)
    ]
    tenants = [await new_tenant(pool) for _ in range(2)]
    # Workers are idle before any job exists: only a wake-up can get them going.
    jobs: list[uuid.UUID] = []
    for i in range(4):
        jobs += await accept_many(store, tenants[i % 2], 50)

    await asyncio.wait_for(asyncio.gather(*workers), 60)
    await relay.wait_drained(10)
    await relay.stop()
    await scheduler.stop()

    assert finished.is_set() and set(done) == set(jobs) and set(done.values()) == {1}
    async with pool.acquire() as conn:
        states = await conn.fetch("SELECT state, attempt, fence FROM extraction_jobs")
        via = await conn.fetch("SELECT DISTINCT published_via FROM outbox_events")
    assert {(r["state"], r["attempt"], r["fence"]) for r in states} == {("SUCCEEDED", 1, 1)}
    assert [r["published_via"] for r in via] == ["local"]
    sample = metrics.registry.get_sample_value
    assert (sample("fenceline_scheduler_wakeups_total", {"source": "notify"}) or 0) > 0
    await pool.close()


async def test_scan_alone_wakes_workers_when_no_notification_arrives(
    pool: asyncpg.Pool, dsn: str
) -> None:
    settings = Settings(database_url=dsn, amqp_url=None)
    store = JobStore(pool, settings)
    jobs = await accept_many(store, await new_tenant(pool), 5)  # before anyone listens
    metrics = BrokerMetrics(CollectorRegistry())
    signal = WorkSignal()
    scheduler = Scheduler(
        pool,
        settings,
        signal,
        metrics=metrics,
        config=SchedulerConfig(listen=False, scan_interval_seconds=0.1),
    )
    done: Counter[uuid.UUID] = Counter()

    async def patient_worker() -> None:
        # Waits *first*: the jobs' NOTIFYs are long gone, so only the scan helps.
        while len(done) < 5:
            await signal.wait(signal.token())
            for lease in await store.claim("patient", limit=5):
                await store.succeed(lease, result={})
                done[lease.job_id] += 1

    task = asyncio.create_task(patient_worker())
    await scheduler.start()
    await asyncio.wait_for(task, 10)
    await scheduler.stop()
    assert set(done) == set(jobs)
    assert (
        metrics.registry.get_sample_value("fenceline_scheduler_wakeups_total", {"source": "scan"})
        or 0
    ) >= 1
    assert (
        metrics.registry.get_sample_value("fenceline_scheduler_wakeups_total", {"source": "notify"})
        is None
    )


async def test_retry_becoming_due_is_found_without_a_notification(
    pool: asyncpg.Pool, dsn: str
) -> None:
    settings = Settings(database_url=dsn, amqp_url=None, scan_interval_seconds=30.0)
    policy = RetryPolicy(
        max_attempts=3, base_seconds=0.01, cap_seconds=0.01, next_attempt_margin_seconds=0
    )
    store = JobStore(pool, settings, policy=policy)
    [job] = await accept_many(store, await new_tenant(pool), 1)
    [lease] = await store.claim("w1")
    signal = WorkSignal()
    scheduler = Scheduler(pool, settings, signal, metrics=BrokerMetrics(CollectorRegistry()))
    await scheduler.start()
    await asyncio.wait_for(scheduler.listener.listening.wait(), 5)
    token = signal.token()
    settled = await store.retry_or_fail(lease, ProviderRateLimited("429", retry_after=0.6))
    assert settled.state is JobState.RETRY_SCHEDULED
    # The transition notifies at once, while the retry is not yet due...
    await asyncio.wait_for(signal.wait(token), 5)
    assert await store.claim("w2") == []
    # ...and nothing changes in the database when it becomes due: the scheduler
    # sleeps until next_due (not the 30 s scan interval) and wakes the worker.
    token = signal.token()
    await asyncio.wait_for(signal.wait(token), 5)
    [again] = await store.claim("w2")
    await scheduler.stop()
    assert again.job_id == job and again.attempt == 2 and again.fence == 2


async def test_listener_comes_back_after_its_connection_is_killed(
    pool: asyncpg.Pool, dsn: str
) -> None:
    settings = Settings(database_url=dsn, amqp_url=None, scan_interval_seconds=30.0)
    signal = WorkSignal()
    metrics = BrokerMetrics(CollectorRegistry())
    scheduler = Scheduler(pool, settings, signal, metrics=metrics)
    scheduler.listener.reconnect_seconds = 0.05
    await scheduler.start()
    await asyncio.wait_for(scheduler.listener.listening.wait(), 5)
    async with pool.acquire() as conn:
        killed = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
        )
    assert killed == 1
    await asyncio.wait_for(scheduler.listener.wait_connections(2), 5)
    token = signal.token()
    await accept_many(JobStore(pool, settings), await new_tenant(pool), 1)
    await asyncio.wait_for(signal.wait(token), 5)
    await scheduler.stop()
    assert (
        metrics.registry.get_sample_value("fenceline_scheduler_wakeups_total", {"source": "notify"})
        == 1
    )


async def test_with_a_broker_the_scan_still_runs_and_every_job_completes(dsn: str) -> None:
    async with topology(dsn) as settings:
        pool = await create_pool(dsn, min_size=2, max_size=8)
        store = JobStore(pool, settings)
        metrics = BrokerMetrics(CollectorRegistry())
        signal = WorkSignal()
        # No LISTEN: the inbox's and the trigger's NOTIFYs go unheard, as when
        # the listener is down; the scan alone must get every job done.
        scheduler = Scheduler(
            pool,
            settings,
            signal,
            metrics=metrics,
            config=SchedulerConfig(listen=False, scan_interval_seconds=0.1),
        )
        relay = OutboxRelay(pool, settings, metrics=metrics)
        inbox = InboxConsumer(pool, settings, metrics=metrics)
        for service in (relay, inbox, scheduler):
            await service.start()
        jobs = await accept_many(store, await new_tenant(pool), 30)
        done: Counter[uuid.UUID] = Counter()
        finished = asyncio.Event()
        workers = [
            asyncio.create_task(worker(store, signal, f"w{i}", done, 30, finished))
            for i in range(3)
        ]
        await asyncio.wait_for(asyncio.gather(*workers), 30)
        await relay.wait_drained(10)
        for service in (scheduler, inbox, relay):
            await service.stop()
        assert set(done) == set(jobs) and set(done.values()) == {1}
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM execution_inbox") == 30
            assert (
                await conn.fetchval(
                    "SELECT count(*) FROM outbox_events WHERE published_via = 'broker'"
                )
                == 30
            )
        assert (
            metrics.registry.get_sample_value(
                "fenceline_scheduler_wakeups_total", {"source": "scan"}
            )
            or 0
        ) >= 1
        await pool.close()


async def test_a_scan_that_fails_unexpectedly_is_retried_and_the_loop_lives_on(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """Any failed scan is logged and retried: an exception that is not a transient
    database error used to end the loop silently (the outbox relay died this way)."""

    class Flaky(Scheduler):
        failures = 0

        async def run_once(self) -> Any:
            if self.failures < 2:
                self.failures += 1
                raise RuntimeError("unexpected")
            return await super().run_once()

    store = JobStore(pool, Settings(database_url=dsn))
    tenant = await new_tenant(pool)
    scheduler = Flaky(
        pool,
        Settings(database_url=dsn),
        config=SchedulerConfig(listen=False, scan_interval_seconds=0.05),
    )
    token = scheduler.signal.token()
    await scheduler.start()
    try:
        await accept_many(store, tenant, 1)
        await asyncio.wait_for(scheduler.signal.wait(token), 10)
        assert scheduler.failures == 2
        assert scheduler._task is not None and not scheduler._task.done()
    finally:
        await scheduler.stop()
