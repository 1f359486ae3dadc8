"""The oracle can fail: a clean history passes every invariant, and each kind of
broken history is reported against the job that broke it.

The history is written through the real job store (accept, claim, a zombie
reaped and its late result discarded, success under the newer fence) and the
reference ERP receiver's own queries; each tamper then breaks one invariant the
way a bug would (a second ERP application, a stale result, a lost job ...).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from benchmarks.chaos.oracle import AdmissionBudget, ClientLog, OracleReport, check
from benchmarks.erp_receiver import apply_posting
from pipeline.clock import ManualClock
from pipeline.errors import ProviderRateLimited
from pipeline.jobs import JobStore
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.usage import AttemptUsage
from tests.support.jobs import new_tenant, request

pytestmark = [pytest.mark.faults, pytest.mark.integration]
LEDGER = "default"
SCOPE = "oracle-test"


async def erp_receive(conn: asyncpg.Connection, job_id: uuid.UUID, delivery_id: str) -> None:
    """What the reference ERP receiver does with one accepted delivery of ``job_id``."""
    async with conn.transaction():
        await conn.fetchval(
            q("erp_inbox_insert_if_new"), LEDGER, delivery_id, "0" * 64, "extraction.completed.v1",
            job_id,
        )  # fmt: skip
        await conn.fetchval(  # no invoice key: one posting per job is what is tested here
            q("erp_posting_insert_if_new"), LEDGER, job_id, delivery_id, {}, None
        )
    await apply_posting(conn, LEDGER, delivery_id)


async def grant(
    conn: asyncpg.Connection, tenant: uuid.UUID, at: datetime, settled: datetime | None
) -> None:
    await conn.execute(
        q("admission_grant_insert"),
        uuid.uuid4(),
        SCOPE,
        tenant,
        None,
        None,
        "standard",
        100,
        at,
        None,
    )
    if settled is not None:
        await conn.execute(
            "UPDATE admission_grants SET outcome = 'reconciled', charged_tokens = 90,"
            " settled_by = 'driver', settled_at = $1 WHERE settled_at IS NULL AND granted_at = $2",
            settled,
            at,
        )


@pytest.fixture
async def history(pool: asyncpg.Pool) -> tuple[ClientLog, dict[str, uuid.UUID], ManualClock]:
    """Three accepted jobs: one succeeded after a zombie lost it, one in review, one waiting."""
    clock = ManualClock(datetime.now(UTC) - timedelta(hours=1))
    store = JobStore(pool, Settings(lease_seconds=30, default_deadline_seconds=7200), clock=clock)
    tenant = await new_tenant(pool)
    clients = ClientLog()
    ids = {}
    for name in ("won", "review", "waiting"):
        ids[name] = (await store.accept(request(tenant))).job_id
        clients.accept(str(ids[name]), clock.now().timestamp())
    zombie = next(le for le in await store.claim("zombie", limit=3) if le.job_id == ids["won"])
    clock.advance(31)
    assert (await store.reap()).rescheduled
    clock.advance(3600)
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE extraction_jobs SET available_at = $1 WHERE id = ANY($2::uuid[])",
            clock.now(),
            [ids["won"], ids["review"]],
        )
    leases = {le.job_id: le for le in await store.claim("newer", limit=3)}
    await store.succeed(leases[ids["won"]], result={"who": "newer"})
    assert await store.record_late_result(zombie, AttemptUsage(prompt_tokens=3))
    await store.succeed(leases[ids["review"]], result={}, decision=JobState.REVIEW_REQUIRED)
    await store.retry_or_fail(leases[ids["waiting"]], ProviderRateLimited("429"))
    async with pool.acquire() as conn:
        # "waiting" is due far in the future: explainable, not stuck.
        await conn.execute(
            "UPDATE extraction_jobs SET available_at = now() + interval '1 hour' WHERE id = $1",
            ids["waiting"],
        )
        await erp_receive(conn, ids["won"], "msg_first")
        # The same delivery id again: the ERP inbox absorbs it, no new application.
        await erp_receive(conn, ids["won"], "msg_first")
        t0 = datetime.now(UTC) - timedelta(seconds=30)
        for i in range(3):  # never more than two open at once
            await grant(conn, tenant.id, t0 + timedelta(seconds=i), t0 + timedelta(seconds=i + 1.5))
    ids["tenant"] = tenant.id
    return clients, ids, clock


async def run_oracle(pool: asyncpg.Pool, clients: ClientLog) -> OracleReport:
    async with pool.acquire() as conn:
        return await check(
            conn, clients, admission=AdmissionBudget(SCOPE, rpm=10, tpm=10_000, max_in_flight=2)
        )


async def test_a_clean_history_passes_every_invariant(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, _, _ = history
    report = await run_oracle(pool, clients)
    assert report.ok, report.render()
    assert report.lost == ()
    assert report.verdict("no_stale_writes").checked == "1 late results discarded"
    assert "ALL INVARIANTS HOLD" in report.render()
    assert report.failures == ()


async def test_a_job_that_failed_for_good_is_explained_not_a_violation(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, _, clock = history
    store = JobStore(pool, Settings(lease_seconds=30, default_deadline_seconds=7200), clock=clock)
    tenant = await new_tenant(pool)
    failed = (await store.accept(request(tenant))).job_id
    clients.accept(str(failed), clock.now().timestamp())
    lease = next(le for le in await store.claim("w", limit=10) if le.job_id == failed)
    await store.fail(
        lease, error_class="EngineTimeout", reason="attempts_exhausted", detail="no answer in 1.0 s"
    )
    report = await run_oracle(pool, clients)
    assert report.ok, report.render()
    [failure] = report.failures
    assert (failure.job_id, failure.terminal_reason) == (str(failed), "attempts_exhausted")
    [attempt] = failure.attempts
    assert attempt.startswith(f"fence {lease.fence} failed_terminal after ")
    assert attempt.endswith("EngineTimeout: no answer in 1.0 s")
    assert f"failed {failed}: attempts_exhausted" in report.render()
    assert report.as_dict()["failures"][0]["attempts"] == [attempt]


async def test_a_job_failed_before_any_attempt_is_explained_too(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, _, clock = history
    store = JobStore(pool, Settings(lease_seconds=30, default_deadline_seconds=7200), clock=clock)
    tenant = await new_tenant(pool)
    late = (await store.accept(request(tenant, deadline_seconds=10))).job_id
    clients.accept(str(late), clock.now().timestamp())
    clock.advance(11)
    await store.reap()  # its deadline passed while it waited: failed with no attempt
    report = await run_oracle(pool, clients)
    [failure] = [f for f in report.failures if f.job_id == str(late)]
    assert failure.terminal_reason == "deadline_exceeded"
    assert failure.attempts == ("no attempt: deadline passed before an attempt could start",)


async def test_a_second_erp_application_is_a_violation(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, ids, _ = history
    async with pool.acquire() as conn:
        await erp_receive(conn, ids["won"], "msg_resent_as_new")  # a new delivery id
    report = await run_oracle(pool, clients)
    erp = report.verdict("erp_once")
    assert not erp.ok and erp.offenders == (str(ids["won"]),)
    assert "2 applications" in erp.detail[0]
    assert not report.ok and "FAIL  erp_once" in report.render()


async def test_an_erp_application_of_a_review_job_is_a_violation(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, ids, _ = history
    async with pool.acquire() as conn:
        await erp_receive(conn, ids["review"], "msg_review")
    assert report_offenders(await run_oracle(pool, clients), "erp_once") == {str(ids["review"])}


async def test_a_result_under_a_stale_fence_is_a_violation(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, ids, _ = history
    async with pool.acquire() as conn:
        await conn.execute(
            'UPDATE extraction_results SET fence = 1, result = \'{"who": "zombie"}\''
            " WHERE job_id = $1",
            ids["won"],
        )
    report = await run_oracle(pool, clients)
    assert report_offenders(report, "no_stale_writes") == {str(ids["won"])}


async def test_lost_and_stuck_jobs_are_violations(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, ids, _ = history
    ghost = str(uuid.uuid4())
    clients.accept(ghost, 0.0)  # a 202 whose job is not in the database
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE extraction_jobs SET available_at = now() - interval '1 minute' WHERE id = $1",
            ids["waiting"],
        )  # due, and nobody will claim it
    report = await run_oracle(pool, clients)
    assert report_offenders(report, "accepted_exist") == {ghost}
    assert report_offenders(report, "terminal_or_live") == {str(ids["waiting"])}
    assert set(report.lost) == {ghost, str(ids["waiting"])}


async def test_history_going_back_is_a_violation(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, ids, _ = history
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO job_events (job_id, tenant_id, from_state, to_state, state_version,"
            " fence, attempt) VALUES ($1, $2, 'RUNNING', 'RETRY_SCHEDULED', 99, 0, 0)",
            ids["won"],
            ids["tenant"],
        )
    report = await run_oracle(pool, clients)
    assert report_offenders(report, "attempts_monotonic") == {str(ids["won"])}


async def test_missing_outbox_event_and_foreign_inbox_record_are_violations(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, ids, _ = history
    async with pool.acquire() as conn:
        await conn.execute(
            "DELETE FROM outbox_events"
            " WHERE job_id = $1 AND event_type = 'extraction.requested.v1'",
            ids["review"],
        )
        await conn.execute(
            "INSERT INTO execution_inbox (event_id, job_id, payload_digest) VALUES ($1, $2, 'x')",
            uuid.uuid4(),
            ids["won"],
        )
    report = await run_oracle(pool, clients)
    assert report_offenders(report, "outbox_complete") == {str(ids["review"])}
    assert report_offenders(report, "inbox_at_most_once") == {str(ids["won"])}


async def test_permits_over_budget_are_a_violation(
    pool: asyncpg.Pool, history: tuple[ClientLog, dict[str, uuid.UUID], ManualClock]
) -> None:
    clients, ids, _ = history
    t = datetime.now(UTC) - timedelta(seconds=10)
    async with pool.acquire() as conn:
        for i in range(3):  # three open at once, limit two
            await grant(conn, ids["tenant"], t + timedelta(milliseconds=i), None)
    report = await run_oracle(pool, clients)
    verdict = report.verdict("admission_within_budget")
    assert not verdict.ok and any("in_flight 3 > 2" in d for d in verdict.detail)


def report_offenders(report: OracleReport, name: str) -> set[str]:
    return set(report.verdict(name).offenders)
