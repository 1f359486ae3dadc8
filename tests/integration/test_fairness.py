"""Tenant fairness end to end: one tenant's backlog cannot starve another's single job."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices.generator import generate_invoice
from pipeline.extraction import OpenAICompatibleEngine
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.tenants import permit_currencies, upsert_supplier
from pipeline.worker import AttemptRunner, DriverLoop, WorkerConfig
from tests.support.drivers import answer_from_corpus
from tests.support.jobs import new_tenant

pytestmark = pytest.mark.integration


async def test_single_job_of_b_completes_before_as_100th(pool: asyncpg.Pool) -> None:
    today = datetime.now(UTC).date()
    inv = generate_invoice(11, max_line_items=1, anchor=today)
    store = JobStore(pool)
    a, b = await new_tenant(pool, "tenant-a"), await new_tenant(pool, "tenant-b")
    async with pool.acquire() as conn:
        for t in (a, b):
            await upsert_supplier(conn, t.id, inv.supplier)
            await permit_currencies(conn, t.id, [inv.currency])
    # The same document, distinct jobs: after A's first, each settles REVIEW_REQUIRED
    # as a duplicate invoice, so completion below counts both settled states.
    for i in range(1000):
        await store.accept(AcceptRequest(a.id, f"a-{i}", DocumentIn(inv.ocr_text)))
    lone = await store.accept(AcceptRequest(b.id, "b-0", DocumentIn(inv.ocr_text)))
    with FakeProvider(answer=answer_from_corpus([inv])) as fake:
        async with OpenAICompatibleEngine(fake.base_url, "fake") as engine:
            loops = [
                DriverLoop(
                    AttemptRunner(
                        store,
                        engine,
                        WorkerConfig(worker_id=f"d{i}", concurrency=4, idle_poll_seconds=0.05),
                    )
                )
                for i in range(2)
            ]
            for loop in loops:
                await loop.start()
            try:
                while True:
                    row = await store.get(b.id, lone.job_id)
                    if row["state"] == "SUCCEEDED":
                        break
                    await asyncio.sleep(0.05)
            finally:
                for loop in loops:
                    await loop.stop(grace_seconds=5)
    async with pool.acquire() as conn:
        order = await conn.fetch(
            "SELECT job_id, tenant_id FROM job_events"
            " WHERE to_state IN ('SUCCEEDED', 'REVIEW_REQUIRED') ORDER BY seq"
        )
    position_of_b = next(i for i, r in enumerate(order) if r["job_id"] == lone.job_id)
    a_before_b = sum(1 for r in order[:position_of_b] if r["tenant_id"] == a.id)
    assert a_before_b < 99, f"B completed after {a_before_b} of A's jobs"
