"""Spend of uncertain attempts and per-model prompt/completion prices (issue 46, item 6).

An attempt whose usage is unknown while the provider may have billed it is charged at
its reservation (marked estimated) until its usage arrives; then the reconciler
replaces the charge. Each model's prompt and completion tokens are priced apart.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from decimal import Decimal

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from pipeline.admission import AdmissionLedger, Grant, PriorityClass
from pipeline.api.app import create_app
from pipeline.errors import ProviderTimeout
from pipeline.jobs import JobStore, Lease, render_explain
from pipeline.pricing import ModelPrice
from pipeline.settings import Settings
from pipeline.spend import spend_by_model, spend_for_tenant
from pipeline.tenants import SpendMetrics, SpendReconciler
from pipeline.usage import AttemptUsage
from tests.support.api import asgi_client, settings_for, submission, tenant_with_key

pytestmark = pytest.mark.integration

PROMPT_PRICE = Decimal("0.0011")
COMPLETION_PRICE = Decimal("0.0047")


async def accepted_leases(
    pool: asyncpg.Pool, settings: Settings, n: int
) -> tuple[uuid.UUID, list[Lease]]:
    tk = await tenant_with_key(pool)
    app = create_app(settings, pool=pool)
    async with asgi_client(app) as client:
        for i in range(n):
            text = f"INVOICE {i} " + "line item 12.50 EUR\n" * (20 * (i + 1))
            r = await client.post(
                "/v1/extraction-jobs",
                json=submission(text),
                headers={"Authorization": f"Bearer {tk.key}"},
            )
            assert r.status_code == 202, r.text
    leases = await JobStore(pool, Settings(lease_seconds=30)).claim("w1", limit=n)
    assert len(leases) == n
    return tk.tenant.id, leases


async def grant_for(pool: asyncpg.Pool, lease: Lease, prompt: int, output: int) -> None:
    """The admission grant the attempt held before its call (as the actor writes it)."""
    await AdmissionLedger(pool).record_grant(
        Grant(
            grant_id=str(uuid.uuid4()),
            scope="provider",
            tenant=str(lease.tenant_id),
            priority=PriorityClass.STANDARD,
            prompt_tokens=prompt,
            max_output_tokens=output,
            reserved_tokens=prompt + output,
            granted_at=0.0,
            job_id=str(lease.job_id),
            fence=lease.fence,
        )
    )


async def charge_row(pool: asyncpg.Pool, lease: Lease) -> asyncpg.Record:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT * FROM spend_charges WHERE job_id = $1 AND fence = $2",
            lease.job_id,
            lease.fence,
        )
    assert row is not None
    return row


def at_prices(prompt: int, completion: int) -> Decimal:
    return ModelPrice(prompt_per_1k=PROMPT_PRICE, completion_per_1k=COMPLETION_PRICE).cost(
        prompt, completion
    )


async def test_uncertain_attempt_is_charged_its_reservation_until_reconciled(
    pool: asyncpg.Pool, dsn: str
) -> None:
    settings = settings_for(
        dsn, prompt_price_per_1k=PROMPT_PRICE, completion_price_per_1k=COMPLETION_PRICE
    )
    tenant, (timed_out, expired) = await accepted_leases(pool, settings, 2)
    store = JobStore(pool, Settings(lease_seconds=30))

    # The first attempt's call timed out: the provider may have billed it, nothing reported.
    await grant_for(pool, timed_out, prompt=1500, output=700)
    await store.retry_or_fail(timed_out, ProviderTimeout("attempt deadline"))
    # The second driver died: its lease expires and the reaper closes the attempt. It
    # held no admission grant, so its reservation is the job's estimate.
    async with pool.acquire() as conn:
        moved = await conn.execute(
            "UPDATE extraction_jobs SET lease_until = now() - interval '1 second' "
            "WHERE id = $1 AND fence = $2",
            expired.job_id,
            expired.fence,
        )
        assert moved == "UPDATE 1"
        estimated_tokens = await conn.fetchval(
            "SELECT estimated_tokens FROM extraction_jobs WHERE id = $1", expired.job_id
        )
    assert (await store.reap()).rescheduled == [expired.job_id]

    metrics = SpendMetrics(CollectorRegistry())
    reconciler = SpendReconciler(pool, settings, metrics=metrics)
    first = await reconciler.run_once()
    assert (first.charged, first.estimated, first.replaced) == (2, 2, 0)

    timed_out_estimate = at_prices(1500, 700)
    output = settings.output_reserve_tokens
    expired_estimate = at_prices(estimated_tokens - output, output)
    row = await charge_row(pool, timed_out)
    assert row["estimated"] and row["amount"] == timed_out_estimate
    assert (row["prompt_tokens"], row["completion_tokens"]) == (1500, 700)
    assert (row["prompt_price_per_1k"], row["completion_price_per_1k"]) == (
        PROMPT_PRICE,
        COMPLETION_PRICE,
    )
    assert (await charge_row(pool, expired))["amount"] == expired_estimate
    async with pool.acquire() as conn:
        spend = await spend_for_tenant(conn, tenant, settings.spend_period)
    assert spend.reconciled == timed_out_estimate + expired_estimate
    assert (spend.estimated_charges, spend.estimated_amount) == (2, spend.reconciled)
    # explain shows the charge and that it is an estimate.
    [shown] = (await store.explain(timed_out.job_id))["spend"]
    assert (shown["fence"], shown["amount"], shown["estimated"]) == (
        timed_out.fence,
        timed_out_estimate,
        True,
    )
    assert f"= {timed_out_estimate} (estimated" in render_explain(
        await store.explain(timed_out.job_id)
    )

    # The timed-out call's answer arrives late with the provider's usage: two passes at
    # once replace the estimate once, and reconciled moves by the difference.
    assert await store.record_late_result(
        timed_out, AttemptUsage(prompt_tokens=1320, completion_tokens=85, engine="fake")
    )
    passes = await asyncio.gather(reconciler.run_once(), reconciler.run_once())
    assert sum(p.replaced for p in passes) == 1
    assert sum(p.charged for p in passes) == 0

    row = await charge_row(pool, timed_out)
    assert not row["estimated"] and row["reconciled_at"] is not None
    assert row["amount"] == at_prices(1320, 85) and row["estimated_amount"] == timed_out_estimate
    assert (row["tokens"], row["prompt_tokens"], row["completion_tokens"]) == (1405, 1320, 85)
    text = render_explain(await store.explain(timed_out.job_id))
    assert f"= {at_prices(1320, 85)} (reported; replaced the estimate {timed_out_estimate}" in text
    # The expired attempt never reports: it stays at its reservation, estimated.
    assert (await charge_row(pool, expired))["estimated"]
    assert (await reconciler.run_once()).replaced == 0
    async with pool.acquire() as conn:
        spend = await spend_for_tenant(conn, tenant, settings.spend_period)
    assert spend.reconciled == at_prices(1320, 85) + expired_estimate
    assert (spend.estimated_charges, spend.estimated_amount) == (1, expired_estimate)
    assert spend.replaced_estimates == 1
    reconciled = metrics.registry.get_sample_value(
        "fenceline_tenant_spend", {"tenant": str(tenant), "kind": "reconciled"}
    )
    assert reconciled is not None
    assert Decimal(str(reconciled)).quantize(Decimal("0.000001")) == spend.reconciled


async def test_a_failure_before_any_call_charges_nothing(pool: asyncpg.Pool, dsn: str) -> None:
    """Unknown usage of a certain outcome (no call was made) is no estimate."""
    settings = settings_for(dsn)
    _, [lease] = await accepted_leases(pool, settings, 1)
    await JobStore(pool, Settings(lease_seconds=30)).fail(
        lease, error_class="invalid_document", reason="unreadable"
    )
    report = await SpendReconciler(
        pool, settings, metrics=SpendMetrics(CollectorRegistry())
    ).run_once()
    assert (report.charged, report.estimated) == (1, 0)
    row = await charge_row(pool, lease)
    assert not row["estimated"] and row["amount"] == 0


async def test_two_models_are_charged_at_their_own_prompt_and_completion_prices(
    pool: asyncpg.Pool, dsn: str
) -> None:
    prices = {
        "model-a": {"prompt_per_1k": "0.001", "completion_per_1k": "0.004"},
        "model-b": {"prompt_per_1k": "0.01", "completion_per_1k": "0.03"},
    }
    settings = settings_for(
        dsn,
        prompt_price_per_1k=Decimal("0.002"),
        completion_price_per_1k=Decimal("0.006"),
        model_prices=prices,
    )
    tenant, (a, b, other) = await accepted_leases(pool, settings, 3)
    store = JobStore(pool, Settings(lease_seconds=30))
    # A hosted provider records its model as openai-compatible:MODEL; a pool by name.
    await store.succeed(
        a, result={"ok": True}, usage=AttemptUsage(1000, 200, 0, "openai-compatible:model-a")
    )
    await store.succeed(b, result={"ok": True}, usage=AttemptUsage(400, 100, 0, "model-b"))
    await store.succeed(other, result={"ok": True}, usage=AttemptUsage(10, 5, 0, "unpriced"))
    await SpendReconciler(pool, settings, metrics=SpendMetrics(CollectorRegistry())).run_once()

    # By hand: (1000 x 0.001 + 200 x 0.004) / 1000 = 0.0018; (400 x 0.01 + 100 x 0.03)
    # / 1000 = 0.007; the unpriced model at the defaults: (10 x 0.002 + 5 x 0.006) / 1000
    # = 0.00005.
    assert (await charge_row(pool, a))["amount"] == Decimal("0.001800")
    assert (await charge_row(pool, b))["amount"] == Decimal("0.007000")
    assert (await charge_row(pool, other))["amount"] == Decimal("0.000050")
    async with pool.acquire() as conn:
        spend = await spend_for_tenant(conn, tenant, settings.spend_period)
        by_model = await spend_by_model(conn, tenant, settings.spend_period)
    assert spend.reconciled == Decimal("0.008850")
    shown = {m.model: (m.prices, m.prompt_tokens, m.completion_tokens, m.amount) for m in by_model}
    assert shown == {
        "openai-compatible:model-a": (
            ModelPrice(prompt_per_1k=Decimal("0.001"), completion_per_1k=Decimal("0.004")),
            1000,
            200,
            Decimal("0.0018"),
        ),
        "model-b": (
            ModelPrice(prompt_per_1k=Decimal("0.01"), completion_per_1k=Decimal("0.03")),
            400,
            100,
            Decimal("0.007"),
        ),
        "unpriced": (
            ModelPrice(prompt_per_1k=Decimal("0.002"), completion_per_1k=Decimal("0.006")),
            10,
            5,
            Decimal("0.00005"),
        ),
    }

    async with pool.acquire() as conn:
        name = await conn.fetchval("SELECT name FROM tenants WHERE id = $1", tenant)
    cli = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "tenants", "usage", "--tenant", name],
        env={
            **os.environ,
            "FENCELINE_DATABASE_URL": dsn,
            "FENCELINE_PROMPT_PRICE_PER_1K": "0.002",
            "FENCELINE_COMPLETION_PRICE_PER_1K": "0.006",
            "FENCELINE_MODEL_PRICES": json.dumps(prices),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)["spend"]
    assert Decimal(out["reconciled"]) == Decimal("0.00885")
    rows = {m["model"]: m for m in out["by_model"]}
    assert rows["model-b"]["prompt_price_per_1k"] == "0.01"
    assert rows["model-b"]["completion_price_per_1k"] == "0.03"
    assert (rows["model-b"]["prompt_tokens"], rows["model-b"]["completion_tokens"]) == (400, 100)
    assert Decimal(rows["openai-compatible:model-a"]["amount"]) == Decimal("0.0018")
    assert out["prices"]["default"] == {"prompt_per_1k": "0.002", "completion_per_1k": "0.006"}
    assert out["prices"]["models"]["model-a"] == prices["model-a"]
