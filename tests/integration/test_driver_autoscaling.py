"""Driver autoscaling and drains on real PostgreSQL, over the fake provider on loopback.

A burst that one driver cannot keep up with must add drivers soon after its
oldest job crosses the age threshold, every job must settle, and the drivers
must drain back to the minimum once the backlog is gone, giving their leases
back instead of leaving them to the reaper. A drain that finds an attempt still
running gives that lease back under fence+1, and the job is then finished by
another driver.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import asyncpg
import pytest

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices.generator import generate_corpus
from pipeline.extraction import OpenAICompatibleEngine
from pipeline.jobs import JobStore
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.worker import (
    AttemptRunner,
    DriverAutoscaler,
    DriverLoop,
    LocalDriverFleet,
    ScalingConfig,
    WorkerConfig,
)
from tests.support.drivers import answer_from_corpus, submit_corpus, wait_settled
from tests.support.jobs import new_tenant

pytestmark = pytest.mark.integration

TODAY = datetime.now(UTC).date()


def store_for(pool: asyncpg.Pool) -> JobStore:
    policy = RetryPolicy(
        max_attempts=4, base_seconds=0.05, cap_seconds=0.2, next_attempt_margin_seconds=1
    )
    return JobStore(pool, Settings(lease_seconds=30), policy=policy)


def loop_factory(store: JobStore, engine: OpenAICompatibleEngine, concurrency: int = 2):  # type: ignore[no-untyped-def]
    def make(i: int) -> DriverLoop:
        cfg = WorkerConfig(
            worker_id=f"auto-{i}",
            concurrency=concurrency,
            claim_batch=concurrency,
            idle_poll_seconds=0.1,
            heartbeat_seconds=5,
            max_output_tokens=2048,
        )
        return DriverLoop(AttemptRunner(store, engine, cfg))

    return make


async def outcomes(pool: asyncpg.Pool) -> dict[str, int]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT outcome, count(*) AS n FROM job_attempts GROUP BY 1")
    return {r["outcome"]: r["n"] for r in rows}


async def test_burst_scales_drivers_up_then_drains_back_without_abandoning_a_lease(
    pool: asyncpg.Pool,
) -> None:
    corpus = generate_corpus(24, seed=300, max_line_items=2, anchor=TODAY)
    store = store_for(pool)
    tenant = await new_tenant(pool)
    config = ScalingConfig(
        min_drivers=1,
        max_drivers=4,
        scale_up_age_seconds=1.0,
        scale_down_age_seconds=0.2,
        scale_down_idle_seconds=1.5,
        cooldown_seconds=0.5,
    )
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake:
        fake.set_faults({"latency": {"dist": "fixed", "a": 0.4}})
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            fleet = LocalDriverFleet(loop_factory(store, engine), grace_seconds=5)
            scaler = DriverAutoscaler(store, fleet, config, concurrency=2, interval_seconds=0.1)
            await fleet.add(1)
            await scaler.start()
            try:
                t0 = time.monotonic()
                jobs = await submit_corpus(store, tenant, corpus)
                rows = await wait_settled(pool, len(jobs), timeout=40)
                settled_at = time.monotonic()
                deadline = settled_at + 15
                while fleet.size() > config.min_drivers and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                await scaler.settle()
                down_at, size_after = time.monotonic(), fleet.size()
            finally:
                await scaler.stop()
                await fleet.close()
    assert {r["state"] for r in rows} == {"SUCCEEDED"}
    ups = [e for e in scaler.events if e.after > e.before]
    downs = [e for e in scaler.events if e.after < e.before]
    assert ups and ups[0].reason == "backlog_age"
    # The first scale-up came within a few control periods of the 1 s threshold.
    assert ups[0].at - t0 < config.scale_up_age_seconds + 2.0, scaler.events
    assert ups[0].oldest_runnable_age is not None
    assert ups[0].oldest_runnable_age >= config.scale_up_age_seconds
    assert max(e.after for e in scaler.events) > 1
    assert downs and size_after == config.min_drivers
    assert down_at - settled_at < 15
    # No lease abandoned: nothing expired for the reaper, every drain accounted for.
    got = await outcomes(pool)
    assert "lease_expired" not in got and "running" not in got, got
    assert scaler.drains.unreleased == 0
    assert scaler.drains.drained_drivers == sum(e.before - e.after for e in downs)


async def test_drain_gives_a_running_lease_back_under_a_new_fence(pool: asyncpg.Pool) -> None:
    corpus = generate_corpus(1, seed=301, max_line_items=2, anchor=TODAY)
    store = store_for(pool)
    tenant = await new_tenant(pool)
    (job_id,) = await submit_corpus(store, tenant, corpus)
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake:
        fake.set_faults({"script": [{"kind": "hang", "count": 1}]})
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            make = loop_factory(store, engine, concurrency=1)
            first = make(0)
            await first.start()
            for _ in range(200):  # until it holds the lease
                if first.in_flight:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # inside the provider call, which hangs
            async with pool.acquire() as conn:
                budget = await conn.fetchval(
                    "SELECT max_attempts FROM extraction_jobs WHERE id = $1", job_id
                )
            report = await first.stop(grace_seconds=0.2)
            assert (report.finished, report.released, report.unreleased) == (0, 1, 0)
            async with pool.acquire() as conn:
                job = await conn.fetchrow(
                    "SELECT state, fence, attempt, max_attempts, lease_owner"
                    " FROM extraction_jobs WHERE id = $1",
                    job_id,
                )
                attempt = await conn.fetchrow(
                    "SELECT fence, outcome FROM job_attempts WHERE job_id = $1", job_id
                )
            assert job["state"] == "RETRY_SCHEDULED" and job["lease_owner"] is None
            assert job["fence"] == attempt["fence"] + 1  # the drained holder can never commit
            assert attempt["outcome"] == "released"
            assert job["max_attempts"] == budget + 1  # the given-back attempt did not spend budget
            second = make(1)
            await second.start()
            try:
                (row,) = await wait_settled(pool, 1, timeout=20)
            finally:
                await second.stop(grace_seconds=5)
    assert row["state"] == "SUCCEEDED" and row["attempt"] == 2
    assert "lease_expired" not in await outcomes(pool)


async def test_release_changes_nothing_once_the_lease_is_settled(pool: asyncpg.Pool) -> None:
    store = store_for(pool)
    tenant = await new_tenant(pool)
    corpus = generate_corpus(1, seed=302, max_line_items=2, anchor=TODAY)
    (job_id,) = await submit_corpus(store, tenant, corpus)
    (lease,) = await store.claim("w", limit=1)
    await store.fail(lease, error_class="test", reason="test")
    assert await store.release(lease) is False
    async with pool.acquire() as conn:
        state = await conn.fetchval("SELECT state FROM extraction_jobs WHERE id = $1", job_id)
    assert state == "FAILED_TERMINAL"
