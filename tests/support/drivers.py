"""Helpers to run real drivers against the fake provider in tests."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from benchmarks.infra import corpus_answer
from benchmarks.invoices.generator import GeneratedInvoice
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.states import SETTLED
from pipeline.tenants import Tenant, permit_currencies, upsert_supplier


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
