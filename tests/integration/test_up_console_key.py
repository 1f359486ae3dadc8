"""``fenceline up`` prints the review console's URL and a real key (issue 18): on a
database without tenants it creates tenant ``default`` and issues an expiring key
with the review scope, printed once; a database with other tenants gets no invented
tenant. The key signs in to the console and sees the tenant's review queue."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from cluster.cli.system import CONSOLE_KEY_SECONDS, console_banner
from pipeline.api import create_app
from pipeline.database import connect
from pipeline.tenants import LOCAL_TENANT, authenticate, console_key, list_keys, list_tenants
from tests.support.api import TenantKey, loopback_server, settings_for
from tests.support.console import console_login

pytestmark = pytest.mark.integration


async def test_a_fresh_database_gets_the_default_tenant_and_a_review_key(
    pool: asyncpg.Pool, dsn: str
) -> None:
    conn = await connect(dsn)
    try:
        assert await list_tenants(conn) == []
        first = await console_key(conn, LOCAL_TENANT, expires_in_seconds=CONSOLE_KEY_SECONDS)
        again = await console_key(conn, LOCAL_TENANT, expires_in_seconds=CONSOLE_KEY_SECONDS)
        elsewhere = await console_key(conn, "acme", expires_in_seconds=CONSOLE_KEY_SECONDS)
        tenants = await list_tenants(conn)
        assert first is not None and again is not None
        principal = await authenticate(conn, first.secret)
        keys = await list_keys(conn, LOCAL_TENANT)
    finally:
        await conn.close()
    assert [t.name for t in tenants] == [LOCAL_TENANT]
    assert elsewhere is None  # tenants exist: none is invented
    assert first.secret != again.secret and first.tenant_id == again.tenant_id
    assert principal is not None and {"review", "operator", "jobs"} <= principal.scopes
    assert len(keys) == 2 and all(k.expires_at is not None for k in keys)
    assert first.secret not in str(keys)  # only the prefix is stored
    banner = console_banner("http://127.0.0.1:8000", LOCAL_TENANT, first)
    assert "review console: http://127.0.0.1:8000/console" in banner
    assert f"sign in with {first.secret}\n" in banner and "expires 20" in banner
    # The printed key signs in to the console of that cluster.
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        tk = TenantKey(tenants[0], first.secret, first.key_id)
        await console_login(c, tk)
        queue = await c.get("/console/queue")
        dashboard = await c.get("/console/dashboard")
    assert queue.status_code == 200 and dashboard.status_code == 200


def test_without_a_key_the_banner_says_how_to_make_one() -> None:
    none_named = console_banner("http://h:1", "default", None)
    not_asked = console_banner("http://h:1", None, None)
    assert "none named 'default'" in none_named and "--console-tenant" in none_named
    assert "keys create --tenant NAME --scope jobs --scope review" in not_asked
    assert "flk_" not in none_named + not_asked
