"""A statement that names its row by primary key reads it through the primary key,
whatever plan a pooled connection cached.

PostgreSQL plans a prepared statement generically from its sixth execution on and
keeps that plan until the table's statistics change: for the life of a pooled
connection when autovacuum is off, the first minute or so of a new database when it
is on. A plan made while the tables are empty (every deployment's first minutes, the
intake's warm-up, every benchmark) prices a small partial index or a tenant-leading
index like the primary key. Before this rule a fenced heartbeat or settle read every
RUNNING job through extraction_jobs_running_lease, and a tenant's status read every
job of the tenant through extraction_jobs_tenant_state_page, each time.

So these statements state the other conditions (tenant, expected state) with
IS NOT DISTINCT FROM, which no index serves and no partial index's predicate follows
from (the columns are NOT NULL, so it means "="). This test plans every named query
generically on an empty database, the case above, and checks the rule holds.
"""

from __future__ import annotations

import re
from typing import Any

import asyncpg
import pytest

from pipeline.queries import all_queries

pytestmark = pytest.mark.integration

# Named queries that are not plannable statements (DDL).
NOT_PLANNABLE = {"migration_table_create"}

# "id = $n": the row's primary key given by the caller (not job_id, not a join).
BY_PRIMARY_KEY = re.compile(r"(?<![\w.])id = \$\d+")


def _scans(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node] if "Relation Name" in node else []
    for child in node.get("Plans", []):
        found += _scans(child)
    return found


async def _generic_plan(conn: asyncpg.Connection, text: str) -> dict[str, Any]:
    params = max([int(n) for n in re.findall(r"\$(\d+)", text)] or [0])
    await conn.execute(f"PREPARE generic AS {text}")
    try:
        args = f"({', '.join(['NULL'] * params)})" if params else ""
        plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE generic{args}")
    finally:
        await conn.execute("DEALLOCATE generic")
    node: dict[str, Any] = plan[0]["Plan"]
    return node


async def test_rows_named_by_primary_key_are_read_through_it(pool: asyncpg.Pool) -> None:
    wrong: list[str] = []
    unplannable: set[str] = set()
    checked = 0
    async with pool.acquire() as conn:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        for name, text in sorted(all_queries().items()):
            try:
                async with conn.transaction():  # EXPLAIN of a write writes nothing
                    plan = await _generic_plan(conn, text)
            except asyncpg.PostgresSyntaxError:
                unplannable.add(name)
                continue
            for scan in _scans(plan):
                conditions = f"{scan.get('Index Cond', '')} {scan.get('Filter', '')}"
                if not BY_PRIMARY_KEY.search(conditions):
                    continue
                checked += 1
                pkey = f"{scan['Relation Name']}_pkey"
                if scan.get("Index Name") != pkey or not BY_PRIMARY_KEY.search(
                    scan.get("Index Cond", "")
                ):
                    wrong.append(
                        f"{name}: {scan['Node Type']} on {scan['Relation Name']}"
                        f" via {scan.get('Index Name', '-')} ({conditions.strip()})"
                    )
    assert unplannable == NOT_PLANNABLE
    assert checked > 40  # the fenced transitions, the tenant-scoped reads, the settles
    assert not wrong, "\n".join(wrong)
