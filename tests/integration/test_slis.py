"""The job SLIs against the real database: values, not just presence."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from pipeline.clock import ManualClock
from pipeline.errors import ProviderRateLimited
from pipeline.jobs import JobMetrics, JobStore, Reaper
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import create_api_key
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration


def value(m: JobMetrics, name: str, **labels: str) -> float:
    got = m.registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


async def test_completion_outcomes_backlog_and_review_are_measured(pool: asyncpg.Pool) -> None:
    start = datetime.now(UTC).replace(microsecond=0)
    clock = ManualClock(start)
    metrics = JobMetrics(CollectorRegistry())
    policy = RetryPolicy(
        max_attempts=1, base_seconds=1, cap_seconds=1, next_attempt_margin_seconds=0
    )
    store = JobStore(pool, Settings(), clock=clock, metrics=metrics, policy=policy)
    tenant = await new_tenant(pool)
    t = str(tenant.id)
    jobs = [(await store.accept(request(tenant))).job_id for _ in range(4)]

    clock.advance(40)
    reaper = Reaper(store)
    await reaper.run_once()
    assert value(metrics, "fenceline_jobs_runnable", tenant=t) == 4
    assert value(metrics, "fenceline_oldest_eligible_job_seconds", tenant=t) == 40

    leases = await store.claim("w", limit=3)
    assert len(leases) == 3
    clock.advance(20)  # 60 s after acceptance
    await store.succeed(leases[0], result={"ok": 1})
    review = await store.succeed(
        leases[1],
        result={"ok": 2},
        validation={"reasons": [{"code": "arithmetic"}]},
        decision=JobState.REVIEW_REQUIRED,
    )
    await store.retry_or_fail(leases[2], ProviderRateLimited("429"))  # last attempt: terminal
    await reaper.run_once()

    assert (
        value(metrics, "fenceline_job_outcomes_total", tenant=t, state="SUCCEEDED", reason="ok")
        == 1
    )
    assert (
        value(
            metrics,
            "fenceline_job_outcomes_total",
            tenant=t,
            state="REVIEW_REQUIRED",
            reason="validation",
        )
        == 1
    )
    assert (
        value(
            metrics,
            "fenceline_job_outcomes_total",
            tenant=t,
            state="FAILED_TERMINAL",
            reason="attempts_exhausted",
        )
        == 1
    )
    # accept → settled is 60 s for each settled job: in the (30, 60] bucket, not below.
    for state in ("SUCCEEDED", "REVIEW_REQUIRED", "FAILED_TERMINAL"):
        assert value(metrics, "fenceline_job_completion_seconds_sum", tenant=t, state=state) == 60
        assert (
            value(
                metrics, "fenceline_job_completion_seconds_bucket", tenant=t, state=state, le="30.0"
            )
            == 0
        )
        assert (
            value(
                metrics, "fenceline_job_completion_seconds_bucket", tenant=t, state=state, le="60.0"
            )
            == 1
        )
    # One job still waits (60 s old), one awaits review (settled 0 s ago).
    assert value(metrics, "fenceline_jobs_runnable", tenant=t) == 1
    assert value(metrics, "fenceline_oldest_eligible_job_seconds", tenant=t) == 60
    assert value(metrics, "fenceline_review_queue_jobs", tenant=t) == 1
    clock.advance(300)
    await reaper.run_once()
    assert value(metrics, "fenceline_review_oldest_seconds", tenant=t) == 300
    assert value(metrics, "fenceline_dead_letters_waiting") == 0
    # A reviewer's decision is timed apart; it does not count as a second completion.
    async with pool.acquire() as conn, conn.transaction():
        key_id, _ = await create_api_key(conn, tenant.id, scopes=("review",))
        decided = await store.decide_review(
            conn,
            job_id=review.job_id,
            tenant_id=tenant.id,
            key_id=key_id,
            decision="approve",
            note="totals checked by hand",
            state_version=review.state_version,
        )
    assert decided is not None
    assert (
        value(metrics, "fenceline_review_decision_seconds_count", tenant=t, decision="approve") == 1
    )
    assert (
        value(metrics, "fenceline_job_outcomes_total", tenant=t, state="SUCCEEDED", reason="ok")
        == 1
    )
    assert (
        value(metrics, "fenceline_job_completion_seconds_count", tenant=t, state="SUCCEEDED") == 1
    )
    await reaper.run_once()
    assert value(metrics, "fenceline_review_queue_jobs", tenant=t) == 0
    assert value(metrics, "fenceline_review_oldest_seconds", tenant=t) == 0
    assert len(jobs) == 4


async def test_delivery_lag_and_outcomes_are_measured_per_endpoint_state(
    dsn: str, pool: asyncpg.Pool
) -> None:
    """A 429 with Retry-After opens the breaker: the lag gauges move from ``closed`` to
    ``open`` to ``half_open`` with the clock, and each attempt is counted under the
    endpoint state it was claimed in (the probe under ``half_open``)."""
    from pipeline.delivery.metrics import ENDPOINT_STATES
    from tests.support.delivery import (
        dispatcher_for,
        job_store,
        registry_for,
        reserve_receiver,
        succeed_jobs,
    )

    clock = ManualClock()
    store = job_store(pool, clock)
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool, clock), tenant, clock=clock)
    dispatcher = dispatcher_for(pool, clock=clock)
    m = dispatcher.metrics

    def lag() -> dict[str, tuple[float, float]]:
        return {
            s: (
                m.registry.get_sample_value("fenceline_deliveries_pending", {"endpoint_state": s})
                or 0.0,
                m.registry.get_sample_value(
                    "fenceline_delivery_oldest_pending_seconds", {"endpoint_state": s}
                )
                or 0.0,
            )
            for s in ENDPOINT_STATES
        }

    def attempts(outcome: str, state: str) -> float:
        got = m.registry.get_sample_value(
            "fenceline_delivery_attempts_total", {"outcome": outcome, "endpoint_state": state}
        )
        return got or 0.0

    with receiver as erp:
        erp.faults.set("status", status=429, retry_after="3600", remaining=1)
        await succeed_jobs(store, tenant, 1)
        clock.advance(30)
        assert await dispatcher.sample_metrics() == {
            "closed": 1, "half_open": 0, "open": 0, "disabled": 0
        }  # fmt: skip
        assert lag()["closed"] == (1, 30)
        assert (await dispatcher.run_once()).count("retry_scheduled") == 1
        assert attempts("retry_scheduled", "closed") == 1
        await succeed_jobs(store, tenant, 1)  # a second job waits behind the open breaker
        clock.advance(600)
        await dispatcher.sample_metrics()
        assert lag() == {**dict.fromkeys(ENDPOINT_STATES, (0, 0)), "open": (2, 630)}
        clock.advance(3001)  # the Retry-After is over: half-open
        await dispatcher.sample_metrics()
        assert lag()["half_open"] == (2, 3631) and lag()["open"] == (0, 0)
        probe = await dispatcher.run_once()
        assert probe.count("delivered") == 1
        assert attempts("delivered", "half_open") == 1
        rest = await dispatcher.run_once()  # the probe closed the breaker
        assert rest.count("delivered") == 1
        assert attempts("delivered", "closed") == 1
        await dispatcher.sample_metrics()
        assert lag() == dict.fromkeys(ENDPOINT_STATES, (0, 0))
    await dispatcher.close()
