"""Re-drive of FAILED_TERMINAL jobs (issue 20, item 3) and DLQ retention.

Real PostgreSQL, the fake provider and the reference ERP receiver as loopback
HTTP servers. The acceptance: a job failed by an exhausted 429 storm is
re-driven and succeeds under the same id with one ERP posting; a re-drive of a
delivered job is refused.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices.generator import Variant, generate_corpus
from pipeline.api.app import create_app
from pipeline.clock import ManualClock
from pipeline.delivery import delivery_settle_hook
from pipeline.errors import NotFound, RedriveRefused
from pipeline.extraction import OpenAICompatibleEngine
from pipeline.jobs import (
    JobStore,
    RedriveFilter,
    RedriveRequest,
    redrive_job,
    redrive_matching,
    render_explain,
)
from pipeline.messaging import DeadLetterRetention, RetentionConfig
from pipeline.messaging.dlq import archive_outbox_event, dlq_list, dlq_replay
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.tenants import Tenant
from pipeline.worker import AttemptRunner, DriverLoop, WorkerConfig
from tests.support.api import asgi_client, settings_for, tenant_with_key
from tests.support.delivery import (
    dispatcher_for,
    postings,
    registry_for,
    reserve_receiver,
    succeed_jobs,
)
from tests.support.drivers import answer_from_corpus, submit_corpus
from tests.support.jobs import accept_many, new_tenant

pytestmark = pytest.mark.integration

TODAY = datetime.now(UTC).date()
REQUEST = RedriveRequest(requested_by="ops@example", reason="provider outage is over", attempts=2)


def storm_store(pool: asyncpg.Pool) -> JobStore:
    """The system's store (deliveries created on success) with two quick attempts."""
    policy = RetryPolicy(
        max_attempts=2, base_seconds=0.05, cap_seconds=0.1, next_attempt_margin_seconds=1
    )
    store = JobStore(pool, Settings(lease_seconds=30), policy=policy)
    store.settle_hooks.add(delivery_settle_hook)
    return store


async def wait_state(
    pool: asyncpg.Pool, job_id: uuid.UUID, state: str, timeout: float = 60
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        async with pool.acquire() as conn:
            now = await conn.fetchval("SELECT state FROM extraction_jobs WHERE id = $1", job_id)
        if now == state:
            return
        assert asyncio.get_running_loop().time() < deadline, f"job is {now}, not {state}"
        await asyncio.sleep(0.1)


async def run_until(
    store: JobStore, engine: OpenAICompatibleEngine, job_id: uuid.UUID, state: str
) -> None:
    cfg = WorkerConfig(
        worker_id=f"d-{uuid.uuid4().hex[:4]}",
        concurrency=2,
        idle_poll_seconds=0.05,
        max_output_tokens=2048,
        heartbeat_seconds=5,
    )
    loop = DriverLoop(AttemptRunner(store, engine, cfg))
    await loop.start()
    try:
        await wait_state(store.pool, job_id, state)
    finally:
        await loop.stop(grace_seconds=5)


async def fail_one(pool: asyncpg.Pool, tenant: Tenant) -> uuid.UUID:
    """A job of ``tenant`` failed terminally through the job protocol."""
    store = JobStore(pool, Settings())
    [job] = await accept_many(store, tenant, 1)
    [lease] = await store.claim("w", limit=1)
    assert lease.job_id == job
    await store.fail(lease, error_class="rate_limited", reason="attempts_exhausted")
    return job


async def test_a_job_failed_by_a_429_storm_is_redriven_and_posted_once(
    dsn: str, pool: asyncpg.Pool
) -> None:
    corpus = generate_corpus(1, seed=41, variants=(Variant.CLEAN,), max_line_items=3, anchor=TODAY)
    store = storm_store(pool)
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tenant)
    [job] = list(await submit_corpus(store, tenant, corpus))
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake, receiver as erp:
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            fake.set_faults({"rates": {"429": 1.0}})
            await run_until(store, engine, job, "FAILED_TERMINAL")
            failed = await store.explain(job)
            assert failed["job"]["terminal_reason"] == "attempts_exhausted"
            assert failed["job"]["last_error_class"] == "rate_limited"
            assert [a["error_class"] for a in failed["attempts"]] == ["rate_limited"] * 2

            storm_calls = fake.calls()
            fake.reset()  # the storm is over (and the call log starts again)
            done = await redrive_job(pool, tenant.id, job, REQUEST)
            assert done.job_id == job
            assert (done.attempts_before, done.max_attempts) == (2, 4)
            await run_until(store, engine, job, "SUCCEEDED")
        calls = fake.calls()
        dispatcher = dispatcher_for(pool)
        report = await dispatcher.run_once()
        await dispatcher.close()
        assert report.count("delivered") == 1
        assert await postings(pool, erp.ledger) == {job: 1}
    assert [c.status for c in storm_calls] == [429, 429]
    assert [c.status for c in calls] == [200]
    explained = await store.explain(job)
    assert explained["job"]["id"] == job and explained["job"]["attempt"] == 3
    assert [a["outcome"] for a in explained["attempts"]] == [
        "retry_scheduled",
        "failed_terminal",
        "succeeded",
    ]
    [audit] = explained["redrives"]
    assert audit["requested_by"] == "ops@example"
    assert audit["reason"] == "provider outage is over"
    assert (audit["attempts_before"], audit["max_attempts_before"]) == (2, 2)
    assert (audit["terminal_reason"], audit["error_class"]) == (
        "attempts_exhausted",
        "rate_limited",
    )
    transitions = [(e["from_state"], e["to_state"]) for e in explained["events"]]
    assert ("FAILED_TERMINAL", "READY") in transitions
    # The re-drive wrote a fresh execution signal for the broker path.
    requested = [o for o in explained["outbox"] if o["event_type"] == "extraction.requested.v1"]
    assert len(requested) == 2
    assert requested[1]["payload"]["redrive_of"] == str(audit["id"])
    text = render_explain(explained)
    assert "\nredrives:\n" in text and "by ops@example: provider outage is over" in text

    # Delivered now: a second re-drive is refused, and nothing changes.
    with pytest.raises(RedriveRefused) as refused:
        await redrive_job(pool, tenant.id, job, REQUEST)
    assert refused.value.reason == "delivered"
    assert (await store.explain(job))["job"]["state"] == "SUCCEEDED"


async def test_a_failed_job_with_a_delivery_is_refused_by_the_sql_guard_too(
    pool: asyncpg.Pool,
) -> None:
    """Whatever state the job is in, a delivery means its result may be in the ERP."""
    store = JobStore(pool, Settings())
    store.settle_hooks.add(delivery_settle_hook)
    tenant = await new_tenant(pool)
    await registry_for(pool).register(tenant.id, "http://127.0.0.1:9/hook")
    [delivered] = await succeed_jobs(store, tenant, 1)
    with pytest.raises(RedriveRefused) as refused:
        await redrive_job(pool, tenant.id, delivered, REQUEST)
    assert refused.value.reason == "delivered"
    async with pool.acquire() as conn:
        [rows] = [
            await conn.fetch("SELECT count(*) FROM job_redrives WHERE job_id = $1", delivered)
        ]
    assert rows[0]["count"] == 0


async def test_redrive_is_tenant_scoped_and_refuses_what_did_not_fail(pool: asyncpg.Pool) -> None:
    owner = await new_tenant(pool)
    stranger = await new_tenant(pool)
    job = await fail_one(pool, owner)
    with pytest.raises(NotFound):
        await redrive_job(pool, stranger.id, job, REQUEST)
    [waiting] = await accept_many(JobStore(pool, Settings()), owner, 1)
    with pytest.raises(RedriveRefused) as refused:
        await redrive_job(pool, owner.id, waiting, REQUEST)
    assert refused.value.reason == "state"
    with pytest.raises(ValueError):
        RedriveRequest(requested_by=" ", reason="x")
    with pytest.raises(ValueError):
        RedriveRequest(requested_by="ops", reason="")
    # Re-driven once, the job is READY: a second re-drive is refused by state.
    await redrive_job(pool, owner.id, job, REQUEST)
    with pytest.raises(RedriveRefused):
        await redrive_job(pool, owner.id, job, REQUEST)


async def test_a_filter_selects_by_tenant_error_class_and_failure_time(
    pool: asyncpg.Pool,
) -> None:
    tenant = await new_tenant(pool)
    other = await new_tenant(pool)
    store = JobStore(pool, Settings())
    storm = [await fail_one(pool, tenant) for _ in range(3)]
    foreign = await fail_one(pool, other)
    [lease] = [
        lease for _ in await accept_many(store, tenant, 1) for lease in await store.claim("w")
    ]
    await store.fail(lease, error_class="context_too_long", reason="context_too_long")
    async with pool.acquire() as conn:
        # The first storm job failed a day ago: outside the time range below.
        await conn.execute(
            "UPDATE extraction_jobs SET finished_at = now() - interval '1 day' WHERE id = $1",
            storm[0],
        )
    since = datetime.now(UTC) - timedelta(hours=1)
    report = await redrive_matching(
        pool,
        RedriveFilter(tenant_id=tenant.id, error_class="rate_limited", failed_from=since),
        REQUEST,
    )
    assert sorted(r.job_id for r in report.redriven) == sorted(storm[1:])
    assert report.refused == {}
    async with pool.acquire() as conn:
        states = dict(
            await conn.fetch(
                "SELECT id, state FROM extraction_jobs WHERE id = ANY($1::uuid[])",
                [*storm, foreign, lease.job_id],
            )
        )
    assert states[storm[0]] == "FAILED_TERMINAL"  # failed before the range
    assert states[foreign] == "FAILED_TERMINAL"  # another tenant's
    assert states[lease.job_id] == "FAILED_TERMINAL"  # another error class
    assert {states[j] for j in storm[1:]} == {"READY"}


async def test_the_api_route_needs_operator_scope_and_answers_409_for_a_delivered_job(
    pool: asyncpg.Pool, dsn: str
) -> None:
    app = create_app(settings_for(dsn), pool=pool)
    operator = await tenant_with_key(pool, scopes=("jobs", "operator"))
    plain = await tenant_with_key(pool, scopes=("jobs",))
    failed = await fail_one(pool, operator.tenant)
    again = await fail_one(pool, operator.tenant)
    store = JobStore(pool, Settings())
    store.settle_hooks.add(delivery_settle_hook)
    await registry_for(pool).register(operator.tenant.id, "http://127.0.0.1:9/hook")
    [delivered] = await succeed_jobs(store, operator.tenant, 1)
    async with asgi_client(app) as c:
        body = {"reason": "outage over"}
        r = await c.post(f"/v1/extraction-jobs/{failed}/redrive", json=body, headers=plain.headers)
        assert r.status_code == 403
        r = await c.post(
            f"/v1/extraction-jobs/{delivered}/redrive", json=body, headers=operator.headers
        )
        assert r.status_code == 409 and r.json()["reason"] == "delivered"
        r = await c.post(
            f"/v1/extraction-jobs/{failed}/redrive", json=body, headers=operator.headers
        )
        assert r.status_code == 200, r.text
        assert r.json()["job_id"] == str(failed) and r.json()["max_attempts"] == 1 + 3
        r = await c.post(
            "/v1/redrives",
            json={"reason": "bulk", "error_class": "rate_limited", "attempts": 1},
            headers=operator.headers,
        )
        assert r.status_code == 200, r.text
        assert [x["job_id"] for x in r.json()["redriven"]] == [str(again)]
    async with pool.acquire() as conn:
        who = await conn.fetchval("SELECT requested_by FROM job_redrives WHERE job_id = $1", failed)
    assert who == f"key:{operator.key_id}"


async def test_dlq_retention_purges_letters_past_their_age_with_their_replays(
    pool: asyncpg.Pool,
) -> None:
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    tenant = await new_tenant(pool)
    jobs = await accept_many(JobStore(pool, Settings()), tenant, 2)
    async with pool.acquire() as conn:
        for i, job in enumerate(jobs):
            await archive_outbox_event(
                conn,
                event_id=uuid.uuid4(),
                job_id=job,
                event_type="extraction.dead_lettered.v1",
                payload={"reason": "attempts_exhausted"},
                body=b"{}",
                now=clock.now() - timedelta(days=40 - 30 * i),  # 40 and 10 days old
            )
    old = next(letter for letter in await dlq_list(pool) if letter["job_id"] == jobs[0])
    await dlq_replay(pool, old["id"], requested_by="ops", clock=clock)  # it has a replay row
    retention = DeadLetterRetention(
        pool, RetentionConfig(retention_seconds=30 * 86400, batch=1), clock=clock
    )
    assert await retention.run_once() == 1
    assert [letter["job_id"] for letter in await dlq_list(pool)] == [jobs[1]]
    assert await retention.run_once() == 0
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM dead_letter_replays") == 0
    assert (
        RetentionConfig.from_settings(Settings(dlq_retention_days=7)).retention_seconds == 7 * 86400
    )
