"""The retention benchmark's pieces (benchmarks/load/retention_data.py): the bulk
generator writes the rows its layout promises, the due counts match that layout
worked out here in Python, a real pass leaves no mismatch, and the check catches a
pass that removed too much or too little."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import asyncpg
import pytest

from benchmarks.load.retention_bench import latency, percentile_ms, worker_loop
from benchmarks.load.retention_data import (
    add_ready,
    expected_removal,
    generate_settled,
    table_counts,
    verify_removal,
)
from pipeline.jobs import JobStore, RetentionConfig, run_retention, set_legal_hold
from pipeline.settings import Settings
from pipeline.tenants import create_tenant

pytestmark = pytest.mark.integration

N = 2000
HELD = 500
HORIZONS = {"content_days": 30, "audit_days": 365}


def layout(n: int) -> Counter[str]:
    """The module docstring's layout, job by job: what exists and what is due."""
    c: Counter[str] = Counter()
    for g in range(1, n + 1):
        m, s = g % 100, (g // 100) % 20
        state = "FAILED_TERMINAL" if s == 0 else "REVIEW_REQUIRED" if s == 1 else "SUCCEEDED"
        held = g % 500 in (250, 290)
        final = state != "REVIEW_REQUIRED"
        content_due = final and m >= 40 and not held
        audit_due = final and m >= 85 and not held
        c["jobs"] += 1
        c["documents"] += m != 41
        c["results"] += state != "FAILED_TERMINAL"
        c["held"] += held
        c["content_jobs"] += content_due
        c["audit_jobs"] += audit_due
        c["due_results"] += content_due and state == "SUCCEEDED"
        c["due_documents"] += content_due and m != 41
    return c


async def _tenants(pool: asyncpg.Pool) -> tuple[uuid.UUID, uuid.UUID]:
    async with pool.acquire() as conn:
        now = await conn.fetchval("SELECT now()")
        a = await create_tenant(conn, f"bench-a-{uuid.uuid4().hex[:6]}")
        b = await create_tenant(conn, f"bench-b-{uuid.uuid4().hex[:6]}")
        await generate_settled(conn, a.id, N, now=now, prefix="a")
        await generate_settled(conn, b.id, HELD, now=now, prefix="b")
    await set_legal_hold(pool, b.id, reason="test hold", actor="test")
    return a.id, b.id


async def test_the_generator_writes_what_its_layout_says(pool: asyncpg.Pool) -> None:
    a, b = await _tenants(pool)
    want, want_b = layout(N), layout(HELD)
    async with pool.acquire() as conn:
        assert await table_counts(conn, [a]) == {
            "results": want["results"],
            "documents": want["documents"],
            "job_events": 3 * N,
            "inbox_records": N,
            "attempts": N,
            "jobs": N,
        }
        assert 0.55 * N < want["content_jobs"] < 0.6 * N  # 60 % of ages, less reviews, holds
        holds = await conn.fetchval("SELECT count(*) FROM job_legal_holds WHERE tenant_id = $1", a)
        assert holds == want["held"] == 8
        now = await conn.fetchval("SELECT now()")
        due = await expected_removal(conn, now, [a, b], **HORIZONS)
    assert due.content_jobs == want["content_jobs"]
    assert due.audit_jobs == want["audit_jobs"]
    assert due.results == want["due_results"]
    assert due.documents == want["due_documents"]
    assert due.job_events == 3 * want["audit_jobs"]
    assert due.inbox_records == want["audit_jobs"]
    assert due.held_jobs == want["held"] + want_b["held"]


async def test_a_pass_matches_the_check_and_the_check_catches_a_wrong_one(
    pool: asyncpg.Pool,
) -> None:
    a, b = await _tenants(pool)
    async with pool.acquire() as conn:
        now = await conn.fetchval("SELECT now()")
        due = await expected_removal(conn, now, [a, b], **HORIZONS)
    report = await run_retention(pool, RetentionConfig(batch=200))
    assert report.content_jobs == due.content_jobs
    assert report.largest_batch == 200
    async with pool.acquire() as conn:
        clean = await verify_removal(conn, now, [a, b], **HORIZONS)
        assert not any(clean.values()), clean
        # Too much: a held job's result and a recent job's history go as well.
        held = await conn.fetchval(
            "SELECT h.job_id FROM job_legal_holds h JOIN extraction_results r "
            "ON r.job_id = h.job_id WHERE h.tenant_id = $1 LIMIT 1",
            a,
        )
        await conn.execute(
            "UPDATE extraction_results SET result = '{}', validation = '{}' WHERE job_id = $1",
            held,
        )
        recent = await conn.fetchval(
            "SELECT id FROM extraction_jobs WHERE tenant_id = $1 ORDER BY finished_at DESC LIMIT 1",
            b,
        )
        await conn.execute("DELETE FROM job_events WHERE job_id = $1", recent)
        # Too little: one audit-due job's inbox record comes back.
        kept = await conn.fetchval(
            "SELECT job_id FROM job_retention_marks WHERE tenant_id = $1 "
            "AND audit_removed_at IS NOT NULL LIMIT 1",
            a,
        )
        await conn.execute(
            "INSERT INTO execution_inbox (event_id, job_id, payload_digest) VALUES ($1, $2, 'x')",
            uuid.uuid4(),
            kept,
        )
        wrong = await verify_removal(conn, now, [a, b], **HORIZONS)
    assert wrong == {**clean, "results": 1, "job_events": 1, "inbox_records": 1}


async def test_the_worker_loop_claims_and_settles_each_job(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        live = await create_tenant(conn, f"bench-live-{uuid.uuid4().hex[:6]}")
        await add_ready(conn, live.id, 2)
    store = JobStore(pool, Settings(lease_seconds=60))
    done = asyncio.Event()
    done.set()
    claims, settles = await worker_loop(store, done, 0)
    assert len(claims) == len(settles) == 1
    async with pool.acquire() as conn:
        states = await conn.fetch(
            "SELECT state, count(*) AS n FROM extraction_jobs WHERE tenant_id = $1 GROUP BY 1",
            live.id,
        )
    assert {r["state"]: r["n"] for r in states} == {"SUCCEEDED": 1, "READY": 1}
    with pytest.raises(RuntimeError, match="ran out of READY jobs"):
        await worker_loop(store, asyncio.Event(), 0)  # claims the last, then finds none


def test_percentiles_are_nearest_rank() -> None:
    values = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    assert percentile_ms(values, 0.50) == 51.0
    assert percentile_ms(values, 0.99) == 100.0
    assert latency(values)["p95_ms"] == 96.0
    with pytest.raises(ValueError):
        percentile_ms([], 0.5)
