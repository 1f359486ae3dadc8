"""Spend reconciliation (issue 20, item 5) on real PostgreSQL.

Acceptance: after a mix of succeeded, failed, re-driven and cheaper-than-reserved
jobs, a tenant's reserved and reconciled spend match the attempts' reported usage
to the cent (here: to the micro-unit), in the database and in
``fenceline tenants usage``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from decimal import Decimal

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from pipeline.api.app import create_app
from pipeline.errors import RetryableError
from pipeline.jobs import JobStore, RedriveRequest, redrive_job
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.spend import cost_of, spend_for_tenant
from pipeline.tenants import SpendMetrics, SpendReconciler, tenant_usage
from pipeline.usage import AttemptUsage
from tests.support.api import asgi_client, settings_for, submission, tenant_with_key

pytestmark = pytest.mark.integration

#: An awkward price, so every charge needs rounding (up, to 1e-6).
PRICE = Decimal("0.0033")


def usage(prompt: int, completion: int) -> AttemptUsage:
    return AttemptUsage(prompt_tokens=prompt, completion_tokens=completion, engine="fake")


async def reservations(pool: asyncpg.Pool, tenant_id: object) -> dict[object, list[Decimal]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT job_id, amount FROM spend_reservations WHERE tenant_id = $1 "
            "ORDER BY created_at",
            tenant_id,
        )
    out: dict[object, list[Decimal]] = {}
    for r in rows:
        out.setdefault(r["job_id"], []).append(Decimal(r["amount"]))
    return out


async def test_reserved_and_reconciled_match_reported_usage(pool: asyncpg.Pool, dsn: str) -> None:
    settings = settings_for(dsn, token_price_per_1k=PRICE)
    tk = await tenant_with_key(pool)
    auth = {"Authorization": f"Bearer {tk.key}"}
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        for i in range(4):
            text = f"INVOICE {i} " + "line item 12.50 EUR\n" * (40 * (i + 1))
            r = await client.post("/v1/extraction-jobs", json=submission(text), headers=auth)
            assert r.status_code == 202, r.text
    store = JobStore(pool, Settings(lease_seconds=30))
    leases = await store.claim("w1", limit=10)
    assert len(leases) == 4
    cheap, failed, silent, running = leases
    reserved = await reservations(pool, tk.tenant.id)
    assert set(reserved) == {lease.job_id for lease in leases}
    estimate = {job: amounts[0] for job, amounts in reserved.items()}

    # What the attempts report, and what they should cost: the oracle.
    reported: list[int] = []
    cheap_usage = usage(101, 37)  # far below its estimate
    await store.succeed(cheap, result={"ok": True}, usage=cheap_usage)
    reported.append(138)
    failed_usage = usage(2207, 0)  # the provider billed the prompt, then a 5xx storm
    await store.fail(
        failed, error_class="rate_limited", reason="attempts_exhausted", usage=failed_usage
    )
    reported.append(2207)
    await store.fail(silent, error_class="invalid_document", reason="unreadable")  # no usage
    reported.append(0)

    # Before reconciliation the whole estimate of every job is held.
    async with pool.acquire() as conn:
        before = await spend_for_tenant(conn, tk.tenant.id, settings.spend_period)
    assert before.reserved == sum(estimate.values()) and before.reconciled == 0

    # Two passes at once (two maintenance actors) count nothing twice.
    metrics = SpendMetrics(CollectorRegistry())
    reconciler = SpendReconciler(pool, settings, metrics=metrics)
    reports = await asyncio.gather(reconciler.run_once(), reconciler.run_once())
    assert sum(r.charged for r in reports) == 3  # running has no ended attempt
    assert sum(r.released for r in reports) == 3

    def gauge(kind: str) -> Decimal:
        got = metrics.registry.get_sample_value(
            "fenceline_tenant_spend", {"tenant": str(tk.tenant.id), "kind": kind}
        )
        assert got is not None, kind
        return Decimal(str(got)).quantize(Decimal("0.000001"))

    # The gauges after the pass: every estimate, what the running job still holds, and
    # what the three settled jobs reported (the estimate of the cheap one is gone).
    assert gauge("estimated") == sum(estimate.values())
    assert gauge("reserved") == estimate[running.job_id]
    assert gauge("reconciled") == sum((cost_of(t, PRICE) for t in reported), Decimal(0))

    # The failed job is re-driven (reserves again) and now succeeds, a bit cheaper.
    await redrive_job(
        pool,
        tk.tenant.id,
        failed.job_id,
        RedriveRequest(requested_by="ops@example", reason="provider back", attempts=1),
        settings=settings,
    )
    [again] = await store.claim("w2", limit=10)
    assert again.job_id == failed.job_id
    await store.succeed(again, result={"ok": True}, usage=usage(2207, 415))
    reported.append(2622)
    await store.succeed(running, result={"ok": True}, usage=usage(5000, 900))
    reported.append(5900)
    # The last job is still running while this pass happens; then it settles too.
    third = await reconciler.run_once()
    assert (third.charged, third.released) == (2, 2)
    assert (await reconciler.run_once()).charged == 0  # idempotent

    expected_reconciled = sum((cost_of(t, PRICE) for t in reported), Decimal(0))
    reserved_after = await reservations(pool, tk.tenant.id)
    expected_reserved_total = sum(
        (a for amounts in reserved_after.values() for a in amounts), Decimal(0)
    )
    assert len(reserved_after[failed.job_id]) == 2  # the re-drive reserved again
    async with pool.acquire() as conn:
        spend = await spend_for_tenant(conn, tk.tenant.id, settings.spend_period)
        u = await tenant_usage(conn, tk.tenant.id, settings)
    assert spend.reconciled == expected_reconciled
    assert spend.reserved == 0 and spend.open_reservations == 0  # everything settled
    assert (gauge("estimated"), gauge("reserved"), gauge("reconciled")) == (
        expected_reserved_total,
        0,
        expected_reconciled,
    )
    assert spend.reserved_total == expected_reserved_total == spend.released_total
    assert spend.charged_tokens == sum(reported) and spend.charges == len(reported) == 5
    # Admission now checks real spend, not the estimates: the cheap job's unused
    # reservation is free again, the failed attempt's billed prompt is kept.
    assert u.spent == u.spend.spent == expected_reconciled
    assert estimate[cheap.job_id] > cost_of(138, PRICE)

    cli = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "tenants", "usage", "--tenant", tk.tenant.name],
        env={
            **os.environ,
            "FENCELINE_DATABASE_URL": dsn,
            "FENCELINE_TOKEN_PRICE_PER_1K": str(PRICE),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    shown = json.loads(cli.stdout)["spend"]
    assert Decimal(shown["reconciled"]) == expected_reconciled
    assert Decimal(shown["reserved"]) == 0
    assert Decimal(shown["reserved_total"]) == expected_reserved_total
    assert Decimal(shown["used"]) == expected_reconciled
    assert shown["charged_tokens"] == sum(reported)


async def test_open_reservation_holds_until_the_job_settles(pool: asyncpg.Pool, dsn: str) -> None:
    settings = settings_for(dsn, token_price_per_1k=PRICE)
    tk = await tenant_with_key(pool)
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        r = await client.post(
            "/v1/extraction-jobs",
            json=submission(),
            headers={"Authorization": f"Bearer {tk.key}"},
        )
        assert r.status_code == 202
    store = JobStore(pool, Settings(lease_seconds=30), policy=RetryPolicy(max_attempts=3))
    [lease] = await store.claim("w1")
    # A retryable failure with usage: charged now, the reservation stays (not settled).
    await store.retry_or_fail(lease, RetryableError("429"), usage=usage(800, 0))
    report = await SpendReconciler(pool, settings).run_once()
    async with pool.acquire() as conn:
        spend = await spend_for_tenant(conn, tk.tenant.id, settings.spend_period)
    assert (report.charged, report.released) == (1, 0)
    assert spend.reconciled == cost_of(800, PRICE)
    assert spend.reserved == spend.reserved_total > 0 and spend.open_reservations == 1
