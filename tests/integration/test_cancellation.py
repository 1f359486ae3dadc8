"""Cancellation of unsettled jobs (issue 46, item 4), against the real PostgreSQL.

Each cancellable state (READY, RETRY_SCHEDULED, RUNNING with a late result that
must be stale), a settled job refused with 409, idempotence, another tenant's job
(404), deliveries not yet sent (abandoned) and sent (reported), the audit trail
and ``explain``, the operator's bulk cancel (dry run first) and its CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from pipeline.api.app import create_app
from pipeline.delivery import DeliveryStore, delivery_settle_hook
from pipeline.errors import CancelRefused, LeaseLost, NotFound, ProviderRateLimited
from pipeline.jobs import (
    EVENT_CANCELLED,
    CancelFilter,
    CancelRequest,
    JobStore,
    cancel_job,
    cancel_matching,
    render_explain,
)
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.usage import AttemptUsage
from tests.support.api import add_key, asgi_client, settings_for, tenant_with_key
from tests.support.delivery import registry_for
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration

BY = CancelRequest(requested_by="ops@example", reason="invoice withdrawn")


async def job_row(pool: asyncpg.Pool, job_id: uuid.UUID) -> asyncpg.Record:
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT * FROM extraction_jobs WHERE id = $1", job_id)
    assert row is not None
    return row


async def last_event(pool: asyncpg.Pool, job_id: uuid.UUID) -> asyncpg.Record:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT * FROM job_events WHERE job_id = $1 ORDER BY seq DESC LIMIT 1", job_id
        )
    assert row is not None
    return row


async def test_cancel_ready_job_is_final_audited_and_never_claimed(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    before = await job_row(pool, job.job_id)

    done = await cancel_job(pool, tenant.id, job.job_id, BY)

    after = await job_row(pool, job.job_id)
    assert after["state"] == "CANCELLED"
    assert after["finished_at"] is not None
    assert after["fence"] == before["fence"]  # no lease to fence off
    assert after["state_version"] == done.state_version > before["state_version"]
    assert done.cancelled_from is JobState.READY and not done.repeated
    assert await store.claim("w") == []
    event = await last_event(pool, job.job_id)
    assert (event["from_state"], event["to_state"], event["detail"]) == (
        "READY",
        "CANCELLED",
        "cancelled",
    )
    async with pool.acquire() as conn:
        outbox = await conn.fetch(
            "SELECT event_type, payload FROM outbox_events WHERE job_id = $1", job.job_id
        )
    cancelled = [o for o in outbox if o["event_type"] == EVENT_CANCELLED]
    assert len(cancelled) == 1
    explained = await store.explain(job.job_id)
    assert [c["requested_by"] for c in explained["cancellations"]] == ["ops@example"]
    text = render_explain(explained)
    assert "cancellations:" in text and "ops@example: invoice withdrawn" in text
    assert "from READY" in text


async def test_cancel_retry_scheduled_job(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    lease = (await store.claim("w"))[0]
    await store.retry_or_fail(lease, ProviderRateLimited("429", retry_after=30))
    assert (await job_row(pool, job.job_id))["state"] == "RETRY_SCHEDULED"

    done = await cancel_job(pool, tenant.id, job.job_id, BY)

    assert done.cancelled_from is JobState.RETRY_SCHEDULED
    assert (await job_row(pool, job.job_id))["state"] == "CANCELLED"


async def test_cancel_running_job_makes_its_late_result_stale(pool: asyncpg.Pool) -> None:
    store = JobStore(pool, Settings(lease_seconds=300))
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    lease = (await store.claim("driver-1"))[0]

    done = await cancel_job(pool, tenant.id, job.job_id, BY)

    assert done.cancelled_from is JobState.RUNNING
    assert (done.fence_before, done.fence_after) == (lease.fence, lease.fence + 1)
    row = await job_row(pool, job.job_id)
    assert row["state"] == "CANCELLED" and row["lease_until"] is None
    # The attempt still running finishes: every write under its fence is refused.
    with pytest.raises(LeaseLost):
        await store.heartbeat(lease)
    with pytest.raises(LeaseLost):
        await store.succeed(lease, result={"late": True})
    assert await store.record_late_result(lease, AttemptUsage(prompt_tokens=7, completion_tokens=3))
    async with pool.acquire() as conn:
        results = await conn.fetchval(
            "SELECT count(*) FROM extraction_results WHERE job_id = $1", job.job_id
        )
    assert results == 0
    assert (await job_row(pool, job.job_id))["state"] == "CANCELLED"
    explained = await store.explain(job.job_id)
    [attempt] = explained["attempts"]
    assert attempt["outcome"] == "cancelled" and attempt["uncertain"] is True
    assert attempt["late_result_at"] is not None and attempt["prompt_tokens"] == 7
    assert "late result discarded" in render_explain(explained)


async def test_cancel_is_idempotent_and_settled_jobs_are_refused(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    first = await cancel_job(pool, tenant.id, job.job_id, BY)
    again = await cancel_job(
        pool, tenant.id, job.job_id, CancelRequest(requested_by="someone-else")
    )
    assert again.repeated
    assert (again.cancellation_id, again.requested_by, again.state_version) == (
        first.cancellation_id,
        "ops@example",
        first.state_version,
    )
    async with pool.acquire() as conn:
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM job_events WHERE job_id = $1 AND to_state = 'CANCELLED'",
                job.job_id,
            )
            == 1
        )

    done = await store.accept(request(tenant))
    lease = (await store.claim("w"))[0]
    await store.succeed(lease, result={"x": 1})
    with pytest.raises(CancelRefused) as refused:
        await cancel_job(pool, tenant.id, done.job_id, BY)
    assert refused.value.state == "SUCCEEDED"
    assert (await job_row(pool, done.job_id))["state"] == "SUCCEEDED"


async def test_cancel_of_another_tenants_job_is_not_found(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    owner, other = await new_tenant(pool), await new_tenant(pool)
    job = await store.accept(request(owner))
    with pytest.raises(NotFound):
        await cancel_job(pool, other.id, job.job_id, BY)
    assert (await job_row(pool, job.job_id))["state"] == "READY"


async def test_unsent_delivery_is_cancelled_and_a_sent_one_reported(pool: asyncpg.Pool) -> None:
    """No path today gives an unsettled job a delivery (they are made on success), so
    the rows are written here: a cancellation must still never send what it stops,
    and never claim to recall what was sent."""
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    registry = registry_for(pool)
    a = await registry.register(tenant.id, "http://127.0.0.1:9/a")
    b = await registry.register(tenant.id, "http://127.0.0.1:9/b")
    job = await store.accept(request(tenant))
    await store.claim("w")
    pending, sent = uuid.uuid4(), uuid.uuid4()
    async with pool.acquire() as conn:
        for delivery_id, endpoint, state in (
            (pending, a.endpoint.id, "pending"),
            (sent, b.endpoint.id, "delivered"),
        ):
            await conn.execute(
                """INSERT INTO deliveries (id, tenant_id, endpoint_id, job_id, event_type, body,
                       body_sha256, state, next_attempt_at, horizon_start, created_at,
                       delivered_at)
                   VALUES ($1, $2, $3, $4, 'x.v1', '\\x00', repeat('0', 64), $5, now(), now(),
                           now(), CASE WHEN $5 = 'delivered' THEN now() END)""",
                delivery_id,
                tenant.id,
                endpoint,
                job.job_id,
                state,
            )

    done = await cancel_job(pool, tenant.id, job.job_id, BY)

    assert done.deliveries_cancelled == (pending,)
    assert done.deliveries_sent == (sent,)
    async with pool.acquire() as conn:
        states = dict(
            await conn.fetch(
                "SELECT id, state || ':' || coalesce(final_reason, '') FROM deliveries"
                " WHERE job_id = $1",
                job.job_id,
            )
        )
    assert states == {pending: "abandoned:job_cancelled", sent: "delivered:"}
    # A delivery redrive does not send what the cancellation stopped.
    with pytest.raises(NotFound):
        await DeliveryStore(pool).redrive(tenant.id, pending)
    text = render_explain(await store.explain(job.job_id))
    assert f"deliveries not sent, cancelled: {pending}" in text
    assert f"deliveries already sent (not recalled): {sent}" in text


async def test_api_cancel_is_tenant_scoped_idempotent_and_409_when_settled(
    pool: asyncpg.Pool, dsn: str
) -> None:
    store = JobStore(pool)
    store.settle_hooks.add(delivery_settle_hook)
    owner = await tenant_with_key(pool)
    other = await tenant_with_key(pool)
    reviewer = await add_key(pool, owner, ("review",))
    await registry_for(pool).register(owner.tenant.id, "http://127.0.0.1:9/erp")
    job = await store.accept(request(owner.tenant))
    settled = await store.accept(request(owner.tenant))
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as c:
        path = f"/v1/extraction-jobs/{job.job_id}/cancel"
        r = await c.post(path, headers=other.headers)
        assert r.status_code == 404, r.text
        r = await c.post(path, headers=reviewer.headers)
        assert r.status_code == 403, r.text
        assert (await job_row(pool, job.job_id))["state"] == "READY"

        r = await c.post(path, json={"reason": "sent twice"}, headers=owner.headers)
        assert r.status_code == 200, r.text
        first = r.json()
        assert first["state"] == "CANCELLED" and first["cancelled_from"] == "READY"
        assert first["requested_by"] == f"key:{owner.key_id}" and not first["repeated"]
        r = await c.post(path, headers=owner.headers)
        assert r.status_code == 200, r.text
        assert r.json()["repeated"] is True
        assert r.json()["cancellation_id"] == first["cancellation_id"]
        r = await c.get(f"/v1/extraction-jobs/{job.job_id}", headers=owner.headers)
        assert r.json()["state"] == "CANCELLED"

        for lease in await store.claim("w", limit=5):
            await store.succeed(lease, result={"x": 1})
        r = await c.post(f"/v1/extraction-jobs/{settled.job_id}/cancel", headers=owner.headers)
        assert r.status_code == 409, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        body = r.json()
        assert body["state"] == "SUCCEEDED" and body["reason"] == "settled"
        assert [d["state"] for d in body["deliveries"]] == ["pending"]


async def test_bulk_cancel_by_state_and_age_with_dry_run(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    tenant, other = await new_tenant(pool), await new_tenant(pool)
    waiting = (await store.accept(request(tenant))).job_id
    lease = (await store.claim("w"))[0]
    await store.retry_or_fail(lease, ProviderRateLimited("429", retry_after=60))
    running = (await store.accept(request(tenant))).job_id
    assert [x.job_id for x in await store.claim("w")] == [running]
    ready = [(await store.accept(request(tenant))).job_id for _ in range(2)]
    old = [waiting, *ready]
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE extraction_jobs SET created_at = now() - interval '2 hours' WHERE id = ANY($1)",
            [*old, running],
        )
    fresh = (await store.accept(request(tenant))).job_id
    elsewhere = (await store.accept(request(other))).job_id
    selection = CancelFilter(
        tenant_id=tenant.id,
        states=frozenset({JobState.READY, JobState.RETRY_SCHEDULED}),
        created_before=datetime.now(UTC) - timedelta(hours=1),
    )

    dry = await cancel_matching(pool, selection, BY, dry_run=True)
    assert set(dry.selected) == set(old) and dry.cancelled == []
    assert {(await job_row(pool, j))["state"] for j in old} <= {"READY", "RETRY_SCHEDULED"}

    report = await cancel_matching(pool, selection, BY)
    assert {c.job_id for c in report.cancelled} == set(old)
    for j in old:
        assert (await job_row(pool, j))["state"] == "CANCELLED"
    assert (await job_row(pool, running))["state"] == "RUNNING"
    assert (await job_row(pool, fresh))["state"] == "READY"
    assert (await job_row(pool, elsewhere))["state"] == "READY"


def fenceline(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", "cancel", *args],
        env={**os.environ, "FENCELINE_DATABASE_URL": dsn},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_cli_cancels_one_job_and_a_dry_run_changes_nothing(
    pool: asyncpg.Pool, dsn: str
) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    one, two = [(await store.accept(request(tenant))).job_id for _ in range(2)]

    dry = fenceline(dsn, "--tenant", tenant.name, "--state", "READY", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert set(json.loads(dry.stdout)["selected"]) == {str(one), str(two)}
    assert (await job_row(pool, one))["state"] == "READY"

    done = fenceline(dsn, str(one), "--by", "ops@example", "--reason", "withdrawn")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["requested_by"] == "ops@example"
    assert (await job_row(pool, one))["state"] == "CANCELLED"
    assert (await job_row(pool, two))["state"] == "READY"

    lease = (await store.claim("w"))[0]
    await store.succeed(lease, result={"x": 1})
    refused = fenceline(dsn, str(two))
    assert refused.returncode == 3 and "SUCCEEDED" in refused.stderr
