"""The operator dashboard's admission section over real HTTP and PostgreSQL (issue 18):
each tenant's usage against the limits the scope's admission actor recorded in
``admission_scopes`` when it started, read by the API process that never saw the
actor's configuration, and nothing of another tenant's usage or override."""

from __future__ import annotations

import re
import uuid

import asyncpg
import httpx
import pytest

from cluster.admission import AdmissionActor
from pipeline.admission import AdmissionConfig, AdmissionRequest, Grant, Wait
from pipeline.api import create_app
from pipeline.usage import Usage
from tests.support.api import loopback_server, settings_for, tenant_with_key

pytestmark = pytest.mark.integration


def granted(result: Grant | Wait) -> Grant:
    assert isinstance(result, Grant), result
    return result


def admission_row(html: str, scope: str) -> list[str]:
    """The cells of the dashboard's admission row for ``scope``, as text."""
    m = re.search(rf'<tr data-scope="{re.escape(scope)}">(.*?)</tr>', html, re.S)
    assert m, html.split('id="admission"')[-1][:2000]
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", m[1])]


async def test_dashboard_shows_each_tenants_usage_against_the_recorded_limits(
    pool: asyncpg.Pool, dsn: str
) -> None:
    a = await tenant_with_key(pool, scopes=("operator",))
    b = await tenant_with_key(pool, scopes=("operator",))
    scope = f"pool-{uuid.uuid4().hex[:8]}"
    idle = f"idle-{uuid.uuid4().hex[:8]}"
    config = AdmissionConfig(
        scope=scope,
        rpm=600,
        tpm=60_000,
        max_in_flight=8,
        max_concurrent_tokens=20_000,
        tenant_max_in_flight=4,
        tenant_in_flight={str(a.tenant.id): 3},
    )
    actor = AdmissionActor(config, database_url=dsn)
    unused = AdmissionActor(AdmissionConfig(scope=idle, max_in_flight=2), database_url=dsn)
    await unused.start()
    done = granted(await actor.acquire(AdmissionRequest(str(a.tenant.id), 1000, 200)))
    await actor.release(done, Usage(900, 100))  # reconciled: 1,000 tokens charged
    granted(await actor.acquire(AdmissionRequest(str(a.tenant.id), 500, 300)))  # open: 800 reserved
    granted(
        await actor.acquire(AdmissionRequest(str(b.tenant.id), 2000, 1000))
    )  # b's, open: 3,000 reserved
    app = create_app(settings_for(dsn), pool=pool)
    try:
        async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
            page_a = await c.get("/console/dashboard", headers=a.headers)
            page_b = await c.get("/console/dashboard", headers=b.headers)
    finally:
        await actor.stop()
        await unused.stop()
    assert page_a.status_code == page_b.status_code == 200, page_a.text
    row_a, row_b = admission_row(page_a.text, scope), admission_row(page_b.text, scope)
    assert row_a[1:6] == [
        "2 / 600 (0 %)",
        "1,800 / 60,000 (3 %)",
        "1 / 3 (33 %)",  # a's own override, not the default 4
        "1 / 8 (12 %)",
        "800 / 20,000 (4 %)",
    ]
    assert row_b[1:6] == [
        "1 / 600 (0 %)",
        "3,000 / 60,000 (5 %)",
        "1 / 4 (25 %)",  # the default: b has no override, and a's is not shown
        "1 / 8 (12 %)",
        "3,000 / 20,000 (15 %)",
    ]
    assert row_a[6].endswith("UTC") and row_a[6] != "never"
    # A configured scope the tenant never used is listed with its limits.
    assert admission_row(page_a.text, idle)[1:6] == [
        "0 / no limit",
        "0 / no limit",
        "0 / no limit",
        "0 / 2 (0 %)",
        "0 / no limit",
    ]
    assert str(a.tenant.id) not in page_b.text and str(b.tenant.id) not in page_a.text


async def test_a_restarted_actor_records_its_new_limits(pool: asyncpg.Pool, dsn: str) -> None:
    scope = f"pool-{uuid.uuid4().hex[:8]}"
    first = AdmissionActor(AdmissionConfig(scope=scope, rpm=100), database_url=dsn)
    await first.start()
    await first.stop()
    second = AdmissionActor(AdmissionConfig(scope=scope, rpm=250, tpm=9000), database_url=dsn)
    await second.start()
    await second.stop()
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT rpm, tpm, incarnation FROM admission_scopes WHERE scope = $1", scope
        )
    assert [(r["rpm"], r["tpm"], r["incarnation"]) for r in rows] == [
        (250, 9000, second.incarnation)
    ]
