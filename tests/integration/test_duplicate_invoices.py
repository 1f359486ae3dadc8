"""Duplicate supplier invoices across jobs (issue 20, item 4).

The acceptance: the same invoice submitted again under a new idempotency key ends
REVIEW_REQUIRED ``duplicate_invoice`` naming the other job, and the ERP sees one
posting. Even if a reviewer approves the duplicate, the reference ERP receiver
refuses a second posting of the supplier invoice with its own answer, which the
dispatcher records.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices.generator import Variant, generate_corpus
from pipeline.delivery import delivery_settle_hook
from pipeline.extraction import OpenAICompatibleEngine
from pipeline.identity import invoice_identity
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore, Success
from pipeline.jobs.duplicates import keyed_identity
from pipeline.jobs.near_duplicates import near_key_secret
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import create_api_key
from pipeline.worker import AttemptRunner, DriverLoop, WorkerConfig
from tests.support.delivery import (
    dispatcher_for,
    fetch,
    postings,
    registry_for,
    reserve_receiver,
)
from tests.support.drivers import answer_from_corpus, submit_corpus, wait_settled
from tests.support.jobs import new_tenant

pytestmark = pytest.mark.integration

TODAY = datetime.now(UTC).date()


async def run_drivers(store: JobStore, engine: OpenAICompatibleEngine, n: int) -> None:
    cfg = WorkerConfig(
        worker_id="dup", concurrency=2, idle_poll_seconds=0.05, max_output_tokens=2048
    )
    loop = DriverLoop(AttemptRunner(store, engine, cfg))
    await loop.start()
    try:
        await wait_settled(store.pool, n, timeout=60)
    finally:
        await loop.stop(grace_seconds=5)


async def test_a_resubmitted_invoice_goes_to_review_and_the_erp_posts_it_once(
    dsn: str, pool: asyncpg.Pool
) -> None:
    corpus = generate_corpus(2, seed=77, variants=(Variant.CLEAN,), max_line_items=3, anchor=TODAY)
    store = JobStore(pool, Settings(lease_seconds=30))
    store.settle_hooks.add(delivery_settle_hook)
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tenant)
    jobs = await submit_corpus(store, tenant, corpus)
    # The first invoice again, under a new idempotency key: a new job, the same invoice.
    again = await store.accept(
        AcceptRequest(tenant.id, "rescan-of-first", DocumentIn(corpus[0].ocr_text))
    )
    assert again.created and again.job_id not in jobs
    first = next(j for j, inv in jobs.items() if inv is corpus[0])
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake, receiver as erp:
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            await run_drivers(store, engine, 3)
        dispatcher = dispatcher_for(pool)
        report = await dispatcher.run_once()
        rows = await fetch(
            pool,
            "SELECT j.id, j.state, j.last_error, r.validation FROM extraction_jobs j"
            " JOIN extraction_results r ON r.job_id = j.id WHERE j.tenant_id = $1",
            tenant.id,
        )
        by_id = {r["id"]: r for r in rows}
        # Whichever of the two committed first owns the invoice; the other is the duplicate.
        pair = {first, again.job_id}
        [dup] = [j for j in pair if by_id[j]["state"] == "REVIEW_REQUIRED"]
        [owner] = pair - {dup}
        assert by_id[owner]["state"] == "SUCCEEDED"
        assert by_id[dup]["last_error"] == f"duplicate_invoice of job {owner}"
        [reason] = by_id[dup]["validation"]["reasons"]
        assert reason["code"] == "duplicate_invoice"
        assert reason["other_job_id"] == str(owner)
        # The other invoice of the corpus is unaffected.
        [other] = [j for j in jobs if j != first]
        assert by_id[other]["state"] == "SUCCEEDED"
        # Two deliveries, none for the duplicate; the ERP posts each invoice once.
        assert report.count("delivered") == 2
        assert await postings(pool, erp.ledger) == {owner: 1, other: 1}

        # A reviewer approves the duplicate anyway: the ERP refuses the second
        # posting of the supplier invoice, and the dispatcher records that answer.
        async with pool.acquire() as conn:
            key_id, _ = await create_api_key(conn, tenant.id, scopes=("review",))
            version = await conn.fetchval(
                "SELECT state_version FROM extraction_jobs WHERE id = $1", dup
            )
            async with conn.transaction():
                decided = await store.decide_review(
                    conn,
                    job_id=dup,
                    tenant_id=tenant.id,
                    key_id=key_id,
                    decision="approve",
                    note="looks fine",
                    state_version=version,
                )
        assert decided is not None
        report = await dispatcher.run_once()
        await dispatcher.close()
        assert report.count("failed") == 1
        assert erp.stats.results.get("duplicate_invoice") == 1
        assert await postings(pool, erp.ledger) == {owner: 1, other: 1}
    [delivery] = await fetch(
        pool, "SELECT state, final_reason, last_status FROM deliveries WHERE job_id = $1", dup
    )
    assert delivery == {"state": "failed", "final_reason": "duplicate_invoice", "last_status": 409}


async def test_two_jobs_committing_the_same_invoice_at_once_leave_one_owner(
    pool: asyncpg.Pool,
) -> None:
    """The identity row decides under concurrency: exactly one SUCCEEDED."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    result = {
        "supplier": {"name": {"value": "ACME GmbH"}, "vat_id": {"value": "DE 123 456 789"}},
        "invoice_number": {"value": "inv-42"},
        "gross_total": {"value": "1210.00"},
        "currency": {"value": "EUR"},
    }
    for i in range(6):
        await store.accept(
            AcceptRequest(tenant.id, f"k{i}", DocumentIn(f"copy {i} of invoice INV-42"))
        )
    leases = await store.claim("w", limit=6)
    assert len(leases) == 6
    settled = await asyncio.gather(*(store.succeed(lease, result=result) for lease in leases))
    states = sorted(s.state.value for s in settled)
    assert states == ["REVIEW_REQUIRED"] * 5 + ["SUCCEEDED"]
    [owner] = [s.job_id for s in settled if s.state.value == "SUCCEEDED"]
    async with pool.acquire() as conn:
        held = await conn.fetch(
            "SELECT job_id FROM invoice_identities WHERE tenant_id = $1", tenant.id
        )
        errors = await conn.fetch(
            "SELECT last_error FROM extraction_jobs WHERE tenant_id = $1 AND id <> $2",
            tenant.id,
            owner,
        )
    assert [r["job_id"] for r in held] == [owner]
    assert {r["last_error"] for r in errors} == {f"duplicate_invoice of job {owner}"}
    # Another tenant's identical invoice is its own.
    stranger = await new_tenant(pool)
    await store.accept(AcceptRequest(stranger.id, "k", DocumentIn("copy of INV-42")))
    [lease] = await store.claim("w")
    assert (await store.succeed(lease, result=result)).state.value == "SUCCEEDED"


async def test_a_batched_completion_flags_a_duplicate_as_one_at_a_time_does(
    pool: asyncpg.Pool,
) -> None:
    """Group commit (issue 21) goes through the same invoice claim: two copies of one
    invoice in one batch, and a third after it, leave one SUCCEEDED owner."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    result = {
        "supplier": {"name": {"value": "ACME GmbH"}, "vat_id": {"value": "DE 123 456 789"}},
        "invoice_number": {"value": "inv-43"},
        "gross_total": {"value": "99.00"},
        "currency": {"value": "EUR"},
    }
    for i in range(3):
        await store.accept(AcceptRequest(tenant.id, f"b{i}", DocumentIn(f"copy {i} of INV-43")))
    first, second, third = await store.claim("w", limit=3)
    batch = await store.succeed_many(
        [Success(first, result=result), Success(second, result=result)]
    )
    later = await store.succeed(third, result=result)
    states = sorted(s.state.value for s in batch.settled)
    assert batch.lost == [] and states == ["REVIEW_REQUIRED", "SUCCEEDED"]
    [owner] = [s.job_id for s in batch.settled if s.state.value == "SUCCEEDED"]
    assert later.state.value == "REVIEW_REQUIRED"
    async with pool.acquire() as conn:
        errors = await conn.fetch(
            "SELECT last_error FROM extraction_jobs WHERE tenant_id = $1 AND id <> $2",
            tenant.id,
            owner,
        )
    assert {r["last_error"] for r in errors} == {f"duplicate_invoice of job {owner}"}


def invoice(number: str) -> dict[str, object]:
    return {
        "supplier": {"name": {"value": "ACME GmbH"}, "vat_id": {"value": "DE 123 456 789"}},
        "invoice_number": {"value": number},
        "gross_total": {"value": "10.00"},
        "currency": {"value": "EUR"},
    }


async def test_a_batch_claims_new_invoices_at_once_and_held_ones_one_by_one(
    pool: asyncpg.Pool,
) -> None:
    """The batched claim (one statement for invoices nobody holds) decides as the
    one-at-a-time claim: a new invoice is owned, one a rejected job held is taken
    over, one a live job holds is a duplicate, and of two copies in the batch the
    first in job order owns it."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    for i in range(6):
        await store.accept(AcceptRequest(tenant.id, f"m{i}", DocumentIn(f"doc {i}")))
    rejected, holder, *rest = await store.claim("w", limit=6)
    review = JobState.REVIEW_REQUIRED
    settled = await store.succeed(rejected, result=invoice("r-1"), decision=review)
    assert settled.state is review
    assert (await store.succeed(holder, result=invoice("h-1"))).state.value == "SUCCEEDED"
    async with pool.acquire() as conn:  # a reviewer rejected the first one's result
        await conn.execute(
            "UPDATE extraction_jobs SET state = 'FAILED_TERMINAL', terminal_reason = 'rejected'"
            " WHERE id = $1",
            rejected.job_id,
        )
    fresh, takes_over, dup_of_holder, second_copy = sorted(rest, key=lambda le: le.job_id)
    batch = await store.succeed_many(
        [
            Success(second_copy, result=invoice("n-1")),
            Success(takes_over, result=invoice("r-1")),
            Success(dup_of_holder, result=invoice("h-1")),
            Success(fresh, result=invoice("n-1")),
        ]
    )
    states = {s.job_id: s.state.value for s in batch.settled}
    assert states == {
        fresh.job_id: "SUCCEEDED",  # first of the two copies in job order
        second_copy.job_id: "REVIEW_REQUIRED",
        takes_over.job_id: "SUCCEEDED",
        dup_of_holder.job_id: "REVIEW_REQUIRED",
    }
    async with pool.acquire() as conn:
        owners = dict(
            await conn.fetch(
                "SELECT invoice_number, job_id FROM invoice_identities WHERE tenant_id = $1",
                tenant.id,
            )
        )
        secret = await near_key_secret(conn, store.settings)
        errors = dict(
            await conn.fetch(
                "SELECT id, last_error FROM extraction_jobs WHERE id = ANY($1)",
                [second_copy.job_id, dup_of_holder.job_id],
            )
        )

    # the index keeps keyed hashes of the numbers (migration 039), never the numbers
    def held(number: str) -> str:
        ident = invoice_identity(invoice(number))
        assert ident is not None
        return keyed_identity(secret, tenant.id, ident).invoice_number

    assert owners == {
        held("n-1"): fresh.job_id,
        held("r-1"): takes_over.job_id,
        held("h-1"): holder.job_id,
    }
    assert errors == {
        second_copy.job_id: f"duplicate_invoice of job {fresh.job_id}",
        dup_of_holder.job_id: f"duplicate_invoice of job {holder.job_id}",
    }
