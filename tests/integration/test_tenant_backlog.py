"""The tenants' running backlog totals (migration 017) against a sum over their jobs.

The accept transaction reads a tenant's pending jobs, bytes and tokens from
``tenant_backlog`` instead of summing its unsettled jobs (which cost O(pending)
under the tenant's admission lock). Whatever moves a job in or out of READY,
RUNNING and RETRY_SCHEDULED must keep the totals equal to that sum.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from pipeline.clock import ManualClock
from pipeline.errors import RetryableError
from pipeline.jobs import JobStore, RedriveRequest, Success, redrive_job
from pipeline.settings import Settings
from pipeline.states import JobState
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration

SUM = """
SELECT count(*) AS jobs, coalesce(sum(d.byte_size), 0)::bigint AS bytes,
       coalesce(sum(j.estimated_tokens), 0)::bigint AS tokens
FROM extraction_jobs j LEFT JOIN documents d ON d.id = j.document_id
WHERE j.tenant_id = $1 AND j.state IN ('READY', 'RUNNING', 'RETRY_SCHEDULED')
"""
TOTALS = """
SELECT coalesce(sum(jobs), 0)::bigint AS jobs, coalesce(sum(bytes), 0)::bigint AS bytes,
       coalesce(sum(tokens), 0)::bigint AS tokens
FROM tenant_backlog WHERE tenant_id = $1
"""


async def totals_and_sum(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> tuple[tuple[int, ...], ...]:
    async with pool.acquire() as conn:
        kept = await conn.fetchrow(TOTALS, tenant_id)
        summed = await conn.fetchrow(SUM, tenant_id)
    return tuple(kept.values()), tuple(summed.values())


async def test_the_totals_follow_every_move_in_and_out_of_the_backlog(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = JobStore(pool, Settings(lease_seconds=30), clock=clock)
    tenant, other = await new_tenant(pool), await new_tenant(pool)
    for i in range(7):
        await store.accept(
            request(tenant, text=f"invoice {i} " + "x" * (i * 100), estimated_tokens=10 * i)
        )
    await store.accept(request(other, estimated_tokens=5))
    await store.accept(request(tenant, key="same"))
    await store.accept(request(tenant, key="same"))  # a replay adds nothing
    kept, summed = await totals_and_sum(pool, tenant.id)
    assert kept == summed and kept[0] == 8 and kept[1] > 0 and kept[2] == 210

    leases = await store.claim("w", limit=8)  # claims move nothing: pending to pending
    assert await totals_and_sum(pool, tenant.id) == (summed, summed)
    mine = [le for le in leases if le.tenant_id == tenant.id]
    done, review, retried, failed, *_ = mine
    await store.succeed(done, result={})
    await store.succeed_many(
        [Success(review, result={}, decision=JobState.REVIEW_REQUIRED, validation={"reasons": []})]
    )
    await store.retry_or_fail(retried, RetryableError("provider 503"))
    await store.fail(failed, error_class="bad", reason="bad")
    kept, summed = await totals_and_sum(pool, tenant.id)
    assert kept == summed and kept[0] == 5

    clock.advance(31)
    await store.reap()  # an expired lease goes back to the queue: still pending
    kept, summed = await totals_and_sum(pool, tenant.id)
    assert kept == summed and kept[0] == 5

    await redrive_job(
        pool, tenant.id, failed.job_id, RedriveRequest(requested_by="ops", reason="fixed")
    )
    kept, summed = await totals_and_sum(pool, tenant.id)
    assert kept == summed and kept[0] == 6  # the re-driven job is pending again

    async with pool.acquire() as conn:  # a bulk change of many jobs in one statement
        await conn.execute(
            "UPDATE extraction_jobs SET state = 'FAILED_TERMINAL', finished_at = now(),"
            " terminal_reason = 'deadline_exceeded', lease_until = NULL, lease_owner = NULL"
            " WHERE tenant_id = $1 AND state IN ('READY', 'RETRY_SCHEDULED')",
            tenant.id,
        )
    kept, summed = await totals_and_sum(pool, tenant.id)
    assert kept == summed == (0, 0, 0)  # the reaper had put the running ones back
    async with pool.acquire() as conn:  # a pending job deleted (with what refers to it)
        victim = await conn.fetchval(
            "SELECT id FROM extraction_jobs WHERE tenant_id = $1", other.id
        )
        for table in ("job_events", "job_attempts", "outbox_events", "spend_reservations"):
            await conn.execute(f"DELETE FROM {table} WHERE job_id = $1", victim)
        await conn.execute("DELETE FROM extraction_jobs WHERE id = $1", victim)
    assert await totals_and_sum(pool, other.id) == ((0, 0, 0), (0, 0, 0))
    await store.accept(request(other, estimated_tokens=5))
    kept_other, summed_other = await totals_and_sum(pool, other.id)
    assert kept_other == summed_other and kept_other[0] == 1 and kept_other[2] == 5
