"""Migrations and the SQL side of the state machine (issue 2)."""

from __future__ import annotations

import asyncio
import re

import asyncpg
import pytest

from pipeline.database import connect, migrate, migrations
from pipeline.queries import all_queries, q
from pipeline.states import SETTLED, TRANSITIONS, JobState
from tests.conftest import DatabaseFactory

pytestmark = pytest.mark.integration


def _quoted(constraint: str) -> set[str]:
    """The string literals of a CHECK constraint as PostgreSQL prints it back."""
    return set(re.findall(r"'([^']*)'::text", constraint))


async def test_python_and_sql_state_machines_agree(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        rows = await conn.fetch(q("state_transition_list"))
        checks = dict(
            await conn.fetch(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = 'extraction_jobs'::regclass"
                " AND conname IN ('extraction_jobs_state_check', 'finished_exactly_when_settled')"
            )
        )
    sql = {(JobState(r["from_state"]), JobState(r["to_state"])) for r in rows}
    assert sql == set(TRANSITIONS)
    # Exactly the enum's states: a state only SQL allows fails here, not just a missing one.
    assert _quoted(checks["extraction_jobs_state_check"]) == {s.value for s in JobState}
    # finished_at is set exactly in the states Python calls settled.
    assert _quoted(checks["finished_exactly_when_settled"]) == {s.value for s in SETTLED}


async def test_migrate_twice_and_concurrently_is_safe(make_database: DatabaseFactory) -> None:
    # A fresh, empty database (not the template): create it via the admin connection.
    dsn = await make_database()
    conn = await connect(dsn)
    await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")  # start from nothing
    await conn.close()
    conns = [await connect(dsn) for _ in range(3)]
    results = await asyncio.gather(*(migrate(c) for c in conns))
    applied = sorted(v for r in results for v in r)
    assert applied == [m.version for m in migrations()]  # each file applied exactly once
    assert await migrate(conns[0]) == []
    for c in conns:
        await c.close()


async def test_every_named_query_prepares_against_the_schema(pool: asyncpg.Pool) -> None:
    """The migrations produce the schema the queries expect."""
    async with pool.acquire() as conn:
        for name, sql in all_queries().items():
            if name.startswith("migration_") or "CREATE" in sql.split("\n", 1)[0]:
                continue
            try:
                await conn.prepare(sql)
            except asyncpg.PostgresError as exc:  # pragma: no cover - failure path
                pytest.fail(f"query {name} does not prepare: {exc}")


async def test_notify_on_runnable_work(pool: asyncpg.Pool, dsn: str) -> None:
    from pipeline.jobs import JobStore
    from tests.support.jobs import new_tenant, request

    got: asyncio.Queue[str] = asyncio.Queue()
    listener = await connect(dsn)

    def on_notify(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        got.put_nowait(payload)

    await listener.add_listener("fenceline_runnable", on_notify)
    try:
        job = await JobStore(pool).accept(request(await new_tenant(pool)))
        assert await asyncio.wait_for(got.get(), 5) == str(job.job_id)
    finally:
        await listener.close()


async def test_a_kafka_position_is_recorded_once_and_only_a_refusal_has_no_job(
    pool: asyncpg.Pool,
) -> None:
    from pipeline.jobs import JobStore
    from tests.support.jobs import new_tenant, request

    tenant = await new_tenant(pool)
    job = (await JobStore(pool).accept(request(tenant))).job_id
    record = q("kafka_ingress_record")
    async with pool.acquire() as conn:
        here = (tenant.id, "subs", 0, 7)
        assert await conn.fetchval(record, *here, job, "accepted", None, None) == "accepted"
        # The same position again: no row back, nothing written.
        assert await conn.fetchval(record, *here, None, "refused", "not_json", None) is None
        row = await conn.fetchrow(q("kafka_ingress_get"), *here)
        assert (row["job_id"], row["outcome"]) == (job, "accepted")
        bad = [
            (job, "refused", "not_json"),  # a refusal names no job
            (None, "refused", None),  # and always says why
            (None, "accepted", None),  # an accepted record names its job
            (job, "replayed", "why"),  # and no reason
        ]
        for offset, (job_id, outcome, reason) in enumerate(bad, start=10):
            with pytest.raises(asyncpg.CheckViolationError):
                await conn.execute(
                    record, tenant.id, "subs", 0, offset, job_id, outcome, reason, None
                )
