"""The backlog reading behind the capacity check reads the unsettled jobs, not history.

Each intake process reads ``job_backlog_stats`` once per capacity interval. Over a
table of settled jobs a full scan grows with history (106 ms for 200,000 rows on
this machine); restricted to the pending states a partial index serves it.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from pipeline.jobs import JobStore
from pipeline.queries import q
from pipeline.settings import Settings
from tests.support.jobs import add_failed_history, new_tenant, request

pytestmark = pytest.mark.integration

HISTORY = 20_000


def _scans(node: dict[str, Any]) -> list[tuple[str, str]]:
    found = [(node["Node Type"], node.get("Relation Name", ""))]
    for child in node.get("Plans", []):
        found += _scans(child)
    return found


async def test_settled_history_neither_counts_nor_gets_scanned(pool: asyncpg.Pool) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    for _ in range(3):
        await store.accept(request(tenant))
    before = await store.backlog()
    assert (before["waiting"], before["runnable"], before["running"]) == (3, 3, 0)
    async with pool.acquire() as conn:
        document = await conn.fetchval(
            "SELECT document_id FROM extraction_jobs WHERE tenant_id = $1 LIMIT 1", tenant.id
        )
        await add_failed_history(conn, tenant.id, document, HISTORY)
        await conn.execute("ANALYZE extraction_jobs")
        # The pool decodes json (pipeline.database), so the plan arrives as a list.
        plan = await conn.fetchval("EXPLAIN (FORMAT JSON) " + q("job_backlog_stats"), None)
    after = await store.backlog()
    assert {k: after[k] for k in ("waiting", "runnable", "running")} == {
        k: before[k] for k in ("waiting", "runnable", "running")
    }
    scans = _scans(plan[0]["Plan"])
    assert ("Seq Scan", "extraction_jobs") not in scans, scans
    assert any(rel == "extraction_jobs" for _, rel in scans), scans
