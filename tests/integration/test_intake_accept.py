"""The one-statement accept (``intake_accept``, migration 018), below the HTTP layer.

The API tests (``test_api_intake.py``, ``test_api_quotas.py``) cover every
answer through the app; these pin what only the statement can show: it is its
own transaction, it writes nothing unless it accepts, and a key taken by a writer
that does not hold the admission lock is answered as a known key.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import asyncpg
import pytest

from pipeline.jobs import ADMISSION_LOCK_NAMESPACE, AdmissionCheck, JobStore
from pipeline.settings import Settings
from tests.support.api import WRITTEN_TABLES, count_rows
from tests.support.jobs import add_failed_history, new_tenant, request

pytestmark = pytest.mark.integration


def check(*, capacity_refused: bool = False, cost: str = "0.01") -> AdmissionCheck:
    return AdmissionCheck(
        lock_namespace=ADMISSION_LOCK_NAMESPACE,
        period="month",
        api_key_id=None,
        capacity_refused=capacity_refused,
        cost=Decimal(cost),
    )


async def test_an_accept_is_its_own_transaction_with_job_event_and_reservation(
    pool: asyncpg.Pool,
) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    async with pool.acquire() as conn:
        row = await store.admit_and_accept(request(tenant, key="k1"), check(), conn=conn)
        assert not conn.is_in_transaction()
    assert row["outcome"] == "accepted" and row["job_id"] is not None
    assert row["accepted_state"] == "READY" and row["accepted_state_version"] == 1
    async with pool.acquire() as conn:
        events = await conn.fetchval(
            "SELECT count(*) FROM outbox_events WHERE job_id = $1", row["job_id"]
        )
        reserved = await conn.fetchval(
            "SELECT amount FROM spend_reservations WHERE job_id = $1", row["job_id"]
        )
    assert events == 1 and reserved == Decimal("0.01")


@pytest.mark.parametrize(
    ("quota", "outcome"),
    [
        pytest.param({"max_pending_jobs": 0}, "quota_pending_jobs", id="jobs"),
        pytest.param({"max_pending_bytes": 3}, "quota_pending_bytes", id="bytes"),
        pytest.param({"max_pending_tokens": 3}, "quota_pending_tokens", id="tokens"),
        pytest.param({"spend_budget": Decimal("0.001")}, "quota_spend_budget", id="spend"),
    ],
)
async def test_a_refusal_writes_nothing(
    pool: asyncpg.Pool, quota: dict[str, object], outcome: str
) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool, **quota)
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with pool.acquire() as conn:
        row = await store.admit_and_accept(request(tenant, estimated_tokens=10), check(), conn=conn)
    assert row["outcome"] == outcome and row["job_id"] is None
    assert await count_rows(pool, *WRITTEN_TABLES) == before


async def test_capacity_refuses_a_new_key_but_answers_a_known_one(pool: asyncpg.Pool) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    async with pool.acquire() as conn:
        first = await store.admit_and_accept(request(tenant, key="k"), check(), conn=conn)
        again = await store.admit_and_accept(
            request(tenant, key="k"), check(capacity_refused=True), conn=conn
        )
        new = await store.admit_and_accept(
            request(tenant, key="new"), check(capacity_refused=True), conn=conn
        )
    assert (again["outcome"], again["job_id"]) == ("known_key", first["job_id"])
    assert again["request_hash"] == first["request_hash"]
    assert (new["outcome"], new["job_id"]) == ("capacity", None)


async def test_a_key_taken_by_a_writer_without_the_lock_is_a_known_key(
    pool: asyncpg.Pool,
) -> None:
    """The job store's own accept does not take the admission lock. If it holds the
    key uncommitted while an intake accept reads, the intake's insert waits on the
    unique key, finds it taken after the commit, and answers from that job."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    req = request(tenant, key="raced")
    async with pool.acquire() as writer, pool.acquire() as intake:
        tx = writer.transaction()
        await tx.start()
        taken = await store.accept(req, conn=writer)
        pending = asyncio.create_task(store.admit_and_accept(req, check(), conn=intake))
        await asyncio.sleep(0.3)
        assert not pending.done()  # waiting on the uncommitted key
        await tx.commit()
        row = await asyncio.wait_for(pending, 10)
    assert (row["outcome"], row["job_id"]) == ("known_key", taken.job_id)
    async with pool.acquire() as conn:
        reservations = await conn.fetchval(
            "SELECT count(*) FROM spend_reservations WHERE job_id = $1", taken.job_id
        )
    assert reservations == 0  # the store's accept reserves nothing; the intake added none


HISTORY = 3_000


async def test_a_plan_cached_on_an_empty_table_still_reads_one_key_entry(
    pool: asyncpg.Pool,
) -> None:
    """A pooled connection caches the admission read's generic plan early (the intake
    warms every connection at start, on an empty table) and keeps it until the
    table's statistics change. With the key lookup as "tenant_id = $ AND
    idempotency_key = $" that plan was an index scan of the tenant's pages with the
    key as a filter, so each accept read all of the tenant's jobs (migration 020)."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    async with pool.acquire() as conn:
        # What the sixth call of a session does anyway: plan once, generically, now.
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        first = await store.admit_and_accept(request(tenant), check(), conn=conn)
        assert first["outcome"] == "accepted"
        await add_failed_history(conn, tenant.id, first["document_id"], HISTORY)
        # This backend's not yet reported counts (they may include the INSERT's
        # foreign-key checks): heap rows of extraction_jobs fetched through an index.
        fetched_sql = (
            "SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = 'extraction_jobs'"
        )
        async with conn.transaction():
            before = await conn.fetchval(fetched_sql)
            row = await store.admit_and_accept(request(tenant), check(), conn=conn)
            fetched = await conn.fetchval(fetched_sql) - before
        replay = await store.admit_and_accept(request(tenant, key="settled-7"), check(), conn=conn)
    assert row["outcome"] == "accepted"
    # The key's entry (none: a new key) and the foreign-key checks of the new job's
    # event, audit row and reservation: a handful, not the tenant's 3,000 jobs.
    assert fetched < 20, f"{fetched} job rows read for one accept"
    assert replay["outcome"] == "known_key" and replay["accepted_state"] == "FAILED_TERMINAL"
