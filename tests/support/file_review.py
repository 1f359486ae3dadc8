"""An uploaded invoice file waiting for review, as the worker would leave it: the file
in the document store, its text kept (document_texts), a grounded and validated
result whose gross total took a row's amount (``gross_total_mismatch``).

The file is a text-layer PDF (:func:`file_awaiting_review`) or a scan drawn with a
known geometry (:func:`scan_awaiting_review`: tests/support/scans.py, fed skewed and
put in sideways), read by OCR with its words and their page's turn kept beside the
text as the document stage keeps them."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from datetime import date
from typing import Any

import asyncpg
import httpx
from PIL import ImageFont

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from benchmarks.invoices.variants import Variant
from pipeline.documents import MediaType, read_document, words_to_keep
from pipeline.extraction import answer_for
from pipeline.jobs import JobStore
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import upsert_supplier
from pipeline.worker import interpret
from pipeline.worker.document_stage import OCR_READER, PDF_READER, keep_text
from tests.support.api import TenantKey
from tests.support.console import _not_a_total
from tests.support.pdfs import text_pdf
from tests.support.scans import FONT, encode, render_text


@dataclass(frozen=True)
class FileAwaitingReview:
    job_id: uuid.UUID
    state_version: int
    invoice: GeneratedInvoice
    #: The uploaded file's bytes (a PDF or a scan).
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
    inv = _invoice(seed)
    return await _awaiting_review(
        pool, client, tk, inv, "invoice.pdf", text_pdf(inv.ocr_text), settings
    )


@dataclass(frozen=True)
class DrawnScan:
    """How a scan was drawn (:func:`tests.support.scans.render_text`): the invoice's
    text in DejaVu Sans Mono at ``points`` on a page at ``dpi``, a line every ``pitch``
    pixels from ``margin`` down, a character every ``advance`` pixels from ``margin``
    in; then turned ``angle`` degrees counter-clockwise on a canvas grown from
    ``upright`` to ``skewed`` pixels (a skewed feed), then a quarter turn
    counter-clockwise (the page fed sideways)."""

    dpi: int
    points: float
    margin: int
    pitch: int
    advance: float
    angle: float
    upright: tuple[int, int]
    skewed: tuple[int, int]


async def scan_awaiting_review(
    pool: asyncpg.Pool,
    client: httpx.AsyncClient,
    tk: TenantKey,
    *,
    seed: int = 2,
    angle: float = 2.0,
) -> tuple[FileAwaitingReview, DrawnScan]:
    """A generated invoice drawn as a one-page scan (PNG, 300 dpi) fed ``angle`` degrees
    askew and sideways, uploaded over HTTP, read by OCR (about 5 s) and kept with its
    words as the document stage keeps them, answered with a wrong gross total."""
    inv = _invoice(seed)
    dpi, points = 300, 9.0
    upright = render_text(inv.ocr_text, dpi=dpi, points=points)
    skewed = render_text(inv.ocr_text, dpi=dpi, points=points, angle=angle)
    sideways = skewed.rotate(90, expand=True)
    font = ImageFont.truetype(FONT, round(points * dpi / 72))
    size = round(points * dpi / 72)
    drawn = DrawnScan(
        dpi,
        points,
        dpi // 3,
        round(size * 1.35),
        font.getlength("M"),
        angle,
        upright.size,
        skewed.size,
    )
    job = await _awaiting_review(
        pool, client, tk, inv, "invoice.png", encode(sideways, dpi=dpi), None
    )
    return job, drawn


def _invoice(seed: int) -> GeneratedInvoice:
    inv = generate_invoice(
        seed, Variant.CLEAN, anchor=date.today(), max_line_items=3, languages=("en",)
    )
    assert inv.truth.gross_total is not None
    return inv


async def _awaiting_review(
    pool: asyncpg.Pool,
    client: httpx.AsyncClient,
    tk: TenantKey,
    inv: GeneratedInvoice,
    filename: str,
    data: bytes,
    settings: Settings | None,
) -> FileAwaitingReview:
    assert inv.truth.gross_total is not None
    store = JobStore(pool, settings)
    async with pool.acquire() as conn:  # the IBAN on file sealed too
        await upsert_supplier(conn, tk.tenant.id, inv.supplier, keys=store.data_keys)
    r = await client.post(
        "/v1/extraction-jobs", files={"document": (filename, data)}, headers=tk.headers
    )
    assert r.status_code == 202, r.text
    (lease,) = await store.claim("page-view-test-driver")
    async with pool.acquire() as conn:
        doc = await conn.fetchrow(
            "SELECT d.id, d.tenant_id, d.sha256, d.content_type FROM documents d"
            " JOIN extraction_jobs j ON j.document_id = d.id WHERE j.id = $1",
            lease.job_id,
        )
    media = MediaType(doc["content_type"])
    if media is MediaType.PDF:
        text = read_document(data, media, Settings()).text
        kept, _ = await keep_text(pool, doc, text, PDF_READER, keys=store.data_keys)
    else:
        read = await asyncio.to_thread(read_document, data, media, Settings())
        kept, _ = await keep_text(
            pool, doc, read.text, OCR_READER, words_to_keep(read), keys=store.data_keys
        )
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
        data,
        kept,
        wrong,
        str(inv.truth.gross_total.value),
    )


#: The page view's geometry in the browser: the field's first evidence box relative to
#: the shown page image, scaled to the page's own width and height (arguments: field,
#: width, height); null until the image is shown.
EVIDENCE_BOX_GEOMETRY = """
const [field, w, h] = arguments;
const img = document.querySelector('figure.page-image img');
const box = document.querySelector('rect.evbox[data-field="' + field + '"]');
if (!img || !box || !img.complete || img.naturalWidth === 0) { return null; }
const i = img.getBoundingClientRect(), b = box.getBoundingClientRect();
return {left: (b.left - i.left) / i.width * w, right: (b.right - i.left) / i.width * w,
        top: (b.top - i.top) / i.height * h, bottom: (b.bottom - i.top) / i.height * h,
        width: i.width};
"""


async def gross_evidence(pool: asyncpg.Pool, job_id: uuid.UUID) -> dict[str, Any]:
    """The stored evidence of a job's gross total."""
    async with pool.acquire() as conn:
        result = await conn.fetchval(
            "SELECT result FROM extraction_results WHERE job_id = $1", job_id
        )
    evidence: dict[str, Any] = result["gross_total"]["evidence"]
    return evidence


def evidence_line(kept_text: str, evidence: dict[str, Any]) -> str:
    """The line of the kept text (pages joined by form feeds) that ``evidence`` points
    into: its page's line holding the evidence's start offset."""
    page = kept_text.split("\f")[evidence["page"] - 1]
    line_start = page.rfind("\n", 0, evidence["start"]) + 1
    line_end = page.find("\n", evidence["start"])
    return page[line_start : line_end if line_end >= 0 else None]
