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
# "col = ANY ($n)": rows named by an array the caller gives.
BY_ARRAY = re.compile(r"(?<![\w.])(\w+) = ANY \(\$\d+")
# The outbox relay's mark as it was written before migration 022: the detector's
# own check (a plan cached on an empty table reads the unpublished backlog).
ARRAY_MARK_BEFORE_022 = """UPDATE outbox_events SET published_at = now()
WHERE event_id = ANY($1::uuid[]) AND published_at IS NULL RETURNING event_id"""


def _index_of(scan: dict[str, Any]) -> str:
    """The index a scan reads (a bitmap heap scan's is its child's), or "-"."""
    names = [scan.get("Index Name", "")] + [c.get("Index Name", "") for c in scan.get("Plans", [])]
    return ",".join(n for n in names if n) or "-"


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


async def _array_lookups_off_the_key(
    conn: asyncpg.Connection, name: str, text: str, keys: dict[str, str]
) -> tuple[int, list[str]]:
    """Scans that take rows named by ``key = ANY ($n)`` (how many), and those among them
    that do not read them through the table's primary key."""
    async with conn.transaction():
        plan = await _generic_plan(conn, text)
    found, wrong = 0, []
    for scan in _scans(plan):
        table = scan["Relation Name"]
        conditions = " ".join(
            str(scan.get(k, "")) for k in ("Index Cond", "Recheck Cond", "Filter")
        )
        if keys.get(table) not in BY_ARRAY.findall(conditions):
            continue
        found += 1
        if _index_of(scan) != f"{table}_pkey":
            wrong.append(f"{name}: {scan['Node Type']} on {table} via {_index_of(scan)}")
    return found, wrong


async def test_rows_named_by_an_array_of_keys_are_read_through_the_primary_key(
    pool: asyncpg.Pool,
) -> None:
    """A plan cached while a table is small reads "key = ANY ($n)" by a sequential scan
    or a partial index whose predicate the statement states: the outbox relay's mark
    read the whole unpublished backlog per batch. Such statements name their rows
    one at a time (migration 022) or through a lookup per id (LATERAL)."""
    async with pool.acquire() as conn:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        keys = dict(
            await conn.fetch(
                """SELECT c.relname, a.attname FROM pg_index i
                   JOIN pg_class c ON c.oid = i.indrelid
                   JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
                   WHERE i.indisprimary AND i.indnkeyatts = 1"""
            )
        )
        found, wrong = await _array_lookups_off_the_key(
            conn, "mark before 022", ARRAY_MARK_BEFORE_022, keys
        )
        assert (found, len(wrong)) == (1, 1), wrong  # the detector sees the old statement
        problems: list[str] = []
        for name, text in sorted(all_queries().items()):
            if name in NOT_PLANNABLE:
                continue
            problems += (await _array_lookups_off_the_key(conn, name, text, keys))[1]
    assert not problems, "\n".join(problems)
