"""An uploaded PDF invoice waiting for review, as the worker would leave it: the file
in the document store, its text kept (document_texts), a grounded and validated
result whose gross total took a row's amount (``gross_total_mismatch``)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import date

import asyncpg
import httpx

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from benchmarks.invoices.variants import Variant
from pipeline.documents import MediaType, read_document
from pipeline.extraction import answer_for
from pipeline.jobs import JobStore
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import upsert_supplier
from pipeline.worker import interpret
from pipeline.worker.document_stage import PDF_READER, keep_text
from tests.support.api import TenantKey
from tests.support.console import _not_a_total
from tests.support.pdfs import text_pdf


@dataclass(frozen=True)
class FileAwaitingReview:
    job_id: uuid.UUID
    state_version: int
    invoice: GeneratedInvoice
    pdf: bytes
    #: The text the file was kept as: what evidence offsets point into.
    kept_text: str
    wrong_gross: str
    right_gross: str


async def file_awaiting_review(
    pool: asyncpg.Pool,
    client: httpx.AsyncClient,
    tk: TenantKey,
    *,
    seed: int = 2,
    settings: Settings | None = None,
) -> FileAwaitingReview:
    """A generated invoice drawn as a text-layer PDF, uploaded over HTTP, its text read
    and kept as the document stage does (sealed when ``settings`` name a KEK, as is the
    supplier's IBAN on file), answered with a wrong gross total."""
    inv = generate_invoice(
        seed, Variant.CLEAN, anchor=date.today(), max_line_items=3, languages=("en",)
    )
    assert inv.truth.gross_total is not None
    pdf = text_pdf(inv.ocr_text)
    store = JobStore(pool, settings)
    async with pool.acquire() as conn:  # the IBAN on file sealed too
        await upsert_supplier(conn, tk.tenant.id, inv.supplier, keys=store.data_keys)
    r = await client.post(
        "/v1/extraction-jobs", files={"document": ("invoice.pdf", pdf)}, headers=tk.headers
    )
    assert r.status_code == 202, r.text
    (lease,) = await store.claim("page-view-test-driver")
    async with pool.acquire() as conn:
        doc = await conn.fetchrow(
            "SELECT d.id, d.tenant_id, d.sha256 FROM documents d JOIN extraction_jobs j"
            " ON j.document_id = d.id WHERE j.id = $1",
            lease.job_id,
        )
    text = read_document(pdf, MediaType.PDF, Settings()).text
    kept, _ = await keep_text(pool, doc, text, PDF_READER, keys=store.data_keys)
    answer = json.loads(answer_for(inv.truth, kept))
    wrong = _not_a_total(kept, answer)
    answer["gross"] = wrong
    it = interpret(json.dumps(answer), kept, inv.master_data, today=date.today())
    settled = await store.succeed(
        lease,
        result=it.result(),
        validation=it.report.as_dict(),
        decision=JobState.REVIEW_REQUIRED,
    )
    assert settled.state is JobState.REVIEW_REQUIRED
    return FileAwaitingReview(
        lease.job_id,
        settled.state_version,
        inv,
        pdf,
        kept,
        wrong,
        str(inv.truth.gross_total.value),
    )
