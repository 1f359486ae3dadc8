"""The demo's per-invoice query on real PostgreSQL: results and failures from the demo's
database, ERP applications from the reference ERP's own, joined by job id."""

from __future__ import annotations

import asyncpg
import pytest

from benchmarks.demo.erp import create_erp_database, read_erp_postings
from benchmarks.demo.report import invoice_rows
from benchmarks.demo.rows import build_row
from benchmarks.demo.view import format_table
from benchmarks.invoices.generator import generate_invoice
from pipeline.data_keys import DataKeys
from pipeline.database import connect, drop_database
from pipeline.jobs import admin_dsn
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.usage import AttemptUsage
from tests.support.delivery import fetch, job_store
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration


async def test_invoice_rows_join_results_failures_and_erp_applications(
    pool: asyncpg.Pool, dsn: str
) -> None:
    store = job_store(pool)
    tenant = await new_tenant(pool, "acme-gmbh")
    invoice = generate_invoice(2026).truth
    truth = invoice.model_dump(mode="json")
    ids = [(await store.accept(request(tenant, key=f"demo-{i}"))).job_id for i in range(4)]
    leases = {lease.job_id: lease for lease in await store.claim("driver-0", limit=3)}
    ok, review, failed = (leases[i] for i in ids[:3])
    await store.succeed(
        ok, result=truth, usage=AttemptUsage(prompt_tokens=500, completion_tokens=812)
    )
    # Another supplier invoice (its own number): the same one would also be a
    # duplicate_invoice of the first job (issue 20), which is not what this row shows.
    await store.succeed(
        review,
        result={**truth, "invoice_number": {**truth["invoice_number"], "value": "OTHER-1"}},
        validation={"reasons": [{"code": "supplier_confusable", "field": "supplier.name"}]},
        decision=JobState.REVIEW_REQUIRED,
    )
    await store.fail(failed, error_class="malformed_output", reason="attempts_exhausted")
    erp_dsn = await create_erp_database(dsn)  # the ERP's own database, as the demo's
    try:
        erp = await connect(erp_dsn)
        try:  # what the reference ERP receiver writes, in its database
            await erp.execute(
                "INSERT INTO erp_postings (ledger, job_id, delivery_id, invoice, posted_at,"
                " effect_count, applications, deliveries_seen)"
                " VALUES ('default', $1, 'msg_1', '{}', now(), 1, 2, 2)",
                ok.job_id,
            )
        finally:
            await erp.close()
        postings = await read_erp_postings(erp_dsn)
    finally:
        await drop_database(admin_dsn(erp_dsn)[0], admin_dsn(erp_dsn)[1])
    assert (postings.postings, postings.duplicates_absorbed) == (1, 1)
    states = {r["id"]: r["state"] for r in await fetch(pool, q("report_job_states"))}
    assert [states[i] for i in ids] == ["SUCCEEDED", "REVIEW_REQUIRED", "FAILED_TERMINAL", "READY"]
    async with pool.acquire() as conn:  # the IBAN is sealed when a KEK is configured
        rows = await invoice_rows(conn, DataKeys.from_settings(Settings()), postings)
    submitted = {"tenant": "acme-gmbh", "seed": 2026, "variant": "clean", "expected": "SUCCEEDED"}
    built = [
        build_row(n, {**submitted, "job_id": i}, rows[i], truth) for n, i in enumerate(ids, start=1)
    ]
    first, second, third, fourth = built
    assert invoice.supplier.name and invoice.gross_total and invoice.currency
    assert (first.supplier, first.gross_total, first.currency) == (
        invoice.supplier.name.value,
        str(invoice.gross_total.value),
        invoice.currency.value,
    )
    assert first.matches_truth is True and first.completion_tokens == 812
    assert first.erp == "posted 2x" and not first.posted_exactly_once
    assert second.decision == "REVIEW_REQUIRED" and second.reasons == ("supplier_confusable",)
    assert second.erp == "not posted"
    assert third.decision == "FAILED_TERMINAL" and third.matches_truth is None
    assert third.reasons == ("attempts_exhausted", "malformed_output")
    assert fourth.decision == "READY" and fourth.reasons == ()
    assert len(format_table(built)) == 6
