"""Helpers to run real drivers against the fake provider in tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import asyncpg
import httpx

from benchmarks.fake_provider import FakeProvider
from benchmarks.infra import corpus_answer
from benchmarks.invoices.generator import GeneratedInvoice
from pipeline.documents import open_document_store
from pipeline.extraction import OpenAICompatibleEngine
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.states import SETTLED
from pipeline.tenants import Tenant, permit_currencies, upsert_supplier
from pipeline.worker import AttemptRunner, DriverLoop, WorkerConfig
from tests.support.api import tenant_with_key


def answer_from_corpus(corpus: list[GeneratedInvoice]) -> Any:
    """A fake-provider answer function: the candidate extraction of the invoice in the prompt
    (in the contract the prompt asks for; see ``benchmarks.infra.corpus_answer``)."""
    return corpus_answer(corpus)


async def submit_corpus(
    store: JobStore, tenant: Tenant, corpus: list[GeneratedInvoice], *, prefix: str = "inv"
) -> dict[Any, GeneratedInvoice]:
    async with store.pool.acquire() as conn:
        for inv in corpus:
            await upsert_supplier(conn, tenant.id, inv.supplier)
        await permit_currencies(conn, tenant.id, {inv.currency for inv in corpus})
    out = {}
    for inv in corpus:
        acc = await store.accept(
            AcceptRequest(tenant.id, f"{prefix}-{inv.seed}-{inv.variant}", DocumentIn(inv.ocr_text))
        )
        out[acc.job_id] = inv
    return out


async def post_corpus(
    pool: asyncpg.Pool, base_url: str, corpus: list[GeneratedInvoice], *, prefix: str
) -> None:
    """A new tenant with the corpus's suppliers and currencies on file, then each invoice
    POSTed as text to the intake at ``base_url`` (202 asserted): a user's first jobs."""
    tk = await tenant_with_key(pool)
    async with pool.acquire() as conn:
        for inv in corpus:
            await upsert_supplier(conn, tk.tenant.id, inv.supplier)
            await permit_currencies(conn, tk.tenant.id, [inv.currency])
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        for inv in corpus:
            r = await client.post(
                "/v1/extraction-jobs",
                json={"document": {"text": inv.ocr_text}},
                headers={**tk.headers, "Idempotency-Key": f"{prefix}-{inv.seed}"},
            )
            assert r.status_code == 202, r.text


async def wait_settled(pool: asyncpg.Pool, n: int, timeout: float = 60.0) -> list[asyncpg.Record]:
    settled = [s.value for s in SETTLED]
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id, state, attempt, terminal_reason, last_error_class, validation_policy"
                " FROM extraction_jobs WHERE state = ANY($1::text[])",
                settled,
            )
        if len(rows) >= n:
            return list(rows)
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"only {len(rows)}/{n} jobs settled")
        await asyncio.sleep(0.2)


async def run_document_driver(
    pool: asyncpg.Pool,
    settings: Settings,
    n: int,
    *,
    answer: Callable[[dict[str, Any]], Any] = lambda _: "{}",
    store: JobStore | None = None,
    today: datetime | None = None,
    timeout: float = 90.0,
) -> tuple[dict[uuid.UUID, asyncpg.Record], int]:
    """One real driver, reading files from ``settings``' document store and asking the
    fake provider (``answer``), until ``n`` jobs settle: their rows by id and the number
    of provider calls. ``store`` defaults to one that retries quickly (3 attempts);
    ``today`` is the validation day."""
    if store is None:
        policy = RetryPolicy(
            max_attempts=3, base_seconds=0.05, cap_seconds=0.2, next_attempt_margin_seconds=1
        )
        store = JobStore(pool, Settings(lease_seconds=30), policy=policy)
    config = WorkerConfig(
        worker_id="doc-driver", concurrency=2, idle_poll_seconds=0.1, max_output_tokens=2048
    )
    clock = None if today is None else (lambda: today)
    with FakeProvider(answer=answer) as fake:
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            runner = AttemptRunner(
                store, engine, config, documents=open_document_store(settings), today=clock
            )
            loop = DriverLoop(runner)
            await loop.start()
            try:
                rows = await wait_settled(pool, n, timeout=timeout)
            finally:
                await loop.stop(grace_seconds=5)
        calls = len(fake.calls())
    return {r["id"]: r for r in rows}, calls
