"""The document stage end to end (issue 43): files uploaded through the API, read by a
real driver from the document store, extracted over the fake provider (a real HTTP
process on loopback), on real PostgreSQL.

A text-layer PDF of a generated invoice must reach the decision its text reaches when
pasted; a file whose stored bytes changed or vanished, or on which no reader finds text,
must end with its named reason, without a provider call (e-invoices:
tests/integration/test_einvoice_intake.py).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from pipeline.api import create_app
from pipeline.documents import FolderStore, open_document_store, read_pdf_text, sha256_hex
from pipeline.extraction import (
    OpenAICompatibleEngine,
    answer_for,
    document_in_prompt,
    shown_document,
)
from pipeline.jobs import JobStore, render_explain
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.tenants import permit_currencies, upsert_supplier
from pipeline.tracing import SPAN_DOCUMENT
from pipeline.worker import AttemptRunner, OcrConfidences, WorkerConfig
from pipeline.worker.document_stage import OCR_READER, PDF_READER, DocumentStage, keep_text
from pipeline.worker.ocr_proof import WordConfidence
from tests.support.api import TenantKey, asgi_client, settings_for, tenant_with_key
from tests.support.console import console_login, job_page
from tests.support.drivers import run_document_driver
from tests.support.pdfs import blank_pdf, text_pdf, tiny_png
from tests.support.scans import encode, render_text

pytestmark = pytest.mark.integration

TODAY = datetime.now(UTC).date()
_EVBOX = re.compile(r'<rect class="evbox"[^>]*data-field="([^"]+)"')
JOBS = "/v1/extraction-jobs"


def _settings(dsn: str, state: Path) -> Settings:
    return settings_for(dsn, state_dir=state)


async def _with_master_data(pool: asyncpg.Pool, tk: TenantKey, inv: GeneratedInvoice) -> None:
    async with pool.acquire() as conn:
        await upsert_supplier(conn, tk.tenant.id, inv.supplier)
        await permit_currencies(conn, tk.tenant.id, {inv.currency})


async def _upload(client: httpx.AsyncClient, tk: TenantKey, data: bytes, name: str) -> uuid.UUID:
    r = await client.post(JOBS, files={"document": (name, data)}, headers=tk.headers)
    assert r.status_code == 202, r.text
    return uuid.UUID(r.json()["job_id"])


async def test_a_text_layer_pdf_reaches_the_decision_of_its_pasted_text(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    # The text layer is laid out on a grid (pipeline/documents/grid.py): columns and
    # blank lines come back, so the extraction reads the PDF as it reads the text.
    inv = generate_invoice(9, languages=("en",), max_line_items=3, anchor=TODAY)
    pdf = text_pdf(inv.ocr_text)
    # What the text layer reads back is not byte for byte the generator's text (the
    # grid's spacing is the PDF's, trailing spaces and page-end lines differ), so
    # seeing it in the prompt proves the driver read the PDF, not a copy of the text.
    layer = "\f".join(page.laid_out().text for page in read_pdf_text(pdf, max_pages=10).pages)
    assert layer != inv.ocr_text
    shown_texts: list[str] = []
    known = {shown_document(inv.ocr_text), shown_document(layer)}

    def answer(body: dict[str, Any]) -> Any:
        shown = document_in_prompt(body.get("messages", []))
        if shown is None or shown not in known:
            return "{}"
        shown_texts.append(shown)
        return answer_for(inv.candidate, inv.ocr_text)

    settings = _settings(dsn, tmp_path)
    # The same supplier invoice under one tenant twice would be held as a duplicate:
    # each pasted twin belongs to a tenant of its own with the same master data.
    pdf_tenant, text_tenant, layer_tenant = [await tenant_with_key(pool) for _ in range(3)]
    for tk in (pdf_tenant, text_tenant, layer_tenant):
        await _with_master_data(pool, tk, inv)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        pdf_job = await _upload(client, pdf_tenant, pdf, "invoice.pdf")
        text_job, layer_job = [
            uuid.UUID(r.json()["job_id"])
            for r in [
                await client.post(JOBS, json={"document": {"text": text}}, headers=tk.headers)
                for text, tk in ((inv.ocr_text, text_tenant), (layer, layer_tenant))
            ]
        ]
    rows, calls = await run_document_driver(pool, settings, 3, answer=answer)
    assert rows[text_job]["state"] == inv.expected_decision.value == "SUCCEEDED"
    # The PDF decides as its text layer pasted does, and here as the generator's text.
    assert rows[pdf_job]["state"] == rows[layer_job]["state"] == rows[text_job]["state"]
    assert calls == 3 and shown_texts.count(shown_document(layer)) == 2
    async with pool.acquire() as conn:
        results = {
            r["job_id"]: r["result"]
            for r in await conn.fetch(
                "SELECT job_id, result FROM extraction_results WHERE job_id = ANY($1::uuid[])",
                [pdf_job, text_job],
            )
        }
    for field in ("invoice_number", "gross_total", "currency"):
        assert results[pdf_job][field]["value"] == results[text_job][field]["value"], field
    # The operator's explain names the file the job was accepted with.
    trail = render_explain(await JobStore(pool, settings).explain(pdf_job))
    assert f"application/pdf, {len(pdf)} bytes, 1 page(s); fenceline-store://" in trail
    read = [s for s in spans.get_finished_spans() if s.name == SPAN_DOCUMENT]
    assert len(read) == 1
    attributes = read[0].attributes or {}
    assert attributes["fenceline.document.media_type"] == "application/pdf"
    assert attributes["fenceline.document.pages"] == 1
    assert attributes["fenceline.document.characters"] == len(layer)


async def test_files_that_cannot_be_read_end_with_their_reason_and_no_call(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    settings = _settings(dsn, tmp_path)
    folder = FolderStore(tmp_path / "documents")
    tampered = text_pdf("Invoice 1\nTotal 10.00 EUR")
    vanished = text_pdf("Invoice 2\nTotal 20.00 EUR")
    tk = await tenant_with_key(pool)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        jobs = {
            await _upload(client, tk, tampered, "a.pdf"): "document_changed",
            await _upload(client, tk, vanished, "b.pdf"): "document_missing",
            await _upload(client, tk, tiny_png(), "c.png"): "no_text_found",
            await _upload(client, tk, blank_pdf(2), "d.pdf"): "no_text_found",
        }
    # Behind the store's back: the first object's bytes replaced, the second deleted.
    path = folder.path_for(sha256_hex(tampered))
    os.chmod(path, 0o644)
    path.write_bytes(tampered + b"\n% changed behind the store\n")
    folder.path_for(sha256_hex(vanished)).unlink()
    rows, calls = await run_document_driver(pool, settings, len(jobs))
    got = {job: (rows[job]["state"], rows[job]["terminal_reason"]) for job in jobs}
    assert got == {job: ("FAILED_TERMINAL", reason) for job, reason in jobs.items()}
    assert calls == 0  # nothing unreadable reaches the model
    async with pool.acquire() as conn:
        attempts = await conn.fetchval(
            "SELECT max(attempt) FROM extraction_jobs WHERE id = ANY($1::uuid[])", list(jobs)
        )
    assert attempts == 1  # terminal at once: none of these is retried


async def test_a_driver_without_a_document_store_leaves_a_file_for_another(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """No store configured is the store not answering: retryable, never terminal."""
    settings = _settings(dsn, tmp_path)
    tk = await tenant_with_key(pool)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        job = await _upload(client, tk, text_pdf("Invoice 3\nTotal 30.00 EUR"), "c.pdf")
    store = JobStore(pool, Settings(lease_seconds=30))
    config = WorkerConfig(worker_id="no-store", idle_poll_seconds=0.1)
    with FakeProvider(answer=lambda _: "{}") as fake:
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            runner = AttemptRunner(store, engine, config)
            lease = (await store.claim("no-store"))[0]
            report = await runner.run(lease)
        assert fake.calls() == []
    assert report.outcome == "retry_scheduled", report
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT state, last_error_class FROM extraction_jobs WHERE id = $1", job
        )
    assert (row["state"], row["last_error_class"]) == (
        "RETRY_SCHEDULED",
        "document_store_unavailable",
    )


async def test_a_files_text_is_kept_once_and_read_by_review_and_later_attempts(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """The text an attempt derived from a file is the document's text from then on:
    the review console reads it, and a later attempt reads it without the file."""
    inv = generate_invoice(9, languages=("en",), max_line_items=3, anchor=TODAY)
    pdf = text_pdf(inv.ocr_text)
    layer = "\f".join(page.laid_out().text for page in read_pdf_text(pdf, max_pages=10).pages)
    settings = _settings(dsn, tmp_path)
    tk = await tenant_with_key(pool)
    await _with_master_data(pool, tk, inv)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        job = await _upload(client, tk, pdf, "invoice.pdf")
    # An answer without the totals: the job goes to review, where the page must be shown.
    wrong = json.dumps({**json.loads(answer_for(inv.candidate, inv.ocr_text)), "gross": None})
    rows, _ = await run_document_driver(pool, settings, 1, answer=lambda _: wrong)
    assert rows[job]["state"] == "REVIEW_REQUIRED"
    async with pool.acquire() as conn:
        kept = await conn.fetchrow(
            "SELECT t.content, t.reader FROM document_texts t "
            "JOIN extraction_jobs j ON j.document_id = t.document_id WHERE j.id = $1",
            job,
        )
        subject = await conn.fetchrow(
            "SELECT coalesce(d.content, t.content) AS ocr_text FROM extraction_jobs j "
            "JOIN documents d ON d.id = j.document_id "
            "LEFT JOIN document_texts t ON t.document_id = d.id WHERE j.id = $1",
            job,
        )
        doc = await conn.fetchrow(
            "SELECT d.* FROM documents d JOIN extraction_jobs j ON j.document_id = d.id "
            "WHERE j.id = $1",
            job,
        )
    assert kept is not None and kept["content"] == layer and kept["reader"] == PDF_READER
    assert subject["ocr_text"] == layer
    # The file gone, a later attempt still reads the kept text: it never reads it again.
    FolderStore(tmp_path / "documents").path_for(sha256_hex(pdf)).unlink()
    stage = DocumentStage(open_document_store(settings), max_pages=10)
    async with pool.acquire() as conn:
        row = await conn.fetchrow(q("document_get"), doc["id"], doc["tenant_id"])
    read = await stage.read(row)
    assert (read.text, read.derived_by) == (layer, None)
    assert read.words is not None and not read.by_ocr  # the kept words, read back
    # A second writer keeps nothing: the first text and its words stay the document's.
    assert await keep_text(pool, row, "another reading", PDF_READER) == (layer, read.words)


@pytest.mark.ocr
async def test_a_scans_words_are_kept_with_its_text_and_box_its_evidence(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """An OCR'd page's words are kept beside its text (migration 025), so the review
    console draws evidence boxes on the scan, which it cannot read again."""
    inv = generate_invoice(9, languages=("en",), max_line_items=3, anchor=TODAY)
    png = encode(render_text(inv.ocr_text, dpi=300))
    settings = _settings(dsn, tmp_path)
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    await _with_master_data(pool, tk, inv)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        job = await _upload(client, tk, png, "invoice.png")
        wrong = json.dumps({**json.loads(answer_for(inv.candidate, inv.ocr_text)), "gross": None})
        rows, _ = await run_document_driver(pool, settings, 1, answer=lambda _: wrong)
        assert rows[job]["state"] == "REVIEW_REQUIRED"
        async with pool.acquire() as conn:
            kept = await conn.fetchrow(
                "SELECT t.content, t.words FROM document_texts t "
                "JOIN extraction_jobs j ON j.document_id = t.document_id WHERE j.id = $1",
                job,
            )
        await console_login(client, tk)
        html, _ = await job_page(client, job)
    assert kept is not None and kept["words"] is not None
    (page,) = kept["words"]["pages"]
    assert page["number"] == 1 and len(page["words"]) > 50
    text = kept["content"]
    for start, end, left, top, right, bottom, confidence, marks in page["words"]:
        assert text[start:end].strip() == text[start:end] != ""
        assert 0 <= left < right <= 1 and 0 <= top < bottom <= 1
        assert 0 <= confidence <= 100
        assert marks is None or len(marks) == end - start  # ink above/below each character
    assert f'<img src="/console/jobs/{job}/pages/1.png"' in html
    assert {"invoice_number", "supplier.name"} <= set(_EVBOX.findall(html))


async def test_an_ocr_texts_words_are_kept_with_it_and_a_retry_proves_against_them(
    pool: asyncpg.Pool, dsn: str, tmp_path: Path
) -> None:
    """A retry proves its OCR'd values against the kept text's own words and their
    confidences (migration 025, the one store of them); the first writer's win."""
    settings = _settings(dsn, tmp_path)
    tk = await tenant_with_key(pool)
    async with asgi_client(create_app(settings, pool=pool)) as client:
        job = await _upload(client, tk, tiny_png(), "scan.png")
    async with pool.acquire() as conn:
        doc = await conn.fetchrow(
            "SELECT d.* FROM documents d JOIN extraction_jobs j ON j.document_id = d.id "
            "WHERE j.id = $1",
            job,
        )

    def words(confidence: float) -> dict[str, Any]:
        return {
            "version": 1,
            "pages": [{"number": 1, "words": [[0, 7, 0.1, 0.1, 0.5, 0.2, confidence]]}],
        }

    first, other = words(91.25), words(12.0)
    assert await keep_text(pool, doc, "INVOICE 7", OCR_READER, first) == ("INVOICE 7", first)
    assert await keep_text(pool, doc, "INVOICE 7", OCR_READER, other) == ("INVOICE 7", first)
    async with pool.acquire() as conn:
        row = await conn.fetchrow(q("document_get"), doc["id"], doc["tenant_id"])
    read = await DocumentStage(open_document_store(settings), max_pages=10).read(row)
    assert (read.text, read.by_ocr, read.words) == ("INVOICE 7", True, first)
    assert OcrConfidences.from_words(read.words) == OcrConfidences(
        frozenset({1}), (WordConfidence(1, 0, 7, 91.25),)
    )
