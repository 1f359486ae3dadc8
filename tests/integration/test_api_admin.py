"""Tenant and key administration (the CLI's functions), checked through the API."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from pipeline.api import create_app
from pipeline.errors import NotFound
from pipeline.tenants import (
    add_tenant,
    issue_key,
    list_keys,
    resolve_tenant,
    revoke_key,
    set_quotas,
    tenant_usage,
)
from tests.support.api import asgi_client, settings_for, submission

pytestmark = pytest.mark.integration


@pytest.fixture
def dsn(module_dsn: str) -> str:
    return module_dsn


async def test_tenant_lifecycle_through_the_api(pool: asyncpg.Pool, dsn: str) -> None:
    app = create_app(settings_for(dsn), pool=pool)
    async with pool.acquire() as conn:
        name = f"acme-{uuid.uuid4().hex[:6]}"
        tenant, first = await add_tenant(conn, name, scopes=("jobs",))
        reviewer = await issue_key(conn, name, scopes=("review", "jobs", "review"))
        keys = await list_keys(conn, tenant.id)
    assert reviewer.scopes == ("jobs", "review")
    assert [k.key_id for k in keys] == [first.key_id, reviewer.key_id]
    assert all(first.secret not in repr(k) and k.prefix == first.secret[:8] for k in keys[:1])
    auth = {"Authorization": f"Bearer {first.secret}"}
    async with asgi_client(app) as client:
        ok = await client.post("/v1/extraction-jobs", json=submission(), headers=auth)
        async with pool.acquire() as conn:
            await set_quotas(conn, name, max_pending_jobs=1)
            usage = await tenant_usage(conn, name)
        full = await client.post("/v1/extraction-jobs", json=submission(), headers=auth)
        async with pool.acquire() as conn:
            assert await revoke_key(conn, tenant.id, first.key_id) is True
            assert await revoke_key(conn, tenant.id, first.key_id) is False
            keys = await list_keys(conn, name)
        revoked = await client.post("/v1/extraction-jobs", json=submission(), headers=auth)
    assert ok.status_code == 202
    assert (usage.pending_jobs, usage.tenant.max_pending_jobs) == (1, 1)
    assert usage.pending_bytes > 0 and usage.pending_tokens > 0 and usage.spent > 0
    assert full.status_code == 429 and full.json()["reason"] == "quota_pending_jobs"
    assert revoked.status_code == 401
    assert keys[0].revoked_at is not None and keys[1].revoked_at is None


async def test_bad_scopes_and_unknown_tenants_are_refused(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        tenant, _ = await add_tenant(conn, f"t-{uuid.uuid4().hex[:6]}")
        with pytest.raises(ValueError, match="scopes"):
            await issue_key(conn, tenant.id, scopes=("admin",))
        with pytest.raises(ValueError, match="scopes"):
            await add_tenant(conn, "never-created", scopes=())
        with pytest.raises(NotFound):
            await resolve_tenant(conn, "no-such-tenant")
        with pytest.raises(NotFound):
            await issue_key(conn, uuid.uuid4())
        assert (await resolve_tenant(conn, tenant.id)).name == tenant.name
        with pytest.raises(NotFound):  # a string is a name, never an id (issue 45)
            await resolve_tenant(conn, str(tenant.id))
        assert await conn.fetchval("SELECT count(*) FROM tenants WHERE name = 'never-created'") == 0
