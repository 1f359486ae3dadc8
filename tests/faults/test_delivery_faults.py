"""ERP delivery under faults: a two-hour outage, lost responses, a killed dispatcher.

Receivers are the reference ERP receiver on loopback; the database is real; time
is a ManualClock shared by the job store, the dispatcher and the receiver's
signature window, so hours pass without sleeping.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

from pipeline.clock import ManualClock
from pipeline.delivery import DeliveryStore
from tests.support.delivery import (
    dispatcher_for,
    fetch,
    fetchval,
    inbox,
    job_store,
    postings,
    registry_for,
    reserve_receiver,
    succeed_jobs,
)
from tests.support.jobs import new_tenant

pytestmark = [pytest.mark.faults, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
SCHEDULE = (5.0, 60.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 86400.0)


async def attempts_of(pool: asyncpg.Pool, tenant_id: object) -> list[dict[str, object]]:
    return await fetch(
        pool,
        "SELECT a.*, d.endpoint_id FROM delivery_attempts a JOIN deliveries d"
        " ON d.id = a.delivery_id WHERE d.tenant_id = $1 ORDER BY a.delivery_id, a.fence",
        tenant_id,
    )


async def inference_attempts(pool: asyncpg.Pool, tenant_id: object) -> int:
    """Model calls made for a tenant's jobs (one row per attempt)."""
    return int(
        await fetchval(
            pool,
            "SELECT count(*) FROM job_attempts a JOIN extraction_jobs j ON j.id = a.job_id"
            " WHERE j.tenant_id = $1",
            tenant_id,
        )
    )


async def test_erp_down_for_two_hours_backs_off_isolates_and_posts_once(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    registry = registry_for(pool, clock)
    down_tenant, healthy_tenant = await new_tenant(pool), await new_tenant(pool)
    recv_down, ep_down = await reserve_receiver(dsn, registry, down_tenant, clock=clock)
    recv_ok, _ = await reserve_receiver(dsn, registry, healthy_tenant, clock=clock)
    dispatcher = dispatcher_for(
        pool,
        clock=clock,
        schedule_seconds=SCHEDULE,
        breaker_threshold=3,
        breaker_cooldown_seconds=60,
        breaker_cooldown_cap_seconds=900,
        disable_after_seconds=86400,
    )
    with recv_down as erp_down, recv_ok as erp_ok:
        erp_down.faults.set("down")
        down_jobs = await succeed_jobs(store, down_tenant, 3)
        ok_jobs = await succeed_jobs(store, healthy_tenant, 2)
        start = clock.now()
        opened_at_round = None
        per_round_down_requests = []
        for minute in range(120):
            if minute == 30:  # the healthy tenant keeps completing work mid-outage
                ok_jobs += await succeed_jobs(store, healthy_tenant, 2)
            before = erp_down.stats.requests
            await dispatcher.run_once()
            per_round_down_requests.append(erp_down.stats.requests - before)
            kinds = [e["kind"] for e in await registry.events(down_tenant.id, ep_down.endpoint.id)]
            if opened_at_round is None and "breaker_opened" in kinds:
                opened_at_round = minute
            # Other tenants proceed: everything of the healthy tenant is delivered at once.
            assert await postings(pool, erp_ok.ledger) == dict.fromkeys(ok_jobs, 1)
            clock.advance(60)
        assert clock.now() - start == timedelta(hours=2)

        # The outage grew the delivery backlog, and cost no inference.
        assert await inference_attempts(pool, down_tenant.id) == len(down_jobs)
        assert await inference_attempts(pool, healthy_tenant.id) == len(ok_jobs)
        backlog = await DeliveryStore(pool, clock=clock).backlog()
        assert (backlog["retry_scheduled"], backlog["delivered"]) == (3, len(ok_jobs))
        assert await postings(pool, erp_down.ledger) == {}
        endpoint = await registry.get(down_tenant.id, ep_down.endpoint.id)
        assert endpoint.state == "active" and endpoint.failing_since is not None

        # The breaker opened after the third failure and then let one probe through at a time.
        assert opened_at_round is not None
        assert max(per_round_down_requests[opened_at_round + 1 :]) <= 1
        assert sum(per_round_down_requests) == erp_down.stats.requests

        # Retries follow the schedule: never early, never later than the jitter cap
        # (a breaker can only hold an attempt back, never bring it forward).
        down_attempts = await attempts_of(pool, down_tenant.id)
        by_delivery: dict[object, list[dict[str, object]]] = {}
        for a in down_attempts:
            by_delivery.setdefault(a["delivery_id"], []).append(a)
        for history in by_delivery.values():
            assert len(history) >= 3
            for prev, nxt in itertools.pairwise(history):
                gap = (prev["next_attempt_at"] - prev["ended_at"]).total_seconds()  # type: ignore[operator]
                assert 0 <= gap <= SCHEDULE[min(prev["attempt"], len(SCHEDULE)) - 1]  # type: ignore[call-overload]
                assert nxt["started_at"] >= prev["next_attempt_at"]  # type: ignore[operator]
            assert {a["http_status"] for a in history} == {503}

        # Recovery: every waiting delivery lands, each job posted exactly once.
        erp_down.faults.set("none")
        for _ in range(24 * 12):
            await dispatcher.run_once()
            if len(await postings(pool, erp_down.ledger)) == len(down_jobs):
                break
            clock.advance(300)
        await dispatcher.close()
        assert await postings(pool, erp_down.ledger) == dict.fromkeys(down_jobs, 1)
        assert erp_down.stats.results.get("accepted") == len(down_jobs)
    kinds = [e["kind"] for e in await registry.events(down_tenant.id, ep_down.endpoint.id)]
    assert kinds[-1] == "breaker_closed" and "breaker_opened" in kinds
    assert await postings(pool, erp_ok.ledger) == dict.fromkeys(ok_jobs, 1)


@pytest.mark.parametrize("fault", ["drop_after_commit", "hang_after_commit"])
async def test_a_retry_after_a_lost_response_is_one_effect(
    dsn: str, pool: asyncpg.Pool, fault: str
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool, clock), tenant, clock=clock)
    with receiver as erp:
        erp.faults.set(fault, remaining=1, hang_seconds=1.5)
        [job] = await succeed_jobs(store, tenant, 1)
        dispatcher = dispatcher_for(pool, clock=clock, timeout_seconds=0.5, lease_seconds=10)
        first = await dispatcher.run_once()
        clock.advance(10)  # past the first retry (at most 5 s)
        second = await dispatcher.run_once()
        await dispatcher.close()
        assert (first.count("retry_scheduled"), second.count("delivered")) == (1, 1)
        assert erp.stats.results.get("duplicate") == 1
        assert len(set(erp.stats.delivery_ids)) == 1 and len(erp.stats.delivery_ids) == 2
    [delivery] = await DeliveryStore(pool).list_for_job(tenant.id, job)
    history = await DeliveryStore(pool).attempts(tenant.id, delivery["id"])
    assert [a["outcome"] for a in history] == ["retry_scheduled", "delivered"]
    assert history[0]["error_class"] == ("transport" if fault == "drop_after_commit" else "timeout")
    assert history[0]["signed_timestamp"] < history[1]["signed_timestamp"]  # fresh per attempt
    [inbox] = await fetch(pool, "SELECT * FROM erp_inbox WHERE ledger = $1", erp.ledger)
    assert (inbox["delivery_id"], inbox["duplicates"]) == (str(delivery["id"]), 1)
    assert await postings(pool, erp.ledger) == {job: 1}


async def test_dispatcher_killed_between_the_2xx_and_its_commit(
    dsn: str, pool: asyncpg.Pool
) -> None:
    store = job_store(pool)
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tenant)
    lease = 20.0
    with receiver as erp:
        [job] = await succeed_jobs(store, tenant, 1)
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.delivery_child", dsn, str(lease)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert child.stdout is not None
            lines = []
            while not lines or not lines[-1].startswith("RESPONSE"):
                line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 60)
                assert line, f"child exited early: {lines}"
                lines.append(line)
            _, status, delivery_id, fence = lines[-1].split()
            assert status == "200"
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(15)
        assert child.returncode == -signal.SIGKILL
        # The ERP committed and posted; the dispatcher never recorded it.
        assert erp.stats.results == {"accepted": 1}
        [row] = await DeliveryStore(pool).list_for_job(tenant.id, job)
        assert (str(row["id"]), row["state"], row["fence"]) == (
            delivery_id,
            "in_flight",
            int(fence),
        )

        # Another dispatcher, once the lease has expired, retries; the ERP deduplicates.
        lease_until = await fetchval(
            pool, "SELECT lease_until FROM deliveries WHERE id = $1", row["id"]
        )
        later = ManualClock(lease_until + timedelta(seconds=1))
        survivor = dispatcher_for(pool, clock=later)
        report = await survivor.run_once()
        await survivor.close()
        assert (report.reaped, report.count("delivered")) == (1, 1)
        assert erp.stats.results == {"accepted": 1, "duplicate": 1}
    [row] = await DeliveryStore(pool).list_for_job(tenant.id, job)
    assert row["state"] == "delivered"
    history = await DeliveryStore(pool).attempts(tenant.id, row["id"])
    assert [a["outcome"] for a in history] == ["lease_expired", "delivered"]
    assert await postings(pool, erp.ledger) == {job: 1}


async def test_an_endpoint_failing_too_long_is_disabled_then_redriven_once(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    registry = registry_for(pool, clock)
    tenant = await new_tenant(pool)
    receiver, issued = await reserve_receiver(dsn, registry, tenant, clock=clock)
    dispatcher = dispatcher_for(
        pool,
        clock=clock,
        breaker_threshold=2,
        breaker_cooldown_seconds=60,
        breaker_cooldown_cap_seconds=1800,
        disable_after_seconds=6 * 3600,
    )
    with receiver as erp:
        erp.faults.set("status", status=500)
        jobs = await succeed_jobs(store, tenant, 2)
        for _ in range(8 * 4):
            await dispatcher.run_once()
            clock.advance(900)
        endpoint = await registry.get(tenant.id, issued.endpoint.id)
        assert endpoint.state == "disabled"
        assert endpoint.disabled_reason is not None
        assert endpoint.disabled_reason.startswith("failing since")
        rows = await DeliveryStore(pool).list_for_job(tenant.id, jobs[0])
        rows += await DeliveryStore(pool).list_for_job(tenant.id, jobs[1])
        assert {(r["state"], r["final_reason"]) for r in rows} == {
            ("abandoned", "endpoint_disabled")
        }
        disabled = dispatcher.metrics.registry.get_sample_value(
            "fenceline_delivery_alerts_total", {"kind": "endpoint_disabled"}
        )
        assert disabled == 1.0
        events = await registry.events(tenant.id, issued.endpoint.id)
        assert [e["kind"] for e in events].count("disabled") == 1

        erp.faults.set("none")
        await registry.enable(tenant.id, issued.endpoint.id)
        for r in rows:
            await DeliveryStore(pool, clock=clock).redrive(tenant.id, r["id"])
        report = await dispatcher.run_once()
        await dispatcher.close()
        assert report.count("delivered") == 2
    assert await postings(pool, erp.ledger) == dict.fromkeys(jobs, 1)
    # The 500s were answered before the inbox: one accepted delivery per job, no duplicate.
    assert await inbox(pool, erp.ledger) == dict.fromkeys(jobs, (1, 0))
