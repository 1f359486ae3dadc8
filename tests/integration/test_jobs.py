"""Job store acceptance tests against the real PostgreSQL (issue 2)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import timedelta
from typing import Literal

import asyncpg
import pytest

from pipeline.api.review import ReviewDecisionIn, ReviewService
from pipeline.clock import ManualClock
from pipeline.database import create_pool
from pipeline.errors import IdempotencyConflict, LeaseLost, ProviderRateLimited
from pipeline.identity import object_version
from pipeline.jobs import JobStore
from pipeline.queries import q
from pipeline.retry import MAX_RETRY_AFTER_SECONDS, RetryPolicy
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import Principal
from pipeline.usage import AttemptUsage
from tests.support.api import tenant_with_key
from tests.support.jobs import accept_many, new_tenant, request

pytestmark = pytest.mark.integration


async def count(pool: asyncpg.Pool, table: str) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval(f"SELECT count(*) FROM {table}"))


#: Accept transactions held open at once by the idempotency test. The 100 calls
#: would need 100 connections to overlap fully, but this PostgreSQL allows
#: max_connections = 100 in all, shared with every other test run on the machine:
#: half of it, on a pool of its own (the shared fixture pool has 20), is the most
#: that stays well under the limit.
OVERLAPPING_ACCEPTS = 50


async def _lock_waiters(conn: asyncpg.Connection) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
    )


async def test_same_key_concurrently_yields_one_job_and_one_event(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tenant = await new_tenant(pool)
    req = request(tenant, key="k-1", text="INVOICE 1 total 10.00 EUR")
    doc = req.document
    own = await create_pool(dsn, min_size=OVERLAPPING_ACCEPTS, max_size=OVERLAPPING_ACCEPTS)
    store = JobStore(own)
    try:
        async with pool.acquire() as gate, pool.acquire() as watcher:
            # The gate holds an uncommitted insert of the same document, so every
            # accept blocks inside its own open transaction until it is released:
            # then all of them are in flight at once, as the watcher confirms.
            held = gate.transaction()
            await held.start()
            await gate.execute(
                q("document_upsert"),
                uuid.uuid4(),
                tenant.id,
                doc.sha256,
                object_version(doc.sha256),
                doc.content,
                len(doc.raw),
                doc.content_type,
                doc.filename,
            )
            calls = [asyncio.create_task(store.accept(req)) for _ in range(100)]
            waiting = 0
            for _ in range(300):
                waiting = await _lock_waiters(watcher)
                if waiting >= OVERLAPPING_ACCEPTS:
                    break
                await asyncio.sleep(0.05)
            await held.rollback()  # the gate writes nothing
            results = await asyncio.gather(*calls)
        assert waiting == OVERLAPPING_ACCEPTS  # every pooled accept was open at once
    finally:
        await own.close()
    assert len(results) == 100
    assert len({r.job_id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert await count(pool, "extraction_jobs") == 1
    assert await count(pool, "outbox_events") == 1
    assert await count(pool, "documents") == 1


async def test_same_key_different_request_conflicts_and_writes_nothing(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    first = await store.accept(request(tenant, key="k", text="A"))
    with pytest.raises(IdempotencyConflict) as err:
        await store.accept(request(tenant, key="k", text="B"))
    assert err.value.existing_job_id == str(first.job_id)
    with pytest.raises(IdempotencyConflict):
        await store.accept(request(tenant, key="k", text="A", model_policy="other"))
    assert await count(pool, "extraction_jobs") == 1
    assert await count(pool, "outbox_events") == 1
    assert await count(pool, "documents") == 1  # the conflicting document rolled back


async def test_same_key_in_two_tenants_are_two_jobs(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    a, b = await new_tenant(pool), await new_tenant(pool)
    ja = await store.accept(request(a, key="same", text="x"))
    jb = await store.accept(request(b, key="same", text="x"))
    assert ja.job_id != jb.job_id


async def test_claim_race_every_job_completed_exactly_once(dsn: str) -> None:
    setup = await create_pool(dsn, min_size=1, max_size=4)
    store = JobStore(setup)
    tenants = [await new_tenant(setup) for _ in range(3)]
    for i in range(1000):
        await store.accept(request(tenants[i % 3]))
    holders: Counter[tuple[uuid.UUID, int]] = Counter()
    completed: list[uuid.UUID] = []

    async def claimer(n: int) -> None:
        # Each claimer has its own connection, as separate processes would.
        own = await create_pool(dsn, min_size=1, max_size=1)
        s = JobStore(own)
        try:
            while True:
                leases = await s.claim(f"w{n}", limit=1 + n % 4)
                if not leases:
                    return
                for lease in leases:
                    holders[(lease.job_id, lease.fence)] += 1
                    await s.succeed(lease, result={"n": n})
                    completed.append(lease.job_id)
        finally:
            await own.close()

    await asyncio.gather(*(claimer(n) for n in range(50)))
    assert len(completed) == 1000
    assert len(set(completed)) == 1000
    assert max(holders.values()) == 1
    async with setup.acquire() as conn:
        states = await conn.fetch("SELECT state, count(*) FROM extraction_jobs GROUP BY state")
        attempts = await conn.fetchval("SELECT count(*) FROM job_attempts")
        events = await conn.fetchval(
            "SELECT count(*) FROM outbox_events WHERE event_type = 'extraction.completed.v1'"
        )
    assert dict(states) == {"SUCCEEDED": 1000}
    assert attempts == 1000
    assert events == 1000
    await setup.close()


async def test_zombie_worker_cannot_heartbeat_complete_or_fail(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = JobStore(pool, Settings(lease_seconds=30), clock=clock)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    zombie = (await store.claim("zombie"))[0]
    clock.advance(31)
    report = await store.reap()
    assert report.rescheduled == [job.job_id]
    clock.advance(3600 - 200)  # past any jittered retry time, before the deadline margin
    clock_now = clock.now()
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE extraction_jobs SET available_at = $1 WHERE id = $2", clock_now, job.job_id
        )
    newer = (await store.claim("newer"))[0]
    assert newer.fence > zombie.fence
    with pytest.raises(LeaseLost):
        await store.heartbeat(zombie)
    with pytest.raises(LeaseLost):
        await store.succeed(zombie, result={"who": "zombie"})
    with pytest.raises(LeaseLost):
        await store.retry_or_fail(zombie, ProviderRateLimited("429"))
    with pytest.raises(LeaseLost):
        await store.fail(zombie, error_class="x", reason="zombie")
    assert await store.record_late_result(
        zombie, AttemptUsage(prompt_tokens=10, completion_tokens=5)
    )
    await store.heartbeat(newer)
    await store.succeed(newer, result={"who": "newer"})
    async with pool.acquire() as conn:
        result = await conn.fetchval(
            "SELECT result FROM extraction_results WHERE job_id=$1", job.job_id
        )
    assert result == {"who": "newer"}
    explained = await store.explain(job.job_id)
    outcomes = [(a["fence"], a["outcome"]) for a in explained["attempts"]]
    assert outcomes == [(zombie.fence, "lease_expired"), (newer.fence, "succeeded")]
    assert explained["attempts"][0]["late_result_at"] is not None
    assert explained["attempts"][0]["uncertain"] is True


async def test_reaper_reschedules_with_later_time_and_bumped_fence(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = JobStore(pool, Settings(lease_seconds=10), clock=clock)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    lease = (await store.claim("w"))[0]
    clock.advance(5)
    assert (await store.reap()).total == 0  # lease still valid
    clock.advance(6)
    reaped_at = clock.now()
    report = await store.reap()
    assert report.rescheduled == [job.job_id]
    row = await store.get(tenant.id, job.job_id)
    assert row["state"] == JobState.RETRY_SCHEDULED
    assert row["fence"] == lease.fence + 1
    assert row["attempt"] == lease.attempt == 1
    assert row["available_at"] >= reaped_at
    assert row["lease_until"] is None


async def test_reaper_fails_when_attempts_exhausted(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = JobStore(
        pool,
        Settings(lease_seconds=10),
        clock=clock,
        policy=RetryPolicy(max_attempts=2, cap_seconds=1, next_attempt_margin_seconds=0),
    )
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    for expected_attempt in (1, 2):
        lease = (await store.claim("w"))[0]
        assert lease.attempt == expected_attempt
        clock.advance(11)
        await store.reap()
        clock.advance(2)
    row = await store.get(tenant.id, job.job_id)
    assert row["state"] == JobState.FAILED_TERMINAL
    assert row["terminal_reason"] == "attempts_exhausted"
    assert row["attempt"] == 2
    assert row["finished_at"] is not None
    explained = await store.explain(job.job_id)
    types = [e["event_type"] for e in explained["outbox"]]
    assert "extraction.failed.v1" in types and "extraction.dead_lettered.v1" in types


async def test_reaper_fails_expired_lease_past_deadline(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = JobStore(pool, Settings(lease_seconds=10), clock=clock)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant, deadline_seconds=60))
    await store.claim("w")
    clock.advance(11)  # 49 s left < 50 s margin for a next attempt
    report = await store.reap()
    assert report.failed == [job.job_id]
    row = await store.get(tenant.id, job.job_id)
    assert row["terminal_reason"] == "deadline_exceeded"


async def test_reaper_fails_waiting_job_past_deadline(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = JobStore(pool, clock=clock)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant, deadline_seconds=30))
    clock.advance(31)
    assert await store.claim("w") == []  # never claims past the deadline
    report = await store.reap()
    assert report.deadline_failed == [job.job_id]
    row = await store.get(tenant.id, job.job_id)
    assert (row["state"], row["terminal_reason"]) == ("FAILED_TERMINAL", "deadline_exceeded")


async def test_retry_honours_retry_after_and_persists_attempt(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = JobStore(pool, clock=clock)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    lease = (await store.claim("w"))[0]
    settled = await store.retry_or_fail(lease, ProviderRateLimited("429", retry_after=120))
    assert settled.state is JobState.RETRY_SCHEDULED
    assert settled.retry_at is not None
    assert settled.retry_at >= clock.now() + timedelta(seconds=120)
    clock.advance(100)
    assert await store.claim("w") == []  # never sooner than the provider asked
    clock.advance(21)
    again = (await store.claim("w"))[0]
    assert (again.job_id, again.attempt) == (job.job_id, 2)


@pytest.mark.parametrize("hint", [600.0, MAX_RETRY_AFTER_SECONDS])
async def test_retry_after_beyond_deadline_deferred_by_setting(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch, hint: float
) -> None:
    monkeypatch.setenv("FENCELINE_RETRY_BEYOND_DEADLINE", "defer")
    clock = ManualClock()
    store = JobStore(pool, Settings(), clock=clock)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant, deadline_seconds=300))
    lease = (await store.claim("w"))[0]
    asked = clock.now() + timedelta(seconds=hint)
    settled = await store.retry_or_fail(lease, ProviderRateLimited("429", retry_after=hint))
    # Deferred, not failed: scheduled at the provider's time, which is past the deadline.
    assert settled.state is JobState.RETRY_SCHEDULED
    assert settled.retry_at is not None and settled.retry_at >= asked
    row = await store.get(tenant.id, job.job_id)
    assert (row["state"], row["available_at"]) == ("RETRY_SCHEDULED", settled.retry_at)
    clock.advance(299)  # before the deadline, before the provider's time
    assert await store.claim("w") == []
    assert (await store.reap()).total == 0
    clock.advance(2)  # past the deadline: the deadline decides
    assert await store.claim("w") == []
    report = await store.reap()
    assert report.deadline_failed == [job.job_id]
    row = await store.get(tenant.id, job.job_id)
    assert (row["state"], row["terminal_reason"]) == ("FAILED_TERMINAL", "deadline_exceeded")
    assert row["attempt"] == 1  # the provider was never called again


async def test_deferred_retry_after_inside_the_margin_runs_at_the_providers_time(
    pool: asyncpg.Pool,
) -> None:
    clock = ManualClock()
    store = JobStore(pool, Settings(retry_beyond_deadline="defer"), clock=clock)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant, deadline_seconds=300))
    lease = (await store.claim("w"))[0]
    # 280 s + the 50 s margin overshoots the 300 s deadline: terminal would fail now.
    settled = await store.retry_or_fail(lease, ProviderRateLimited("429", retry_after=280))
    assert settled.state is JobState.RETRY_SCHEDULED
    clock.advance(279)
    assert await store.claim("w") == []  # never sooner than the provider asked
    clock.advance(2)
    again = (await store.claim("w"))[0]
    assert (again.job_id, again.attempt) == (job.job_id, 2)


@pytest.mark.parametrize("retry_after", [600.0, 280.0, MAX_RETRY_AFTER_SECONDS])
async def test_retry_after_beyond_deadline_terminal_by_default(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch, retry_after: float
) -> None:
    monkeypatch.delenv("FENCELINE_RETRY_BEYOND_DEADLINE", raising=False)
    store = JobStore(pool, Settings())
    assert store.policy.beyond_deadline == "terminal"
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant, deadline_seconds=300))
    lease = (await store.claim("w"))[0]
    error = ProviderRateLimited("429", retry_after=retry_after)
    settled = await store.retry_or_fail(lease, error)
    assert settled.state is JobState.FAILED_TERMINAL
    row = await store.get(tenant.id, job.job_id)
    assert row["terminal_reason"] == "provider_delay_beyond_deadline"


async def test_review_required_is_withheld_and_explained(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    lease = (await store.claim("w"))[0]
    reasons = [{"code": "arithmetic.gross", "field": "gross"}]
    await store.succeed(
        lease,
        result={"x": 1},
        validation={"reasons": reasons},
        decision=JobState.REVIEW_REQUIRED,
        policy_version="v1",
    )
    row = await store.get(tenant.id, job.job_id)
    assert row["state"] == "REVIEW_REQUIRED"
    assert row["last_error"] == "arithmetic.gross"
    explained = await store.explain(job.job_id)
    assert [e["to_state"] for e in explained["events"]] == ["READY", "RUNNING", "REVIEW_REQUIRED"]
    types = [e["event_type"] for e in explained["outbox"]]
    assert types.count("extraction.completed.v1") == 0
    assert types.count("extraction.review_required.v1") == 1


@pytest.mark.parametrize(
    ("decision", "final"), [("approve", "SUCCEEDED"), ("reject", "FAILED_TERMINAL")]
)
async def test_finished_at_is_when_the_pipeline_settled_and_a_review_keeps_it(
    pool: asyncpg.Pool, decision: Literal["approve", "reject"], final: str
) -> None:
    store = JobStore(pool)
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    job = await store.accept(request(tk.tenant))
    lease = (await store.claim("w"))[0]
    settled = await store.succeed(
        lease,
        result={"x": 1},
        validation={"reasons": [{"code": "arithmetic.gross"}]},
        decision=JobState.REVIEW_REQUIRED,
    )
    awaiting = await store.get(tk.tenant.id, job.job_id)
    assert awaiting["finished_at"] is not None  # settled, though not final
    reviewer = Principal(tk.key_id, tk.tenant.id, tk.tenant.name, frozenset({"review"}))
    body = ReviewDecisionIn(decision=decision, note="checked", state_version=settled.state_version)
    out = await ReviewService(pool, store, Settings()).decide(reviewer, job.job_id, body)
    decided = await store.get(tk.tenant.id, job.job_id)
    assert decided["state"] == final
    # finished_at stays the pipeline's settle time; the decision has its own timestamp.
    assert decided["finished_at"] == awaiting["finished_at"]
    assert decided["updated_at"] == out.created_at > decided["finished_at"]


async def test_fair_claim_serves_small_tenant_before_big_backlog(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    big, small = await new_tenant(pool), await new_tenant(pool)
    await accept_many(store, big, 50)
    lone = await store.accept(request(small))
    leases = await store.claim("w", limit=3)
    assert lone.job_id in {lease.job_id for lease in leases}


async def test_tenant_in_flight_limit_holds(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool, max_in_flight=2)
    await accept_many(store, tenant, 5)
    assert len(await store.claim("w", limit=5)) == 2
    assert await store.claim("w", limit=5) == []


async def test_illegal_transition_rejected_by_database(pool: asyncpg.Pool) -> None:
    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    async with pool.acquire() as conn:
        with pytest.raises(asyncpg.CheckViolationError, match="illegal job transition"):
            await conn.execute(
                "UPDATE extraction_jobs SET state='SUCCEEDED', result_ref='x', finished_at=now()"
                " WHERE id=$1",
                job.job_id,
            )
    await store.claim("w")
    async with pool.acquire() as conn:
        with pytest.raises(asyncpg.CheckViolationError, match=r"attempt .* would decrease"):
            await conn.execute(
                "UPDATE extraction_jobs SET attempt = attempt - 1 WHERE id=$1", job.job_id
            )
        with pytest.raises(asyncpg.CheckViolationError, match=r"fence .* would decrease"):
            await conn.execute(
                "UPDATE extraction_jobs SET fence = fence - 1 WHERE id=$1", job.job_id
            )
