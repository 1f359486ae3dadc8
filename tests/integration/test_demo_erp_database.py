"""The demo's set-up gives the reference ERP a database of its own: the demo's
Fenceline database holds no ``erp_*`` table (so a dump of it holds nothing the ERP
received in plaintext), and the ERP's holds its tables and none of Fenceline's.

(The full demo needs the vLLM engine; this runs its database set-up,
:func:`benchmarks.demo.run.create_demo_database`, on the test server.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from benchmarks.demo.erp import erp_database_url
from benchmarks.demo.run import create_demo_database
from pipeline.database import connect, drop_database, dsn_for
from pipeline.jobs import admin_dsn
from pipeline.settings import Settings
from tests.conftest import ADMIN_DSN

pytestmark = pytest.mark.integration

ERP_TABLES = {"erp_inbox", "erp_postings", "erp_supersessions"}


@pytest.fixture
async def demo_url() -> AsyncIterator[str]:
    """A demo database URL of its own on the test server; both databases dropped after."""
    url = dsn_for(ADMIN_DSN, f"fl_demo_{uuid.uuid4().hex[:10]}")
    yield url
    for dsn in (url, erp_database_url(url)):
        admin, name = admin_dsn(dsn)
        await drop_database(admin, name)


async def _tables(dsn: str) -> set[str]:
    conn = await connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT tablename FROM pg_tables"
            " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        )
    finally:
        await conn.close()
    return {r["tablename"] for r in rows}


async def test_the_demo_database_has_no_erp_table_and_the_erp_database_has_them(
    demo_url: str,
) -> None:
    await create_demo_database(Settings().model_copy(update={"database_url": demo_url}))
    erp_url = erp_database_url(demo_url)
    assert admin_dsn(erp_url)[1] == admin_dsn(demo_url)[1] + "_erp"
    fenceline, erp = await _tables(demo_url), await _tables(erp_url)
    assert {"extraction_jobs", "extraction_results", "deliveries"} <= fenceline
    assert not {t for t in fenceline if t.startswith("erp_")}
    assert ERP_TABLES <= erp
    assert not erp & {"extraction_jobs", "extraction_results", "tenants", "deliveries"}


async def test_the_demo_set_up_recreates_the_erp_database(demo_url: str) -> None:
    settings = Settings().model_copy(update={"database_url": demo_url})
    await create_demo_database(settings)
    erp = await connect(erp_database_url(demo_url))
    try:
        await erp.execute(
            "INSERT INTO erp_postings (ledger, job_id, delivery_id, invoice)"
            " VALUES ('default', $1, 'msg_1', '{}')",
            uuid.uuid4(),
        )
    finally:
        await erp.close()
    await create_demo_database(settings)  # a second run starts from nothing
    erp = await connect(erp_database_url(demo_url))
    try:
        assert await erp.fetchval("SELECT count(*) FROM erp_postings") == 0
    finally:
        await erp.close()
