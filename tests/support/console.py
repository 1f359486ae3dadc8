"""Helpers for console tests: invoices awaiting review with real grounding, and a
logged-in console session over HTTP."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date
from decimal import Decimal
from html import unescape
from typing import Any

import asyncpg
import httpx

from benchmarks.invoices.generator import GeneratedInvoice, generate_invoice
from benchmarks.invoices.variants import Variant
from pipeline.extraction import answer_for
from pipeline.invoice import (
    Extraction,
    Reason,
    amount_strings,
    decimal_mark,
    read_number,
    uses_space_groups,
)
from pipeline.jobs import JobStore
from pipeline.states import JobState
from pipeline.tenants import upsert_supplier
from pipeline.validation import validate
from pipeline.worker import interpret
from tests.support.api import TenantKey


@dataclass(frozen=True)
class AwaitingReview:
    job_id: uuid.UUID
    state_version: int
    invoice: GeneratedInvoice
    wrong_gross: str
    right_gross: str
    reasons: list[dict[str, str]]


async def invoice_awaiting_review(
    pool: asyncpg.Pool,
    client: httpx.AsyncClient,
    tk: TenantKey,
    *,
    seed: int = 1,
    text: str | None = None,
    misread: Callable[[dict[str, Any]], None] | None = None,
    read_with: Sequence[Reason] = (),
) -> AwaitingReview:
    """An invoice accepted over HTTP whose model answer took another printed amount (a
    row's, not a total: a copied total is put right by grounding) as the gross total:
    grounded and validated for real, so it waits with ``gross_total_mismatch``.
    ``text`` replaces the OCR text's tail (hostile content).

    With ``misread``, the gross total is right and ``misread`` changes the grounded
    result instead (a row read wrong); validation then runs on the changed result.
    ``read_with``: reasons another stage found reading the document (the e-invoice
    reader's, OCR's), stored first in the report as that stage would."""
    inv = generate_invoice(
        seed, Variant.CLEAN, anchor=date.today(), max_line_items=3, languages=("en",)
    )
    ocr = inv.ocr_text + (text or "")
    async with pool.acquire() as conn:
        await upsert_supplier(conn, tk.tenant.id, inv.supplier)
    r = await client.post(
        "/v1/extraction-jobs", json={"document": {"text": ocr}}, headers=tk.headers
    )
    assert r.status_code == 202, r.text
    store = JobStore(pool)
    (lease,) = await store.claim("console-test-driver")
    answer = json.loads(answer_for(inv.truth, ocr))
    assert inv.truth.gross_total is not None
    wrong = _not_a_total(ocr, answer) if misread is None else answer["gross"]
    answer["gross"] = wrong
    it = interpret(json.dumps(answer), ocr, inv.master_data, today=date.today())
    result, report = it.result(), it.report
    if misread is not None:
        misread(result)
        extraction = Extraction.model_validate(result)
        report = validate(extraction, ocr, inv.master_data, today=date.today())
    if read_with:
        report = replace(report, reasons=(*read_with, *report.reasons))
    settled = await store.succeed(
        lease,
        result=result,
        validation=report.as_dict(),
        decision=JobState.REVIEW_REQUIRED,
    )
    assert settled.state is JobState.REVIEW_REQUIRED
    return AwaitingReview(
        lease.job_id,
        settled.state_version,
        inv,
        wrong,
        str(inv.truth.gross_total.value),
        [r.as_dict() for r in report.reasons],
    )


_TOKEN = re.compile(r'name="(csrf_token|login_token)" value="([^"]+)"')


def form_token(html: str, name: str = "csrf_token") -> str:
    for found, value in _TOKEN.findall(html):
        if found == name:
            return value
    raise AssertionError(f"no {name} in the page")


async def console_login(client: httpx.AsyncClient, tk: TenantKey) -> httpx.Response:
    """Sign in through the login form (cookies stay on ``client``); the redirect."""
    page = await client.get("/console/login")
    assert page.status_code == 200
    r = await client.post(
        "/console/login",
        data={"api_key": tk.key, "login_token": form_token(page.text, "login_token")},
    )
    assert r.status_code == 303, r.text
    return r


async def job_page(client: httpx.AsyncClient, job_id: uuid.UUID) -> tuple[str, str]:
    """The review page's HTML and its CSRF token."""
    r = await client.get(f"/console/jobs/{job_id}")
    assert r.status_code == 200, r.text
    return r.text, form_token(r.text)


def correction_form(
    csrf: str, state_version: int, action: str = "save", **values: Any
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "csrf_token": csrf,
        "state_version": str(state_version),
        "action": action,
    }
    data.update({f"value.{k}": v for k, v in values.items()})
    return data


async def job_row(pool: asyncpg.Pool, job_id: uuid.UUID) -> dict[str, Any]:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT j.state, j.state_version, r.result, r.validation FROM extraction_jobs j"
            " JOIN extraction_results r ON r.job_id = j.id WHERE j.id = $1",
            job_id,
        )
    return dict(row.items())


def _not_a_total(ocr: str, answer: dict[str, Any]) -> str:
    """The first amount the document prints whose value is none of its totals."""
    mark = decimal_mark(ocr)
    totals = {read_number(answer[k], mark) for k in ("net", "tax", "gross")}
    for printed in amount_strings(ocr, mark, space_groups=uses_space_groups(ocr, mark)):
        if read_number(printed, mark) not in totals:
            return printed
    raise AssertionError("the invoice prints no amount besides its totals")


def review_inputs(html: str) -> list[tuple[str, str]]:
    """The review form's value inputs as a browser would post them."""
    found = re.findall(r'<input id="[^"]*" name="([^"]+)" value="([^"]*)"', html)
    return [(name, unescape(value)) for name, value in found]


def misread_line_amount(result: dict[str, Any]) -> None:
    """A ``misread`` for :func:`invoice_awaiting_review`: line 1's amount 10 too high."""
    item = result["line_items"][0]
    item["line_amount"] = str(Decimal(item["line_amount"]) + 10)


async def approve_line_amount(
    client: httpx.AsyncClient, tk: TenantKey, job: AwaitingReview, amount: str
) -> httpx.Response:
    """Sign in, post the job's review form back with line 1's amount set to ``amount``
    (every other value as the page shows it), and approve; the answer."""
    await console_login(client, tk)
    html, csrf = await job_page(client, job.job_id)
    fields = {
        name: value
        for name, value in review_inputs(html)
        if name.startswith("value.") and not name.startswith("value.line_items[0].line_")
    }
    return await client.post(
        f"/console/jobs/{job.job_id}/correct",
        data={
            **correction_form(csrf, job.state_version, "approve"),
            **fields,
            "value.line_items[0].line_amount": amount,
        },
    )
