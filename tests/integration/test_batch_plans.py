"""Statements over a batch of ids read the batch's rows, whatever plan was cached.

A pooled connection plans a prepared statement generically from its sixth
execution on and keeps that plan until the table's statistics change (for the
life of the connection when autovacuum is off). Planned while the tables are
empty, a join of ``unnest($1)`` or an ``id = ANY ($1)`` with the job table prices
any index whose predicate matches the statement's state as cheap as the primary
key: the batched settle then read every RUNNING job through
extraction_jobs_running_lease, and the delivery hook every SUCCEEDED job of every
tenant through extraction_jobs_tenant_state_page, once per batch (migration 021
and delivery_create_for_jobs in sql/queries/deliveries.sql).

Each test caches the plans on an almost empty database (a connection that plans
generically from the first execution: what the sixth does anyway), adds 3,000
jobs of another tenant in the state the old plan scanned, and counts the job rows
one batch of 16 reads inside its own transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence

import asyncpg
import pytest

from pipeline.database import create_pool
from pipeline.delivery import job_store
from pipeline.jobs import JobStore, Settled, Success
from pipeline.queries import q
from pipeline.settings import Settings
from tests.support.jobs import add_jobs, new_tenant, request

pytestmark = pytest.mark.integration

HISTORY = 3_000
BATCH = 16

# Heap rows of extraction_jobs this backend fetched through any index or scan and
# has not reported yet. It reports at most once a second, when idle: settle_batch
# forces a report just before the settle, so what the hook reads is the settle's.
ROWS_READ = """SELECT idx_tup_fetch + seq_tup_read FROM pg_stat_xact_user_tables
               WHERE relname = 'extraction_jobs'"""


@pytest.fixture
async def generic_pool(dsn: str, pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Pool]:
    """One connection (so every statement runs on the backend whose plans and counts the
    test reads) that plans generically from each statement's first execution."""
    database = dsn.rsplit("/", 1)[1].split("?")[0]
    async with pool.acquire() as conn:
        await conn.execute(f'ALTER DATABASE "{database}" SET plan_cache_mode = force_generic_plan')
    one = await create_pool(dsn, min_size=1, max_size=1)
    try:
        yield one
    finally:
        await one.close()


class RowsRead:
    """A batch settle hook, registered last: what the transaction has read so far."""

    def __init__(self) -> None:
        self.counts: list[int] = []

    async def __call__(self, conn: asyncpg.Connection, settled: Settled) -> None:
        await self.many(conn, [settled])

    async def many(self, conn: asyncpg.Connection, settled: Sequence[Settled]) -> None:
        self.counts.append(await conn.fetchval(ROWS_READ))


async def settle_batch(store: JobStore, n: int) -> list[uuid.UUID]:
    tenant = await new_tenant(store.pool)
    for _ in range(n):
        await store.accept(request(tenant))
    leases = await store.claim("driver", limit=n)
    assert len(leases) == n
    await store.pool.execute("SELECT pg_stat_force_next_flush()")  # the pool's one connection
    outcome = await store.succeed_many([Success(lease, result={"n": 1}) for lease in leases])
    assert not outcome.lost
    return [s.job_id for s in outcome.settled]


async def grow(pool: asyncpg.Pool, state: str) -> None:
    other = await new_tenant(pool)
    async with pool.acquire() as conn:
        await add_jobs(conn, other.id, None, HISTORY, state)


async def test_a_batch_settle_reads_its_own_jobs_not_every_live_lease(
    generic_pool: asyncpg.Pool,
) -> None:
    store = JobStore(generic_pool, Settings())
    rows_read = RowsRead()
    store.settle_hooks.add(rows_read)
    await settle_batch(store, 2)  # the plan, cached while the table is empty
    await grow(generic_pool, "RUNNING")  # another driver's live leases

    settled = await settle_batch(store, BATCH)

    assert len(settled) == BATCH
    # Each job row through its primary key (and the foreign-key checks of its
    # result row and event): a few per job, not the 3,000 other leases.
    assert rows_read.counts[-1] < 10 * BATCH, f"{rows_read.counts[-1]} job rows read"


async def test_a_batch_creates_its_deliveries_without_reading_every_success(
    generic_pool: asyncpg.Pool,
) -> None:
    store = job_store(generic_pool, Settings())  # the delivery hook runs first
    rows_read = RowsRead()
    store.settle_hooks.add(rows_read)
    await settle_batch(store, 2)
    await grow(generic_pool, "SUCCEEDED")  # every tenant's history
    # No endpoint anywhere: the statement reads the batch's jobs all the same.
    assert await generic_pool.fetchval("SELECT count(*) FROM webhook_endpoints") == 0

    before = len(rows_read.counts)
    settled = await settle_batch(store, BATCH)

    assert len(settled) == BATCH and len(rows_read.counts) == before + 1
    assert rows_read.counts[-1] < 10 * BATCH, f"{rows_read.counts[-1]} job rows read"


OUTBOX_ROWS_READ = """SELECT idx_tup_fetch + seq_tup_read FROM pg_stat_xact_user_tables
                      WHERE relname = 'outbox_events'"""


async def add_unpublished(conn: asyncpg.Connection, n: int) -> list[uuid.UUID]:
    rows = await conn.fetch(
        """INSERT INTO outbox_events (event_id, event_type, payload, claimed_until)
           SELECT gen_random_uuid(), 'probe.v1', '{}'::jsonb, now() + interval '1 minute'
           FROM generate_series(1, $1) RETURNING event_id""",
        n,
    )
    return [r["event_id"] for r in rows]


async def test_the_relay_settles_its_batch_without_reading_the_backlog(
    generic_pool: asyncpg.Pool,
) -> None:
    """After a broker outage the backlog is every event written meanwhile: marking or
    releasing one batch must not read it all (3,000 here), or the drain is quadratic."""
    async with generic_pool.acquire() as conn:
        first = await add_unpublished(conn, 4)  # the plans, cached on an almost empty table
        claim = await conn.fetchval(
            "SELECT claimed_until FROM outbox_events WHERE event_id = $1", first[0]
        )
        assert len(await conn.fetch(q("outbox_mark_published"), first[:2], "broker", None)) == 2
        released = await conn.fetch(
            q("outbox_release_with_error"), first[2:], "nacked", 1.0, None, claim
        )
        assert len(released) == 2
        await add_unpublished(conn, HISTORY)  # the backlog of an outage
        batch = await add_unpublished(conn, BATCH)
        batch_claim = await conn.fetchval(
            "SELECT claimed_until FROM outbox_events WHERE event_id = $1", batch[0]
        )

        reads = []
        for statement, args in (
            ("outbox_release_with_error", (batch, "nacked", 1.0, None, batch_claim)),
            ("outbox_mark_published", (batch, "broker", None)),
        ):
            async with conn.transaction():
                before = await conn.fetchval(OUTBOX_ROWS_READ) or 0
                done = await conn.fetch(q(statement), *args)
                reads.append((await conn.fetchval(OUTBOX_ROWS_READ) or 0) - before)
            assert len(done) == BATCH, statement

    assert all(r < 4 * BATCH for r in reads), f"outbox rows read (release, mark): {reads}"
