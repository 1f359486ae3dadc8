"""The intake's cache of verified API keys (pipeline.api.key_cache), on the real database
and through the real app: a revoke, an expiry and a lost LISTEN connection are never
answered from memory."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from pipeline.api.app import create_app
from pipeline.api.key_cache import KeyCache
from pipeline.clock import ManualClock
from pipeline.tenants.accounts import create_api_key, revoke_api_key
from tests.support.api import (
    TenantKey,
    asgi_client,
    count_rows,
    settings_for,
    submission,
    tenant_with_key,
)

pytestmark = pytest.mark.asyncio


@dataclass
class Running:
    client: httpx.AsyncClient
    cache: KeyCache


@contextlib.asynccontextmanager
async def running_app(
    pool: asyncpg.Pool, dsn: str, clock: ManualClock | None = None
) -> AsyncIterator[Running]:
    """The app with its lifespan run (which starts the key cache), LISTEN subscribed."""
    app = create_app(settings_for(dsn), pool=pool, clock=clock)
    async with app.router.lifespan_context(app), asgi_client(app) as client:
        cache = app.state.fenceline.key_cache
        assert cache is not None
        await asyncio.wait_for(cache.listener.listening.wait(), 10)
        yield Running(client, cache)


async def eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def list_jobs(r: Running, tk: TenantKey) -> httpx.Response:
    return await r.client.get("/v1/extraction-jobs", headers=tk.headers)


async def warm(r: Running, tk: TenantKey) -> None:
    """Fill the cache with ``tk`` and see it answered from memory once."""
    assert (await list_jobs(r, tk)).status_code == 200
    hits = r.cache.hits
    assert (await list_jobs(r, tk)).status_code == 200
    assert r.cache.hits == hits + 1


async def revoke(pool: asyncpg.Pool, tk: TenantKey) -> None:
    async with pool.acquire() as conn:
        assert await revoke_api_key(conn, tk.tenant.id, tk.key_id)


async def test_a_verified_key_is_answered_from_memory(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    async with running_app(pool, dsn) as r:
        assert (await list_jobs(r, tk)).status_code == 200
        assert (r.cache.hits, r.cache.misses) == (0, 1)
        for _ in range(3):
            assert (await list_jobs(r, tk)).status_code == 200
        assert (r.cache.hits, r.cache.misses) == (3, 1)
        # A wrong key is never cached: each one is a database read and a 401.
        bad = {"Authorization": "Bearer flk_not-a-key"}
        for _ in range(2):
            resp = await r.client.get("/v1/extraction-jobs", headers=bad)
            assert resp.status_code == 401
        assert len(r.cache) == 1


async def test_revoke_then_the_next_accept_is_401(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    async with running_app(pool, dsn) as r:
        await warm(r, tk)
        await revoke(pool, tk)
        before = await count_rows(pool, "extraction_jobs")
        resp = await r.client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
        assert resp.status_code == 401, resp.text
        assert await count_rows(pool, "extraction_jobs") == before


async def test_accept_rechecks_the_key_when_the_notification_never_comes(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """The accept transaction's own check, alone: the revoke's NOTIFY is suppressed, so the
    cache still answers for the key, and the accept must refuse it anyway."""
    tk = await tenant_with_key(pool)
    async with running_app(pool, dsn) as r:
        await warm(r, tk)
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("ALTER TABLE api_keys DISABLE TRIGGER api_keys_changed")
            assert await revoke_api_key(conn, tk.tenant.id, tk.key_id)
            await conn.execute("ALTER TABLE api_keys ENABLE TRIGGER api_keys_changed")
        hits = r.cache.hits
        resp = await r.client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
        assert r.cache.hits == hits + 1  # authenticated from memory ...
        assert resp.status_code == 401, resp.text  # ... and refused by the transaction
        assert resp.json()["reason"] == "unauthorized"
        assert await count_rows(pool, "extraction_jobs") == {"extraction_jobs": 0}


async def test_revoke_drops_the_cached_key(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    other = await tenant_with_key(pool)
    async with running_app(pool, dsn) as r:
        await warm(r, tk)
        await warm(r, other)
        await revoke(pool, tk)
        await eventually(lambda: len(r.cache) == 1)  # the NOTIFY arrived: tk's entry is gone
        assert (await list_jobs(r, tk)).status_code == 401
        hits = r.cache.hits
        assert (await list_jobs(r, other)).status_code == 200
        assert r.cache.hits == hits + 1  # the other key stayed cached


async def test_expiry_is_checked_on_every_hit(pool: asyncpg.Pool, dsn: str) -> None:
    clock = ManualClock(datetime.now(UTC) - timedelta(hours=1))
    tk = await tenant_with_key(pool)
    async with pool.acquire() as conn:
        key_id, key = await create_api_key(
            conn, tk.tenant.id, expires_in_seconds=60, now=clock.now()
        )
    expiring = TenantKey(tk.tenant, key, key_id)
    async with running_app(pool, dsn, clock) as r:
        await warm(r, expiring)
        clock.advance(59)  # inside the cache's margin: the database decides, still valid
        assert (await list_jobs(r, expiring)).status_code == 200
        clock.advance(2)  # past expires_at; no notification is sent for an expiry
        resp = await list_jobs(r, expiring)
        assert resp.status_code == 401
        assert resp.json()["reason"] == "key_expired"
        post = await r.client.post(
            "/v1/extraction-jobs", json=submission(), headers=expiring.headers
        )
        assert post.status_code == 401
        assert post.json()["reason"] == "key_expired"


async def _listener_pid(pool: asyncpg.Pool, cache: KeyCache) -> int:
    conn = cache.listener._conn  # the dedicated LISTEN connection
    assert conn is not None
    return conn.get_server_pid()


async def test_listener_loss_means_no_cached_answers(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    async with running_app(pool, dsn) as r:
        await warm(r, tk)
        pid = await _listener_pid(pool, r.cache)
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
        await eventually(lambda: not r.cache.live)
        # Revoked while nobody listens: the notification is lost for good.
        await revoke(pool, tk)
        bypasses = r.cache.bypasses
        assert (await list_jobs(r, tk)).status_code == 401
        assert r.cache.bypasses == bypasses + 1
        assert len(r.cache) == 0
        # Reconnected: it starts empty, and fills again with keys that still verify.
        await asyncio.wait_for(r.cache.listener.wait_connections(2), 10)
        assert (await list_jobs(r, tk)).status_code == 401
        other = await tenant_with_key(pool)
        await warm(r, other)


async def test_reconnect_forgets_what_it_could_have_missed(pool: asyncpg.Pool, dsn: str) -> None:
    """The key is revoked while the listener is down and the cache is not asked meanwhile;
    after the reconnect the entry must be gone, or it would answer for a revoked key."""
    tk = await tenant_with_key(pool)
    async with running_app(pool, dsn) as r:
        await warm(r, tk)
        async with pool.acquire() as conn:
            await conn.execute(
                "SELECT pg_terminate_backend($1)", await _listener_pid(pool, r.cache)
            )
            assert await revoke_api_key(conn, tk.tenant.id, tk.key_id)
        await asyncio.wait_for(r.cache.listener.wait_connections(2), 10)
        assert (await list_jobs(r, tk)).status_code == 401


async def test_a_tenant_rename_clears_the_cache(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    async with running_app(pool, dsn) as r:
        await warm(r, tk)
        async with pool.acquire() as conn:
            await conn.execute("UPDATE tenants SET name = name || '-x' WHERE id = $1", tk.tenant.id)
        await eventually(lambda: len(r.cache) == 0)
