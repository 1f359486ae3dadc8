"""Admission before acceptance: tenant quotas (429) and system capacity (503)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.clock import ManualClock
from pipeline.database import create_pool
from pipeline.jobs import JobStore
from pipeline.jobs.quotas import estimate_cost, estimate_tokens
from pipeline.settings import Settings
from tests.conftest import DatabaseFactory
from tests.support.api import (
    WRITTEN_TABLES,
    asgi_client,
    count_rows,
    loopback_server,
    settings_for,
    submission,
    tenant_with_key,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def dsn(module_dsn: str) -> str:
    """Quotas are per tenant, so tests share this module's database."""
    return module_dsn


@pytest.fixture
async def fresh(make_database: DatabaseFactory) -> AsyncIterator[tuple[str, asyncpg.Pool]]:
    """A database of its own, for checks of system-wide state (backlog, claims)."""
    url = await make_database()
    p = await create_pool(url, min_size=1, max_size=20)
    yield url, p
    await p.close()


DOC = "INVOICE 1 total 10.00 EUR "  # 26 bytes


def retry_after(r: httpx.Response) -> int:
    value = r.headers["retry-after"]
    assert value.isdigit(), value
    seconds = int(value)
    assert seconds >= 1
    assert r.json()["retry_after"] == seconds
    return seconds


def quota_cases() -> list[Any]:
    s = Settings()
    tokens = estimate_tokens(len(DOC) + 2, s)
    cost = estimate_cost(tokens, s)
    return [
        pytest.param({"max_pending_jobs": 2}, "quota_pending_jobs", id="pending_jobs"),
        pytest.param(
            {"max_pending_bytes": 2 * (len(DOC) + 2) + 10}, "quota_pending_bytes", id="bytes"
        ),
        pytest.param({"max_pending_tokens": 2 * tokens + 10}, "quota_pending_tokens", id="tokens"),
        pytest.param(
            {"spend_budget": cost * 2 + Decimal("0.000001")}, "quota_spend_budget", id="spend"
        ),
    ]


@pytest.mark.parametrize(("quota", "reason"), quota_cases())
async def test_each_quota_dimension_refuses_with_429_and_writes_nothing(
    pool: asyncpg.Pool, dsn: str, quota: dict[str, Any], reason: str
) -> None:
    tk = await tenant_with_key(pool, **quota)
    settings = settings_for(dsn, quota_retry_after_seconds=7)
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        for i in range(2):
            ok = await client.post(
                "/v1/extraction-jobs",
                json=submission(f"{DOC}{i:02d}"),
                headers={**tk.headers, "Idempotency-Key": f"k{i}"},
            )
            assert ok.status_code == 202, ok.text
        before = await count_rows(pool, *WRITTEN_TABLES)
        refused = await client.post(
            "/v1/extraction-jobs",
            json=submission(f"{DOC}99"),
            headers={**tk.headers, "Idempotency-Key": "k-over"},
        )
        # A replay of accepted work is never refused by admission.
        replay = await client.post(
            "/v1/extraction-jobs",
            json=submission(f"{DOC}00"),
            headers={**tk.headers, "Idempotency-Key": "k0"},
        )
        metrics = (await client.get("/metrics")).text
    assert refused.status_code == 429, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["reason"] == reason
    seconds = retry_after(refused)
    if reason == "quota_spend_budget":
        assert seconds >= 7  # until the budget period turns over
    else:
        assert seconds == 7
    assert replay.status_code == 200
    assert await count_rows(pool, *WRITTEN_TABLES) == before
    assert f'fenceline_jobs_rejected_total{{reason="{reason}"}} 1.0' in metrics


async def test_settled_jobs_free_their_quota(fresh: tuple[str, asyncpg.Pool]) -> None:
    dsn, pool = fresh
    tk = await tenant_with_key(pool, max_pending_jobs=1)
    app = create_app(settings_for(dsn), pool=pool)
    store = JobStore(pool)
    async with asgi_client(app) as client:
        first = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
        blocked = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
        (lease,) = await store.claim("w1")
        still = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
        await store.succeed(lease, result={"total": "10.00"})
        freed = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
    assert first.status_code == 202
    assert blocked.status_code == still.status_code == 429  # RUNNING is still pending
    assert freed.status_code == 202


async def test_parallel_requests_cannot_overshoot_a_quota(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool, max_pending_jobs=5)
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        responses = await asyncio.gather(
            *(
                client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
                for _ in range(30)
            )
        )
    codes = [r.status_code for r in responses]
    assert codes.count(202) == 5 and codes.count(429) == 25, codes
    async with pool.acquire() as conn:
        n = await conn.fetchval(
            "SELECT count(*) FROM extraction_jobs WHERE tenant_id = $1", tk.tenant.id
        )
    assert n == 5


async def test_runnable_backlog_above_bound_is_503(fresh: tuple[str, asyncpg.Pool]) -> None:
    dsn, pool = fresh
    a = await tenant_with_key(pool)
    b = await tenant_with_key(pool)
    settings = settings_for(
        dsn,
        max_runnable_backlog=2,
        capacity_check_interval_seconds=0,
        capacity_retry_after_seconds=11,
    )
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        for tk in (a, b, a):
            r = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
            assert r.status_code == 202
        before = await count_rows(pool, *WRITTEN_TABLES)
        refused = await client.post("/v1/extraction-jobs", json=submission(), headers=b.headers)
    assert refused.status_code == 503
    assert refused.json()["reason"] == "capacity_backlog"
    assert retry_after(refused) == 11
    assert await count_rows(pool, *WRITTEN_TABLES) == before


async def test_oldest_eligible_job_too_old_is_503(fresh: tuple[str, asyncpg.Pool]) -> None:
    dsn, pool = fresh
    tk = await tenant_with_key(pool)
    clock = ManualClock()
    settings = settings_for(
        dsn, max_oldest_runnable_age_seconds=60, capacity_check_interval_seconds=0
    )
    app = create_app(settings, pool=pool, clock=clock)
    async with asgi_client(app) as client:
        first = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
        clock.advance(30)
        young = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
        clock.advance(31)
        before = await count_rows(pool, *WRITTEN_TABLES)
        old = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
    assert first.status_code == young.status_code == 202
    assert old.status_code == 503 and old.json()["reason"] == "capacity_oldest_age"
    retry_after(old)
    assert await count_rows(pool, *WRITTEN_TABLES) == before


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_database_unavailable_is_503_and_not_ready() -> None:
    url = f"postgresql://postgres@127.0.0.1:{_dead_port()}/nowhere"
    app = create_app(Settings(database_url=url, db_acquire_timeout_seconds=2))
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base) as client:
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
        post = await client.post(
            "/v1/extraction-jobs",
            json=submission(),
            headers={"Authorization": "Bearer flk_whatever"},
        )
    assert health.status_code == 200
    for r in (ready, post):
        assert r.status_code == 503, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["reason"] == "database_unavailable"
        retry_after(r)
