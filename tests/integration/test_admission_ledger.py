"""Admission ledger on real PostgreSQL: settlement once, expiry keeps uncertain
attempts charged, a restarted policy replays the window, per-tenant reports."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import asyncpg
import pytest

from cluster.admission import AdmissionActor
from pipeline.admission import (
    AdmissionConfig,
    AdmissionLedger,
    AdmissionPolicy,
    AdmissionRequest,
    Grant,
    PriorityClass,
    Wait,
    WaitReason,
    reconcile,
)
from pipeline.admission.policy import GrantOutcome
from pipeline.clock import ManualClock
from pipeline.errors import OwnershipError
from pipeline.jobs import JobStore
from pipeline.tenants import Tenant
from pipeline.tenants.accounts import get_tenant
from pipeline.usage import Usage
from tests.support.jobs import accept_many, new_tenant

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


class Mono:
    """A monotonic clock for the policy that follows the ledger's ManualClock."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock

    def __call__(self) -> float:
        return (self.clock.now() - T0).total_seconds()


def setup(scope: str = "provider-a", **limits: object) -> tuple[AdmissionPolicy, ManualClock]:
    clock = ManualClock(T0)
    cfg = AdmissionConfig(scope=scope, **limits)  # type: ignore[arg-type]
    return AdmissionPolicy(cfg, clock=Mono(clock)), clock


def grant_of(result: Grant | Wait) -> Grant:
    assert isinstance(result, Grant), result
    return result


async def test_grant_settles_once_with_the_reconciled_charge(pool: asyncpg.Pool) -> None:
    tenant = await new_tenant(pool)
    [job_id] = await accept_many(JobStore(pool), tenant, 1)
    policy, clock = setup(tpm=10_000)
    ledger = AdmissionLedger(pool, clock)
    g = grant_of(
        policy.try_acquire(AdmissionRequest(str(tenant.id), 1200, 800, job_id=str(job_id), fence=3))
    )
    await ledger.record_grant(g)
    clock.advance(4.0)
    rec = policy.release(g, Usage(prompt_tokens=1100, completion_tokens=300, cached_tokens=200))
    await ledger.record_settlement(rec)
    with pytest.raises(OwnershipError):
        await ledger.record_settlement(rec)

    [row] = await ledger.grants_for_job(tenant.id, job_id)
    assert (row.id, row.scope, row.fence, row.priority_class) == (
        uuid.UUID(g.grant_id),
        "provider-a",
        3,
        PriorityClass.STANDARD,
    )
    assert (row.reserved_tokens, row.charged_tokens, row.outcome, row.settled_by) == (
        2000,
        1400,
        GrantOutcome.RECONCILED,
        "driver",
    )
    assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens) == (1100, 300, 200)
    assert row.settled_at is not None and (row.settled_at - row.granted_at).total_seconds() == 4.0
    # Tenant-scoped: another tenant sees nothing of this job.
    other = await new_tenant(pool)
    assert await ledger.grants_for_job(other.id, job_id) == []


async def test_uncertain_attempts_stay_charged_across_a_restart(pool: asyncpg.Pool) -> None:
    tenant = str((await new_tenant(pool)).id)
    policy, clock = setup(rpm=10, tpm=5_000, max_in_flight=4)
    ledger = AdmissionLedger(pool, clock)
    reconciled = grant_of(policy.try_acquire(AdmissionRequest(tenant, 1000, 1000)))
    uncertain = grant_of(policy.try_acquire(AdmissionRequest(tenant, 1000, 500)))
    still_open = grant_of(policy.try_acquire(AdmissionRequest(tenant, 500, 500)))
    for g in (reconciled, uncertain, still_open):
        await ledger.record_grant(g)
    clock.advance(20.0)
    await ledger.record_settlement(policy.release(reconciled, Usage(400, 100)))
    await ledger.record_settlement(policy.release(uncertain, None, uncertain=True))
    before = policy.snapshot()
    assert before.window_tokens == 500 + 1500 + 1000

    # The actor restarts: a fresh policy replays the ledger.
    restarted = AdmissionPolicy(policy.config, clock=Mono(clock))
    assert restarted.restore(await ledger.window("provider-a")) == 3
    after = restarted.snapshot()
    assert (after.window_requests, after.window_tokens, after.in_flight) == (3, 3000, 1)
    wait = restarted.try_acquire(AdmissionRequest(tenant, 1500, 501))  # 3000 + 2001 > 5000
    assert isinstance(wait, Wait) and wait.reason is WaitReason.TPM
    assert wait.seconds == pytest.approx(40.0, abs=1e-3)  # the oldest grants leave at 60 s
    # The open grant's driver can still release it through the restarted policy.
    rec = restarted.release(still_open.grant_id, Usage(300, 200))
    await ledger.record_settlement(rec)
    assert restarted.snapshot().window_tokens == 500 + 1500 + 500
    clock.advance(40.0)
    # The replayed settled grants left the window; the one released at the restart
    # stays 60 s after its release (the provider may have seen it that late).
    late = restarted.try_acquire(AdmissionRequest(tenant, 2500, 2500))
    assert isinstance(late, Wait) and late.seconds == pytest.approx(20.0, abs=1e-3)
    assert isinstance(restarted.try_acquire(AdmissionRequest(tenant, 2500, 2000)), Grant)
    # Another scope replays nothing of this one.
    assert await ledger.window("provider-b") == []


async def test_expiry_charges_the_full_reservation_and_wins_over_a_late_release(
    pool: asyncpg.Pool,
) -> None:
    tenant = str((await new_tenant(pool)).id)
    policy, clock = setup(tpm=5_000, grant_ttl_seconds=120.0)
    ledger = AdmissionLedger(pool, clock)
    crashed = grant_of(policy.try_acquire(AdmissionRequest(tenant, 700, 300)))
    await ledger.record_grant(crashed)
    clock.advance(100.0)
    await ledger.record_grant(grant_of(policy.try_acquire(AdmissionRequest(tenant, 1, 1))))
    clock.advance(19.0)
    assert await ledger.expire_stale("provider-a", 120.0) == []
    clock.advance(1.0)
    assert await ledger.expire_stale("provider-a", 120.0) == [uuid.UUID(crashed.grant_id)]
    assert await ledger.expire_stale("provider-a", 120.0) == []
    [rec] = policy.expire_overdue()
    assert rec.grant_id == crashed.grant_id
    with pytest.raises(OwnershipError):  # the sweep settled it first
        await ledger.record_settlement(rec)
    late = reconcile(crashed, Usage(prompt_tokens=10, completion_tokens=10), uncertain=False)
    with pytest.raises(OwnershipError):  # a late release never undoes the charge
        await ledger.record_settlement(late)
    [usage] = await ledger.report(tenant)
    assert (usage.grants, usage.open, usage.uncertain, usage.expired) == (2, 1, 1, 1)
    assert usage.uncertain_unreported_tokens == 1000
    assert usage.charged_tokens == 1000 + 2  # the open grant counts at its reservation


async def test_database_refuses_an_undercharged_uncertain_attempt(pool: asyncpg.Pool) -> None:
    tenant = str((await new_tenant(pool)).id)
    policy, clock = setup()
    ledger = AdmissionLedger(pool, clock)
    g = grant_of(policy.try_acquire(AdmissionRequest(tenant, 100, 100)))
    await ledger.record_grant(g)
    rec = policy.release(g, None, uncertain=True)
    with pytest.raises(asyncpg.CheckViolationError):
        await ledger.record_settlement(replace(rec, charged_tokens=50))


async def test_report_per_tenant_reserved_vs_used_and_cost(pool: asyncpg.Pool) -> None:
    a, b = str((await new_tenant(pool)).id), str((await new_tenant(pool)).id)
    policy, clock = setup(count_cached_tokens=False)
    ledger = AdmissionLedger(pool, clock)

    async def attempt(tenant: str, scope_policy: AdmissionPolicy, **release: object) -> None:
        g = grant_of(scope_policy.try_acquire(AdmissionRequest(tenant, 1000, 500)))
        await ledger.record_grant(g)
        await ledger.record_settlement(scope_policy.release(g, **release))  # type: ignore[arg-type]

    other_scope, _ = setup("pool-short")
    other_scope = AdmissionPolicy(other_scope.config, clock=Mono(clock))
    await attempt(a, policy, usage=Usage(900, 200, 300))  # charged 800 (cache exempt)
    await attempt(a, policy, usage=None, uncertain=True)  # charged 1500, unreported
    await attempt(a, policy, usage=None)  # 429: slot kept, tokens refunded
    await attempt(a, policy, usage=None, attempted=False)  # lease lost before the call
    await attempt(a, other_scope, usage=Usage(100, 50))
    await attempt(b, policy, usage=Usage(1000, 500))

    reports = {r.scope: r for r in await ledger.report(a)}
    assert set(reports) == {"provider-a", "pool-short"}
    r = reports["provider-a"]
    assert (r.grants, r.reconciled, r.uncertain, r.refunded, r.open) == (4, 1, 1, 2, 0)
    assert r.requests_charged == 3
    assert (r.reserved_tokens, r.charged_tokens, r.refunded_tokens) == (6000, 2300, 3700)
    assert (r.prompt_tokens, r.completion_tokens, r.cached_tokens) == (900, 200, 300)
    assert r.uncertain_unreported_tokens == 1500
    price = Decimal("0.002")
    assert r.cost(price) == Decimal("0.0022")
    assert r.cost_upper_bound(price) == Decimal("0.0052")
    assert [x.scope for x in await ledger.report(a, scope="pool-short")] == ["pool-short"]
    assert await ledger.report(a, since=clock.now().replace(year=2027)) == []

    everyone = await ledger.report_all(scope="provider-a")
    assert {str(x.tenant_id) for x in everyone} == {a, b}
    assert [x.charged_tokens for x in everyone if str(x.tenant_id) == b] == [1500]


# ---- the actor writing through to the ledger (no Ray: the plain class) -------------


def actor_config(**limits: object) -> AdmissionConfig:
    return AdmissionConfig(scope=f"prov-{uuid.uuid4().hex[:8]}", **limits)  # type: ignore[arg-type]


async def test_restarted_actor_keeps_uncertain_attempts_charged(
    dsn: str, pool: asyncpg.Pool
) -> None:
    tenant = str((await new_tenant(pool)).id)
    cfg = actor_config(tpm=5_000, max_in_flight=4)
    first = AdmissionActor(cfg, database_url=dsn)
    g1 = grant_of(await first.acquire(AdmissionRequest(tenant, 1000, 1000)))
    await first.release(g1, None, uncertain=True)  # timed out: stays charged (2000)
    g2 = grant_of(await first.acquire(AdmissionRequest(tenant, 500, 500)))
    await first.release(g2, Usage(300, 100))  # reconciled to 400
    g3 = grant_of(
        await first.acquire(AdmissionRequest(tenant, 500, 500))
    )  # still in flight at the restart
    await first.stop()

    second = AdmissionActor(cfg, database_url=dsn)
    snap = await second.start()
    assert (snap["restored"], snap["ledger"], snap["ledger_errors"]) == (3, True, 0)
    assert (snap["window_tokens"], snap["window_requests"], snap["in_flight"]) == (3400, 3, 1)
    blocked = await second.acquire(AdmissionRequest(tenant, 1000, 601), timeout=0)
    assert isinstance(blocked, Wait) and blocked.reason is WaitReason.TPM
    rec = await second.release(g3, Usage(200, 100))  # its driver survived the restart
    assert rec is not None and rec.charged_tokens == 300
    await second.stop()

    [usage] = await AdmissionLedger(pool).report(tenant)
    assert (usage.grants, usage.reconciled, usage.uncertain, usage.open) == (3, 2, 1, 0)
    assert (usage.reserved_tokens, usage.charged_tokens) == (4000, 2700)


async def test_actor_expiry_is_recorded_and_frees_the_permit(dsn: str, pool: asyncpg.Pool) -> None:
    tenant = str((await new_tenant(pool)).id)
    [job_id] = await accept_many(JobStore(pool), await _tenant(pool, tenant), 1)
    actor = AdmissionActor(actor_config(max_in_flight=1, grant_ttl_seconds=0.2), database_url=dsn)
    crashed = grant_of(
        await actor.acquire(AdmissionRequest(tenant, 100, 50, job_id=str(job_id), fence=1))
    )
    after = grant_of(
        await actor.acquire(
            AdmissionRequest(tenant, 100, 50, job_id=str(job_id), fence=2), timeout=5
        )
    )
    await actor.release(after, Usage(90, 10))
    await actor.stop()  # waits for the background ledger writes
    rows = await AdmissionLedger(pool).grants_for_job(tenant, job_id)
    assert [(r.fence, r.outcome, r.settled_by, r.charged_tokens) for r in rows] == [
        (1, GrantOutcome.UNCERTAIN, "expiry", 150),
        (2, GrantOutcome.RECONCILED, "driver", 100),
    ]
    assert crashed.grant_id == str(rows[0].id)


async def test_unreachable_ledger_never_blocks_admission() -> None:
    from tests.conftest import dsn_for

    actor = AdmissionActor(actor_config(max_in_flight=2), database_url=dsn_for("fl_no_such_db"))
    snap = await actor.start()
    assert (snap["ledger"], snap["ledger_errors"]) == (False, 1)
    g = grant_of(await actor.acquire(AdmissionRequest(str(uuid.uuid4()), 10, 10), timeout=0))
    assert (await actor.release(g, Usage(5, 5))) is not None
    await actor.stop()


async def _tenant(pool: asyncpg.Pool, tenant_id: str) -> Tenant:
    async with pool.acquire() as conn:
        found = await get_tenant(conn, uuid.UUID(tenant_id))
    assert found is not None
    return found


async def test_an_expiry_is_settled_at_the_time_it_freed_the_permit(pool: asyncpg.Pool) -> None:
    """The actor writes an expiry in the background after the permit is free; the row
    must carry that moment, not the (later) moment of the write."""
    tenant = await new_tenant(pool)
    [job_id] = await accept_many(JobStore(pool), tenant, 1)
    policy, clock = setup(tpm=10_000, grant_ttl_seconds=5)
    ledger = AdmissionLedger(pool, clock)
    g = grant_of(
        policy.try_acquire(AdmissionRequest(str(tenant.id), 1200, 800, job_id=str(job_id), fence=1))
    )
    await ledger.record_grant(g)
    clock.advance(6.0)
    [rec] = policy.expire_overdue()
    freed = clock.now()
    clock.advance(3.0)  # the write comes later than the expiry
    await ledger.record_settlement(rec, freed)
    [row] = await ledger.grants_for_job(tenant.id, job_id)
    assert row.settled_at == freed and row.settled_by == "expiry"


async def test_a_settlement_lost_to_a_database_outage_is_retried(
    dsn: str, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release while the database restarts must still settle its ledger row: left
    open, the grant would count against every later grant (a chaos run showed 9 of 6)."""
    tenant = str((await new_tenant(pool)).id)
    [job_id] = await accept_many(JobStore(pool), await _tenant(pool, tenant), 1)
    actor = AdmissionActor(actor_config(max_in_flight=1), database_url=dsn)
    g = grant_of(
        await actor.acquire(AdmissionRequest(tenant, 100, 50, job_id=str(job_id), fence=1))
    )
    assert actor._ledger is not None
    ledger = actor._ledger
    real = ledger.record_settlement
    failures = [asyncpg.exceptions.CannotConnectNowError("the database system is starting up")]

    async def flaky(rec: object, at: object = None) -> None:
        if failures:
            raise failures.pop()
        await real(rec, at)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger, "record_settlement", flaky)
    assert await actor.release(g, Usage(90, 10)) is not None
    await actor.stop()
    [row] = await AdmissionLedger(pool).grants_for_job(tenant, job_id)
    assert (row.outcome, row.settled_by) == (GrantOutcome.RECONCILED, "driver")
    assert not failures
