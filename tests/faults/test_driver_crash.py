"""Driver crashes on Ray: SIGKILL and SIGSTOP a real driver actor process mid-inference.

* SIGKILL: the job's lease expires, the reaper reschedules it with a new fence,
  another driver completes it, and ``fenceline explain`` shows both attempts.
* SIGSTOP then SIGCONT: the stalled driver's result arrives after it lost the
  job; the fence rejects its completion, the newer owner's result stands, and
  the late result is recorded on the stale attempt.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices.generator import generate_invoice
from cluster.drivers import EngineSpec, build_driver
from pipeline.jobs import JobStore
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.worker import WorkerConfig
from tests.support.drivers import answer_from_corpus, submit_corpus
from tests.support.jobs import new_tenant

pytestmark = [pytest.mark.faults, pytest.mark.integration, pytest.mark.timeout(300)]
LEASE = 4.0


@pytest.fixture
def slow_provider() -> Iterator[tuple[FakeProvider, Any]]:
    inv = generate_invoice(5, max_line_items=1, anchor=datetime.now(UTC).date())
    with FakeProvider(answer=answer_from_corpus([inv])) as fake:
        fake.set_faults({"latency": {"dist": "fixed", "a": 3.0}})
        yield fake, inv


def driver(dsn: str, fake: FakeProvider, name: str, attempt_timeout: float = 30) -> Any:
    import ray

    settings = Settings(database_url=dsn, lease_seconds=LEASE)
    worker = WorkerConfig(
        worker_id=name,
        concurrency=2,
        heartbeat_seconds=1.0,
        attempt_timeout_seconds=attempt_timeout,
        idle_poll_seconds=0.2,
    )
    actor = build_driver(
        settings, worker, EngineSpec(kind="openai", base_url=fake.base_url, model="fake")
    )
    pid = ray.get(actor.start.remote(), timeout=60)
    return actor, pid


async def wait_for(predicate: Any, timeout: float = 30.0) -> Any:
    end = asyncio.get_running_loop().time() + timeout
    while True:
        got = await predicate()
        if got:
            return got
        if asyncio.get_running_loop().time() > end:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.1)


async def job_row(pool: asyncpg.Pool) -> asyncpg.Record:
    async with pool.acquire() as conn:
        return await conn.fetchrow("SELECT * FROM extraction_jobs")


async def reap_until_rescheduled(store: JobStore) -> None:
    async def reaped() -> bool:
        return bool((await store.reap()).rescheduled)

    try:
        await wait_for(reaped, timeout=LEASE * 4)
    except TimeoutError:
        row = await job_row(store.pool)
        raise AssertionError(f"not reaped: {dict(row)}") from None


def explain(dsn: str, job_id: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "explain", job_id],
        env={**os.environ, "FENCELINE_DATABASE_URL": dsn},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout


def fast_store(pool: asyncpg.Pool) -> JobStore:
    return JobStore(
        pool,
        Settings(lease_seconds=LEASE),
        policy=RetryPolicy(base_seconds=0.05, cap_seconds=0.1, next_attempt_margin_seconds=1),
    )


async def one_job_mid_call(
    pool: asyncpg.Pool,
    dsn: str,
    slow_provider: tuple[FakeProvider, Any],
    name: str,
    attempt_timeout: float = 30,
) -> tuple[JobStore, Any, int]:
    """Submit one invoice and return once driver ``name`` is inside its provider call."""
    fake, inv = slow_provider
    store = fast_store(pool)
    tenant = await new_tenant(pool)
    await submit_corpus(store, tenant, [inv])
    actor, pid = driver(dsn, fake, name, attempt_timeout)

    async def running() -> bool:
        row = await job_row(pool)
        return row["state"] == "RUNNING" and row["lease_owner"] == name

    await wait_for(running)
    await asyncio.sleep(0.5)  # inside the provider call (3 s)
    return store, actor, pid


async def test_sigkill_mid_inference_is_reaped_and_finished_elsewhere(
    ray_cluster: None, pool: asyncpg.Pool, dsn: str, slow_provider: tuple[FakeProvider, Any]
) -> None:
    import ray

    fake, _ = slow_provider
    store, a, a_pid = await one_job_mid_call(pool, dsn, slow_provider, "driver-a")
    os.kill(a_pid, signal.SIGKILL)
    await reap_until_rescheduled(store)
    b, _ = driver(dsn, fake, "driver-b")

    async def done() -> bool:
        return (await job_row(pool))["state"] == "SUCCEEDED"

    await wait_for(done)
    row = await job_row(pool)
    assert row["lease_owner"] is None and row["fence"] == 3  # claim 1, reap +1, claim 2
    text = explain(dsn, str(row["id"]))
    assert "worker driver-a: lease_expired" in text
    assert "worker driver-b: succeeded" in text
    ray.get(b.stop.remote(5.0), timeout=60)
    ray.kill(a)


async def test_stalled_driver_cannot_commit_after_losing_the_lease(
    ray_cluster: None, pool: asyncpg.Pool, dsn: str, slow_provider: tuple[FakeProvider, Any]
) -> None:
    import ray

    fake, _ = slow_provider
    # The stall lasts as long as reaping plus a fresh driver's start (over 30 s on a
    # loaded machine, CI 2026-12-01): an attempt timeout that outlives it lets the stalled
    # driver wake to its provider's answer rather than to its own expired timer (a timed-out
    # call has no result to record as late).
    store, a, a_pid = await one_job_mid_call(
        pool, dsn, slow_provider, "driver-stalled", attempt_timeout=240
    )
    os.kill(a_pid, signal.SIGSTOP)
    try:
        await reap_until_rescheduled(store)
        b, _ = driver(dsn, fake, "driver-fresh")

        async def done() -> bool:
            return (await job_row(pool))["state"] == "SUCCEEDED"

        await wait_for(done)
    finally:
        os.kill(a_pid, signal.SIGCONT)
    winner = await job_row(pool)

    async def stale_recorded() -> bool:
        async with pool.acquire() as conn:
            return bool(
                await conn.fetchval(
                    "SELECT late_result_at IS NOT NULL FROM job_attempts WHERE fence = 1"
                )
            )

    await wait_for(stale_recorded)
    stats = ray.get(a.stats.remote(), timeout=30)
    assert set(stats["outcomes"]) <= {"stale_result_discarded", "lease_lost"}
    assert sum(stats["outcomes"].values()) == 1
    assert stats["metrics_bridges"] == 1  # scheduler metrics reach Ray's agent (no admission)
    after = await job_row(pool)
    assert (after["state"], after["fence"], after["state_version"]) == (
        "SUCCEEDED",
        winner["fence"],
        winner["state_version"],
    )
    async with pool.acquire() as conn:
        result_fence = await conn.fetchval("SELECT fence FROM extraction_results")
    assert result_fence == winner["fence"] == 3
    text = explain(dsn, str(after["id"]))
    assert "worker driver-stalled: lease_expired" in text
    assert "late result discarded" in text
    assert "worker driver-fresh: succeeded" in text
    ray.get([a.stop.remote(5.0), b.stop.remote(5.0)], timeout=60)
